//! The durable memo store of a device's longitudinal client (`lgrr`, `losue`, `lsue`): one
//! JSON file holding every metric's memo, replaced atomically on every save (temporary
//! file, fsync, rename, directory fsync: [`crate::atomic_file`]), so a crash leaves the
//! memo as it was before the save or after it, never half of one.
//!
//! It lives here, beside the atomic write it uses, because it is file I/O, which the
//! engine (where the client and its `MemoStore` trait live) does not do; the connectors
//! build without Kafka, so the Python package uses this same store.
//!
//! The file holds the device's true values and their memos: it is as sensitive as the
//! values, and must never be uploaded, synced or backed up off the device
//! (docs/clients.md). Losing it spends `epsilon_perm` again per value; so a file that
//! does not read back is an error, never a fresh start. One process holds it at a time
//! (an exclusive lock on `<file>.lock`): two clients sharing it would each draw memos.
//!
//! Format: `{"version":1,"metrics":{"<metric>":<memo>,…}}`, metrics by name, each memo in
//! its canonical JSON (`ldpstream_engine::mechanism::longitudinal::memo`).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use ldpstream_engine::mechanism::longitudinal::memo::{MemoStore, MemoStoreError, MetricMemo};

/// The file format version this build reads and writes.
pub const MEMO_FILE_VERSION: u64 = 1;

/// A memo store in one file.
#[derive(Debug)]
pub struct FileMemoStore {
    path: PathBuf,
    metrics: BTreeMap<String, MetricMemo>,
    /// Held until the store is dropped.
    _lock: File,
}

