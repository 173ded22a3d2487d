//! Atomic file replacement, for results, ledgers, checkpoints and simulated data alike.
//!
//! A regular file (or a new path) is replaced by renaming a finished temporary file over
//! it, so a reader sees the old file or the new one, never half of one. Anything else at
//! the path (a device, a FIFO, a terminal, `>(cmd)`) is written through instead: renaming
//! over it would silently replace, say, `/dev/null` with a regular file. A symlink is
//! followed: its target is what gets replaced or written through, and the link stays.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::ConnectorError;

/// Temporary files being written now, so a signal handler can remove them
/// ([`remove_unfinished`]) before the process exits.
static UNFINISHED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn unfinished() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    UNFINISHED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Removes every temporary file this process is still writing. For a signal handler:
/// after it returns the process should exit without finishing those writes.
pub fn remove_unfinished() {
    for path in unfinished().drain(..) {
        let _ = std::fs::remove_file(path);
    }
}

/// Runs `write` on a temporary file beside `target` (a random name, created with
/// `O_EXCL`, so a planted file or symlink is never written through), syncs it, renames it
/// over `target` and syncs the directory. On any error the temporary file is removed and
/// `target` is untouched. When `target` exists and is not a regular file, `write` gets
/// the opened target itself.
pub fn write_atomically(
    target: &Path,
    write: impl FnOnce(File) -> Result<File, ConnectorError>,
) -> Result<(), ConnectorError> {
    prepare_atomically(target, write)?.commit()
}

/// The first half of [`write_atomically`]: the file written in full and synced under its
/// temporary name, not yet in place. [`Prepared::commit`] puts it in place; dropping it
/// uncommitted removes it, leaving `target` untouched. This lets a release check that its
/// records can be written before it spends from the privacy ledger, and publish them only
/// after the spend is saved. A target that is not a regular file (a FIFO, a device) is
/// written through at commit, since nothing can be staged beside it.
pub fn prepare_atomically<'w>(
    target: &Path,
    write: impl FnOnce(File) -> Result<File, ConnectorError> + 'w,
) -> Result<Prepared<'w>, ConnectorError> {
    let shown = target.display().to_string();
    let io = |source| ConnectorError::Io {
        path: shown.clone(),
        source,
    };
    // Follows symlinks: the kind of the file the link ends at decides.
    let target = match std::fs::metadata(target) {
        Ok(meta) if !meta.is_file() && !meta.is_dir() => {
            return Ok(Prepared {
                state: State::Through {
                    target: target.to_path_buf(),
                    write: Box::new(write),
                },
            });
        }
        Ok(_) if target.is_symlink() => std::fs::canonicalize(target).map_err(io)?,
        _ => target.to_path_buf(),
    };
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file_name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| ConnectorError::NoFileName {
            path: shown.to_string(),
        })?;
    remove_stale(&dir, &file_name);
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{file_name}.tmp-{}-", std::process::id()))
        .tempfile_in(&dir)
        .map_err(io)?;
    let (file, tmp_path) = tmp.keep().map_err(|e| io(e.error))?;
    unfinished().push(tmp_path.clone());
    let prepared = Prepared {
        state: State::Staged {
            tmp: tmp_path,
            target,
            dir,
        },
    };
    // On an error `prepared` is dropped, which removes the temporary file.
    write(file).and_then(|file| file.sync_all().map_err(io))?;
    Ok(prepared)
}

/// A file written by [`prepare_atomically`], waiting to be put in place.
pub struct Prepared<'w> {
    state: State<'w>,
}

type WriteThrough<'w> = Box<dyn FnOnce(File) -> Result<File, ConnectorError> + 'w>;

enum State<'w> {
    /// Written and synced under a temporary name beside `target`, in `dir`.
    Staged {
        tmp: PathBuf,
        target: PathBuf,
        dir: PathBuf,
    },
    /// A target that is not a regular file: written through at commit.
    Through {
        target: PathBuf,
        write: WriteThrough<'w>,
    },
    Done,
}

impl Prepared<'_> {
    /// Renames the temporary file over the target and syncs the directory (or writes a
    /// FIFO or device through).
    pub fn commit(mut self) -> Result<(), ConnectorError> {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Staged { tmp, target, dir } => {
                let io = |source| ConnectorError::Io {
                    path: target.display().to_string(),
                    source,
                };
                let renamed = std::fs::rename(&tmp, &target);
                unfinished().retain(|p| p != &tmp);
                if let Err(e) = renamed {
                    let _ = std::fs::remove_file(&tmp);
                    return Err(io(e));
                }
                sync_dir(&dir).map_err(io)
            }
            State::Through { target, write } => {
                let file = OpenOptions::new()
                    .write(true)
                    .open(&target)
                    .map_err(|source| ConnectorError::Io {
                        path: target.display().to_string(),
                        source,
                    })?;
                write(file).map(|_| ())
            }
            State::Done => Ok(()),
        }
    }
}

