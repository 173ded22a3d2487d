//! The deployment's one privacy-budget ledger file: where it is (the config's `ledger`,
//! or `--ledger`), and the lock every read-modify-write of it holds.
//!
//! One file per deployment, named explicitly and absolute: a default in the working
//! directory, or a file beside the config or in the checkpoint directory, would give a
//! job run from elsewhere, a copied config or a moved-aside checkpoint a fresh budget over
//! the same data. Several processes (`batch` runs, `serve` instances, `merge`) may spend
//! from the file at once: each spend re-reads it under an exclusive `flock` on a sidecar
//! `<ledger>.lock` (the ledger itself is replaced by a rename on every save, so a lock on
//! it would not outlive the first save) and saves before unlocking, so no spend is lost.
//!
//! The lock, the read and the save all go through the file's one resolved name
//! ([`LedgerFile::resolved`]: symlinks and `..` resolved), so that two configs naming the
//! file and a symlink to it take one lock rather than one each.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use ldpstream_config::Config;
use tracing::info;

use crate::error::Error;
use crate::ledger::file::LedgerBook;

/// The ledger file of a deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerFile {
    path: PathBuf,
    /// Where the path came from, for messages: "ledger" or "--ledger".
    origin: &'static str,
}

impl LedgerFile {
    /// The ledger file named for `config`: `flag` (`--ledger`) over the config's `ledger`,
    /// whether or not a stream has a budget. Refused (exit 2) when `flag` is relative.
    pub fn named(config: &Config, flag: Option<&Path>) -> Result<Option<LedgerFile>, Error> {
        match (flag, &config.ledger) {
            (Some(path), _) if !path.is_absolute() => Err(Error::LedgerLocation {
                message: format!(
                    "--ledger {}: must be an absolute path (e.g. {}): a relative one would \
                     open another ledger from another working directory, and spend the \
                     budget again",
                    path.display(),
                    std::path::absolute(path).map_or_else(
                        |_| "/var/lib/ldpstream/ledger.json".into(),
                        |p| p.display().to_string()
                    )
                ),
            }),
            (Some(path), _) => Ok(Some(LedgerFile {
                path: path.to_path_buf(),
                origin: "--ledger",
            })),
            (None, Some(path)) => Ok(Some(LedgerFile {
                path: path.clone(),
                origin: "ledger",
            })),
            (None, None) => Ok(None),
        }
    }

