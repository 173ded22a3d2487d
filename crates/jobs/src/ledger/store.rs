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

    /// The path and where it was given, e.g. `/var/lib/l.json (ledger)`.
    pub fn describe(&self) -> String {
        format!("{} ({})", self.path.display(), self.origin)
    }

    /// Takes the exclusive lock (waiting for another process's spend to finish) and reads
    /// the ledger under it.
    pub fn lock(&self) -> Result<LockedLedger, Error> {
        let mut name = self.path.clone().into_os_string();
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
        flock_exclusive(&lock, &self.path).map_err(|e| fail("cannot lock", e))?;
        let book = LedgerBook::load(&self.path)?;
        Ok(LockedLedger {
            book,
            path: self.path.clone(),
            _lock: lock,
        })
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