impl FileMemoStore {
    /// Opens (or, if absent, starts) the store at `path`, locking it for this process.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, MemoStoreError> {
        let path = path.as_ref().to_path_buf();
        let shown = path.display().to_string();
        // "" would put the lock file ".lock" in the working directory, and "dir/" inside
        // the directory: neither names a file the store could replace.
        if path.file_name().is_none() || path.as_os_str().as_encoded_bytes().ends_with(b"/") {
            return Err(MemoStoreError::new(format!(
                "memo store {shown:?}: the path must name a file"
            )));
        }
        // Beside the file a symlink points to, as the saves replace that file: two
        // clients opening it through a link and through its real path must meet at one
        // lock, or each would save its own memos over the other's.
        let locked_path = if path.is_symlink() {
            std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone())
        } else {
            path.clone()
        };
        let mut lock_name = locked_path.into_os_string();
        lock_name.push(".lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_name)
            .map_err(|e| {
                MemoStoreError::with_source(
                    format!("memo store {shown}: cannot open its lock file {lock_name:?}"),
                    e,
                )
            })?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(MemoStoreError::new(format!(
                    "memo store {shown} is open in another client (its lock file {lock_name:?} \
                     is held): two clients sharing one memo would each draw their own memos"
                )))
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(MemoStoreError::with_source(
                    format!("memo store {shown}: cannot lock {lock_name:?}"),
                    e,
                ))
            }
        }
        // Read as bytes: a file that is not UTF-8 is damaged, not unreadable.
        let metrics = match std::fs::read(&path) {
            Ok(bytes) => std::str::from_utf8(&bytes)
                .map_err(|e| format!("not UTF-8 text: {e}"))
                .and_then(parse)
                .map_err(|message| {
                    MemoStoreError::new(format!(
                        "memo store {shown} does not read back ({message}); restore it from the \
                     device's own backup: deleting it makes every value spend epsilon_perm \
                     again"
                    ))
                })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => {
                return Err(MemoStoreError::with_source(
                    format!("memo store {shown}: cannot read it"),
                    e,
                ))
            }
        };
        Ok(FileMemoStore {
            path,
            metrics,
            _lock: lock,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The metrics the store holds a memo for.
    pub fn metrics(&self) -> impl Iterator<Item = &str> {
        self.metrics.keys().map(String::as_str)
    }

    fn write(&self) -> Result<(), MemoStoreError> {
        let text = render(&self.metrics);
        crate::atomic_file::write_atomically(&self.path, |mut file: File| {
            file.write_all(text.as_bytes())
                .map_err(|source| crate::ConnectorError::Io {
                    path: self.path.display().to_string(),
                    source,
                })?;
            Ok(file)
        })
        .map_err(|e| {
            MemoStoreError::with_source(
                format!("memo store {}: cannot save", self.path.display()),
                e,
            )
        })
    }
}

impl MemoStore for FileMemoStore {
    fn load(&mut self, metric: &str) -> Result<Option<MetricMemo>, MemoStoreError> {
        Ok(self.metrics.get(metric).cloned())
    }

    /// Durable when it returns Ok; on an error the file and this store are as before.
    fn save(&mut self, metric: &str, memo: &MetricMemo) -> Result<(), MemoStoreError> {
        let before = self.metrics.insert(metric.to_string(), memo.clone());
        let written = self.write();
        if written.is_err() {
            match before {
                Some(m) => self.metrics.insert(metric.to_string(), m),
                None => self.metrics.remove(metric),
            };
        }
        written
    }
}

fn render(metrics: &BTreeMap<String, MetricMemo>) -> String {
    let entries: Vec<String> = metrics
        .iter()
        .map(|(name, memo)| {
            let key = serde_json::Value::String(name.clone()).to_string();
            format!("{key}:{}", memo.to_json())
        })
        .collect();
    format!(
        "{{\"version\":{MEMO_FILE_VERSION},\"metrics\":{{{}}}}}\n",
        entries.join(",")
    )
}

fn parse(text: &str) -> Result<BTreeMap<String, MetricMemo>, String> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let serde_json::Value::Object(mut top) = value else {
        return Err("not a JSON object".into());
    };
    match top.remove("version").and_then(|v| v.as_u64()) {
        Some(MEMO_FILE_VERSION) => {}
        other => return Err(format!("version {other:?}, expected {MEMO_FILE_VERSION}")),
    }
    let Some(serde_json::Value::Object(metrics)) = top.remove("metrics") else {
        return Err("no \"metrics\" object".into());
    };
    if let Some(key) = top.keys().next() {
        return Err(format!("unknown key {key:?}"));
    }
    metrics
        .into_iter()
        .map(|(name, memo)| {
            MetricMemo::from_json_value(memo)
                .map(|m| (name.clone(), m))
                .map_err(|e| format!("metric {name:?}: {e}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpstream_engine::mechanism::Response;

    fn memo(values: &[(u32, u32)]) -> MetricMemo {
        let mut m = MetricMemo::new("lgrr", 0xdead_beef, 86_400_000);
        for &(v, r) in values {
            m.values.insert(v, Response::Category(r));
        }
        m
    }

    #[test]
    fn saves_are_durable_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memo.json");
        {
            let mut store = FileMemoStore::open(&path).unwrap();
            assert_eq!(store.load("a").unwrap(), None);
            store.save("a", &memo(&[(1, 2)])).unwrap();
            store
                .save("b \"quoted\"", &memo(&[(0, 0), (3, 1)]))
                .unwrap();
            store.save("a", &memo(&[(1, 2), (2, 2)])).unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with("{\"version\":1,\"metrics\":{\"a\":{\"version\":1,"),
            "{text}"
        );
        let mut store = FileMemoStore::open(&path).unwrap();
        assert_eq!(store.load("a").unwrap(), Some(memo(&[(1, 2), (2, 2)])));
        assert_eq!(
            store.load("b \"quoted\"").unwrap(),
            Some(memo(&[(0, 0), (3, 1)]))
        );
        assert_eq!(store.metrics().count(), 2);
    }

    #[test]
    fn one_client_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memo.json");
        let held = FileMemoStore::open(&path).unwrap();
        let e = FileMemoStore::open(&path).unwrap_err();
        assert!(e.to_string().contains("another client"), "{e}");
        drop(held);
        FileMemoStore::open(&path).unwrap();
    }

    /// A store opened through a symlink and through the file it points to is one store:
    /// the second open is refused, as for the same path.
    #[cfg(unix)]
    #[test]
    fn a_symlink_and_its_target_share_one_lock() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("memo.json");
        let link = dir.path().join("link.json");
        std::fs::write(&real, "{\"version\":1,\"metrics\":{}}").unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let held = FileMemoStore::open(&link).unwrap();
        let e = FileMemoStore::open(&real).unwrap_err();
        assert!(e.to_string().contains("another client"), "{e}");
        drop(held);
        let held = FileMemoStore::open(&real).unwrap();
        assert!(FileMemoStore::open(&link).is_err());
        drop(held);
    }

    #[test]
    fn a_damaged_file_is_an_error_not_a_fresh_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memo.json");
        for text in [
            "{\"version\":1,\"metrics\":{\"a\":{\"version\":1}}}",
            "{\"version\":2,\"metrics\":{}}",
            "{\"version\":1}",
            "{\"version\":1,\"metrics\":{},\"x\":1}",
            "{\"version\":1,\"metrics\":{\"a\"",
        ] {
            std::fs::write(&path, text).unwrap();
            let e = FileMemoStore::open(&path).unwrap_err();
            assert!(e.to_string().contains("epsilon_perm again"), "{text}: {e}");
        }
        // Not UTF-8 (a torn or overwritten file) is damaged too, not an I/O failure.
        std::fs::write(&path, b"\xff\xfe{\"version\":1}").unwrap();
        let e = FileMemoStore::open(&path).unwrap_err();
        assert!(
            e.to_string().contains("not UTF-8") && e.source.is_none(),
            "{e}"
        );
    }

    /// A path that names no file ("" would lock ".lock" in the working directory) is
    /// refused before any lock file is made; a directory where the file should be cannot
    /// be read, and says so.
    #[test]
    fn a_path_that_names_no_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let slash = format!("{}/", dir.path().join("sub").display());
        for path in ["", "/", slash.as_str()] {
            let e = FileMemoStore::open(path).unwrap_err();
            assert!(e.to_string().contains("must name a file"), "{path:?}: {e}");
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let store = dir.path().join("store");
        std::fs::create_dir(&store).unwrap();
        let e = FileMemoStore::open(&store).unwrap_err();
        let cause = e.source.as_ref().map(|s| s.to_string()).unwrap_or_default();
        assert!(
            e.to_string().contains("cannot read it") && !cause.is_empty(),
            "{e}"
        );
    }

    #[test]
    fn a_failed_save_leaves_the_store_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("gone");
        std::fs::create_dir(&sub).unwrap();
        let path = sub.join("memo.json");
        let mut store = FileMemoStore::open(&path).unwrap();
        store.save("a", &memo(&[(1, 1)])).unwrap();
        // The directory is replaced by a file: the atomic write cannot make its temp file.
        std::fs::remove_dir_all(&sub).unwrap();
        std::fs::write(&sub, "").unwrap();
        assert!(store.save("a", &memo(&[(1, 1), (2, 0)])).is_err());
        assert_eq!(store.load("a").unwrap(), Some(memo(&[(1, 1)])));
        assert!(store.save("b", &memo(&[])).is_err());
        assert_eq!(store.load("b").unwrap(), None);
    }
}