    /// The ledger the streams of `config` spend from ([`LedgerFile::named`]); None when
    /// no stream has a budget. Refused (exit 2, naming the key) when a stream has one and
    /// no file is named: there is no default.
    pub fn locate(config: &Config, flag: Option<&Path>) -> Result<Option<LedgerFile>, Error> {
        let named = Self::named(config, flag)?;
        let budgeted: Vec<String> = config
            .streams
            .iter()
            .filter(|s| s.budget_epsilon.is_some())
            .map(|s| format!("{:?}", s.name))
            .collect();
        match named {
            _ if budgeted.is_empty() => Ok(None),
            Some(file) => Ok(Some(file)),
            None => Err(Error::LedgerLocation {
                message: format!(
                    "stream(s) {} have budget_epsilon, so the config must name the \
                     deployment's privacy-budget ledger: set the top-level key ledger = \
                     \"/var/lib/ldpstream/ledger.json\" (an absolute path, the same for every \
                     batch, merge and serve over this data), or pass --ledger PATH",
                    budgeted.join(", ")
                ),
            }),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path and where it was given, e.g. `/var/lib/l.json (ledger)`; with the file it
    /// resolves to when that is another name (`/etc/l.json → /var/lib/l.json (ledger)`).
    pub fn describe(&self) -> String {
        match resolve(&self.path) {
            Ok(real) if real != self.path => format!(
                "{} → {} ({})",
                self.path.display(),
                real.display(),
                self.origin
            ),
            _ => format!("{} ({})", self.path.display(), self.origin),
        }
    }

    /// The ledger's one name: symlinks, `.` and `..` resolved, so that every spelling of
    /// the file locks, reads and saves the same path. A file not created yet keeps its name
    /// in its resolved directory. Refused: a symlink to a file that does not exist (the
    /// first save would create a second ledger at its target or replace the link), a path
    /// naming no file, a directory that does not exist, and a file with other hard links
    /// (no name can be told to be theirs, and the first save, a rename, splits them).
    pub fn resolved(&self) -> Result<PathBuf, Error> {
        let refuse = |message: String| Error::Ledger {
            path: self.path.display().to_string(),
            message,
        };
        let real = resolve(&self.path).map_err(|e| refuse(e.to_string()))?;
        if let Ok(meta) = std::fs::metadata(&real) {
            use std::os::unix::fs::MetadataExt;
            if meta.is_file() && meta.nlink() > 1 {
                return Err(refuse(format!(
                    "{} has {} hard links: a spend through another of its names would take \
                     another lock, and the first save would split them into two ledgers; keep \
                     one name (a symlink to it is fine)",
                    real.display(),
                    meta.nlink()
                )));
            }
        }
        Ok(real)
    }

    /// Takes the exclusive lock (waiting for another process's spend to finish) and reads
    /// the ledger under it, both through the resolved name ([`Self::resolved`]).
    pub fn lock(&self) -> Result<LockedLedger, Error> {
        let real = self.resolved()?;
        let mut name = real.clone().into_os_string();
        name.push(".lock");
        let lock_path = PathBuf::from(name);
        let fail = |what: &str, e: std::io::Error| Error::Ledger {
            path: self.path.display().to_string(),
            message: format!("{what} {}: {e}", lock_path.display()),
        };
        // O_NOFOLLOW: a lock file planted as a symlink must not redirect our writes.
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&lock_path)
            .map_err(|e| {
                let hint = if e.kind() == std::io::ErrorKind::NotFound {
                    " (the ledger's directory must exist)"
                } else {
                    ""
                };
                fail(&format!("cannot open the lock file{hint}"), e)
            })?;
        flock_exclusive(&lock, &real).map_err(|e| fail("cannot lock", e))?;
        let book = LedgerBook::load(&real)?;
        Ok(LockedLedger {
            book,
            path: real,
            _lock: lock,
        })
    }
}

/// `path` with symlinks, `.` and `..` resolved; for a file not created yet, its resolved
/// directory joined with its name.
fn resolve(path: &Path) -> std::io::Result<PathBuf> {
    use std::io::{Error as IoError, ErrorKind};
    match std::fs::canonicalize(path) {
        Ok(real) => Ok(real),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            if std::fs::symlink_metadata(path).is_ok() {
                return Err(IoError::other(
                    "a symlink to a file that does not exist: point it at the ledger file, \
                     or name the file itself",
                ));
            }
            let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
                return Err(IoError::other("the path names no file"));
            };
            let dir = std::fs::canonicalize(dir).map_err(|e| {
                IoError::new(
                    e.kind(),
                    format!("its directory {}: {e} (it must exist)", dir.display()),
                )
            })?;
            Ok(dir.join(name))
        }
        Err(e) => Err(e),
    }
}