impl Drop for Prepared<'_> {
    fn drop(&mut self) {
        if let State::Staged { tmp, .. } = &self.state {
            unfinished().retain(|p| p != tmp);
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Syncs a directory, so that a rename into it survives a power loss (the file's own sync
/// does not cover its directory entry).
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir).and_then(|d| d.sync_all())
}

/// Removes the temporary files of `file_name` left in `dir` by processes that no longer
/// run (killed with SIGKILL, or by a power loss). Only Linux tells which processes run
/// (`/proc`); elsewhere nothing is removed.
fn remove_stale(dir: &Path, file_name: &str) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let prefix = format!(".{file_name}.tmp-");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let regular = entry.file_type().is_ok_and(|t| t.is_file());
        if regular && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use super::*;

    fn write_text(target: &Path, text: &'static str) -> Result<(), ConnectorError> {
        write_atomically(target, |mut f| {
            f.write_all(text.as_bytes())
                .map_err(|source| ConnectorError::Io {
                    path: "test".into(),
                    source,
                })?;
            Ok(f)
        })
    }

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp-"))
            .collect()
    }

    #[test]
    fn replaces_a_regular_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.jsonl");
        std::fs::write(&target, "old").unwrap();
        write_text(&target, "new").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn a_symlink_stays_a_link_and_its_target_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.jsonl");
        let link = dir.path().join("link.jsonl");
        std::fs::write(&real, "old").unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        write_text(&link, "new").unwrap();
        assert!(link.is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
    }

    #[test]
    fn a_fifo_is_written_through_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                let mut text = String::new();
                File::open(fifo).unwrap().read_to_string(&mut text).unwrap();
                text
            })
        };
        write_text(&fifo, "through the pipe").unwrap();
        assert_eq!(reader.join().unwrap(), "through the pipe");
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    }

    #[test]
    fn a_device_node_is_written_through_not_replaced() {
        // A scratch character device with /dev/null's numbers (1, 3), never the real one.
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("null");
        let made = std::process::Command::new("mknod")
            .arg(&dev)
            .args(["c", "1", "3"])
            .status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("SKIPPED: mknod needs root; the device case is not checked here");
            return;
        }
        write_text(&dev, "discarded").unwrap();
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::metadata(&dev)
            .unwrap()
            .file_type()
            .is_char_device());
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn a_planted_symlink_at_an_old_temporary_name_is_never_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep me").unwrap();
        // The name the first version used: `.NAME.tmp-PID`.
        let planted = dir
            .path()
            .join(format!(".out.jsonl.tmp-{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        write_text(&dir.path().join("out.jsonl"), "result").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    }

    /// Issue 43 (ledger_utf8): a release renders its records before it spends, and
    /// publishes them after. A prepared file is not in place until committed, and one
    /// dropped uncommitted leaves the old file and no temporary behind.
    #[test]
    fn a_prepared_file_appears_only_when_committed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.jsonl");
        std::fs::write(&target, "old").unwrap();
        let write = |mut f: File| {
            f.write_all(b"new").map_err(|source| ConnectorError::Io {
                path: "test".into(),
                source,
            })?;
            Ok(f)
        };
        let prepared = prepare_atomically(&target, write).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "old");
        assert_eq!(leftovers(dir.path()).len(), 1);
        drop(prepared);
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "old");
        assert!(leftovers(dir.path()).is_empty());
        prepare_atomically(&target, write)
            .unwrap()
            .commit()
            .unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        assert!(leftovers(dir.path()).is_empty());
        // A directory that does not exist fails at prepare, before anything is spent.
        let missing = dir.path().join("no/such/out.jsonl");
        assert!(prepare_atomically(&missing, write).is_err());
    }

    #[test]
    fn stale_temporaries_of_dead_processes_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        // PIDs above the kernel's pid_max (4,194,304 at most) belong to no process.
        let stale = dir.path().join(".out.jsonl.tmp-4194999-abc123");
        std::fs::write(&stale, "half a file").unwrap();
        let live = dir
            .path()
            .join(format!(".out.jsonl.tmp-{}-keep", std::process::id()));
        std::fs::write(&live, "another writer's").unwrap();
        write_text(&dir.path().join("out.jsonl"), "result").unwrap();
        assert!(!stale.exists());
        assert!(live.exists());
    }
}
