//! The state directory of `serve`: made, proven writable and locked at start, so that an
//! unwritable or shared directory stops the service before it reads anything.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use ldpstream_config::{Config, SourceConfig, StateLocation};
use tracing::{info, warn};

use crate::Error;

const LOCK: &str = "LOCK";

/// Creates the directory, proves it writable and takes an exclusive lock on it, held as
/// long as the returned file is open (and dropped by the kernel when the process dies, even
/// by kill -9). Two instances on one directory would overwrite each other's checkpoints
/// and each restore the other's source positions.
pub(super) fn prepare(dir: &Path, state: &StateLocation) -> Result<File, Error> {
    let fail = |what: &str, e: std::io::Error| Error::StateDir {
        path: dir.display().to_string(),
        message: format!("{what}: {e}"),
        default: matches!(state, StateLocation::BesideConfig(_)),
    };
    std::fs::create_dir_all(dir).map_err(|e| fail("cannot create it", e))?;
    tempfile::Builder::new()
        .prefix(".write-probe-")
        .tempfile_in(dir)
        .map_err(|e| fail("cannot write in it", e))?;
    let path = dir.join(LOCK);
    // O_NOFOLLOW: a LOCK planted as a symlink would otherwise have its target truncated and
    // overwritten with our pid; refusing it (ELOOP) names the file instead.
    let mut lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| fail(&format!("cannot open {LOCK}"), e))?;
    // SAFETY: flock on a descriptor this function owns; no memory is involved.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::WouldBlock {
            let holder = std::fs::read_to_string(&path).unwrap_or_default();
            return Err(Error::StateDirInUse {
                path: dir.display().to_string(),
                holder: holder.trim().to_string(),
            });
        }
        return Err(fail(&format!("cannot lock {LOCK}"), e));
    }
    // Who holds it, for the error the next instance gets; the lock, not this text, is what
    // keeps it out.
    let said = lock
        .set_len(0)
        .and_then(|()| writeln!(lock, "pid {}", std::process::id()));
    if let Err(e) = said {
        warn!(path = %path.display(), error = %e, "could not write the pid into the lock file");
    }
    Ok(lock)
}

/// Says at startup where the state lives and what a restart would replay, so that an
/// operator learns it before the first restart rather than from it. On stderr as well as
/// in the log, because the default log level shows warnings only.
pub(super) fn log_where_state_lives(config: &Config, state: &StateLocation, restored: bool) {
    eprintln!("ldpstream serve: state: {state}");
    if let Some(dir) = state.dir() {
        info!(
            dir = %dir.display(),
            interval = ?config.serve.checkpoint_interval,
            restored,
            "state: sketches and source positions are checkpointed here; a restart restores \
             them and re-reads at most the input of one checkpoint interval (privacy ledgers \
             are not here: they live in the ledger file)"
        );
        return;
    }
    for stream in &config.streams {
        let replay = match &stream.source {
            SourceConfig::Kafka(k) if k.scale_out.is_some() => {
                info!(stream = %stream.name, "state: in Kafka (scale_out), not in this instance");
                continue;
            }
            SourceConfig::Kafka(_) => {
                "a restart starts the sketches empty and re-reads every partition from its \
                 beginning (committed offsets are progress reports only)"
            }
            SourceConfig::Parquet { .. } => {
                "a restart starts the sketches empty and replays the files from the start"
            }
            SourceConfig::Simulator(_) => {
                "a restart starts the sketches empty and generates new reports"
            }
        };
        let message = format!("state: {state}; {replay}");
        if matches!(stream.source, SourceConfig::Simulator(_)) {
            info!(stream = %stream.name, "{message}");
        } else {
            warn!(stream = %stream.name, "{message}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    // The probe's lock_symlink_clobber: state/LOCK -> a file of the operator's; before
    // O_NOFOLLOW, starting serve truncated that file and wrote "pid N" into it.
    #[test]
    fn a_symlinked_lock_is_refused_and_its_target_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        let precious = dir.path().join("precious.txt");
        std::fs::write(&precious, "keep me\n").unwrap();
        std::os::unix::fs::symlink(&precious, state.join(LOCK)).unwrap();
        let err = prepare(&state, &StateLocation::Configured(PathBuf::from(&state))).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("cannot open LOCK"), "{text}");
        assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep me\n");
    }
}