/// Blocks until the exclusive lock is ours; logs once when another process holds it.
fn flock_exclusive(file: &File, ledger: &Path) -> std::io::Result<()> {
    let mut flags = libc::LOCK_EX | libc::LOCK_NB;
    loop {
        // SAFETY: flock on a descriptor `file` owns; no memory is involved.
        if unsafe { libc::flock(file.as_raw_fd(), flags) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        match e.kind() {
            std::io::ErrorKind::Interrupted => continue,
            std::io::ErrorKind::WouldBlock if flags & libc::LOCK_NB != 0 => {
                info!(ledger = %ledger.display(), "another process is spending from the privacy ledger; waiting for it");
                flags = libc::LOCK_EX;
            }
            _ => return Err(e),
        }
    }
}

/// The ledger as read under its lock. Saving writes it back and releases the lock;
/// dropping it unsaved releases the lock and changes nothing.
pub struct LockedLedger {
    pub book: LedgerBook,
    path: PathBuf,
    _lock: File,
}

impl LockedLedger {
    /// The resolved name the ledger was read from and will be saved to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the book (atomically, fsynced), then unlocks.
    pub fn save(self) -> Result<(), Error> {
        self.book.save(&self.path)
    }
}

#[cfg(test)]
mod tests {
    use ldpstream_engine::curator::ledger::PrivacyLedger;

    use super::*;
    use crate::ledger::file::LedgerEntry;

    fn config(ledger: &str) -> Config {
        let text = format!(
            "{ledger}[[stream]]\nname = \"r\"\nsource = {{ kind = \"parquet\", paths = [\"/d/x\"] }}\n\
             mechanism = {{ kind = \"raw\", domain = 4 }}\nbudget_epsilon = 1.0\n"
        );
        Config::from_toml_str(&text, "t").unwrap()
    }

    /// Issue 34, item 2: a budgeted stream and no ledger named is refused, naming the key;
    /// there is no default in the working directory.
    #[test]
    fn a_budget_needs_a_named_absolute_ledger() {
        let e = LedgerFile::locate(&config(""), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("ledger = \"/var/lib/ldpstream/ledger.json\"") && e.contains("\"r\""),
            "{e}"
        );
        let e = LedgerFile::locate(&config(""), Some(Path::new("l.json")))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--ledger l.json: must be an absolute path"),
            "{e}"
        );
        let named = config("ledger = \"/srv/l.json\"\n");
        let file = LedgerFile::locate(&named, None).unwrap().unwrap();
        assert_eq!(file.describe(), "/srv/l.json (ledger)");
        let file = LedgerFile::locate(&named, Some(Path::new("/tmp/o.json")))
            .unwrap()
            .unwrap();
        assert_eq!(file.describe(), "/tmp/o.json (--ledger)");
    }

    fn named(path: PathBuf) -> LedgerFile {
        LedgerFile {
            path,
            origin: "ledger",
        }
    }

    /// Issue 43 (ledger_symlink): the lock was taken on `<name>.lock` for each spelling of
    /// the path, so the file and a symlink to it did not exclude each other.
    #[test]
    fn every_spelling_of_the_ledger_takes_one_lock() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let var = dir.path().join("var");
        let etc = dir.path().join("etc");
        std::fs::create_dir_all(&var).unwrap();
        std::fs::create_dir_all(&etc).unwrap();
        let real = var.join("ledger.json");
        named(real.clone()).lock().unwrap().save().unwrap();
        symlink(&real, etc.join("ledger.json")).unwrap();
        symlink(&var, dir.path().join("vlink")).unwrap();
        let canonical = std::fs::canonicalize(&real).unwrap();
        let spellings = [
            real.clone(),
            etc.join("ledger.json"),
            dir.path().join("var/../var/ledger.json"),
            dir.path().join("vlink/ledger.json"),
        ];
        for spelling in &spellings {
            let locked = named(spelling.clone()).lock().unwrap();
            assert_eq!(locked.path(), canonical, "{}", spelling.display());
            // The real name's lock is held: a second lock on it would block.
            let lock_file = File::open(format!("{}.lock", canonical.display())).unwrap();
            // SAFETY: flock on a descriptor this test owns.
            let got = unsafe { libc::flock(lock_file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            assert_eq!(got, -1, "{} did not lock the real name", spelling.display());
            locked.save().unwrap();
        }
        assert!(
            etc.join("ledger.json").is_symlink(),
            "the save kept the link"
        );
        // A ledger not created yet, in a symlinked directory: the resolved directory.
        let fresh = named(dir.path().join("vlink/new.json")).lock().unwrap();
        assert_eq!(fresh.path(), canonical.parent().unwrap().join("new.json"));
        drop(fresh);
        let shown = named(etc.join("ledger.json")).describe();
        assert!(
            shown.contains(" → ") && shown.ends_with("(ledger)"),
            "{shown}"
        );
    }

    #[test]
    fn a_dangling_symlink_or_a_hard_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("ledger.json");
        std::os::unix::fs::symlink(dir.path().join("gone.json"), &link).unwrap();
        let e = named(link).lock().err().unwrap().to_string();
        assert!(e.contains("symlink to a file that does not exist"), "{e}");
        let real = dir.path().join("real.json");
        named(real.clone()).lock().unwrap().save().unwrap();
        std::fs::hard_link(&real, dir.path().join("twin.json")).unwrap();
        let e = named(real).lock().err().unwrap().to_string();
        assert!(e.contains("2 hard links"), "{e}");
        let e = named(dir.path().join("no/such/dir/l.json"))
            .lock()
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("it must exist"), "{e}");
    }

    /// Two processes spending at once: each re-reads under the lock, so neither spend is
    /// lost (threads stand in for processes; flock locks per open file description).
    #[test]
    fn concurrent_spends_are_all_kept() {
        let dir = tempfile::tempdir().unwrap();
        let file = LedgerFile {
            path: dir.path().join("ledger.json"),
            origin: "--ledger",
        };
        let mut locked = file.lock().unwrap();
        locked.book.streams.insert(
            "r".into(),
            LedgerEntry {
                ledger: PrivacyLedger::new(100.0),
                inputs: Vec::new(),
            },
        );
        locked.save().unwrap();
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let file = file.clone();
                std::thread::spawn(move || {
                    for j in 0..10 {
                        let mut locked = file.lock().unwrap();
                        let entry = locked.book.streams.get_mut("r").unwrap();
                        entry
                            .ledger
                            .try_spend(None, None, 0.01, &format!("t{i}/{j}"))
                            .unwrap();
                        locked.save().unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let book = LedgerBook::load(file.path()).unwrap();
        assert_eq!(book.streams["r"].ledger.spends.len(), 80);
    }
}
