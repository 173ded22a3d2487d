//! The privacy-budget ledger file: every curator-model stream's ledger, kept in one JSON
//! file per deployment (the config's `ledger`, see [`crate::ledger::store`]) that `batch`,
//! `merge` and `serve` all spend from and that survives runs.
//!
//! A ledger keeps the budget it was created with and the inputs it was charged on, so that
//! neither a raised `budget_epsilon` nor a renamed stream over the same data reopens a
//! spent budget; only `--reset-ledger STREAM` starts one afresh (see
//! [`crate::ledger::rules`]).
//!
//! File versions: 1 had no `inputs` and overwrote `budget` with the config's on every run,
//! so its budget is the one of the last run; 2 added `inputs`; 3 adds `checksum`, a SHA-256
//! of the canonical (compact, key-sorted) JSON of the rest, and `imported`. A damaged or
//! hand-edited file is refused, never read as empty: an empty ledger gives the budget
//! back. Versions 1 and 2 still read, and are written back as 3.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use ldpstream_engine::curator::ledger::PrivacyLedger;
use serde::{Deserialize, Serialize};
use sha2::Digest;

use ldpstream_connectors::{atomic_file, ConnectorError};

use crate::error::Error;
pub use crate::ledger::rules::{check_reset_names, input_fingerprint, open_ledger};

/// Version of the ledger file's JSON form.
pub const BOOK_VERSION: u32 = 3;

/// One stream's ledger and the inputs its spends were charged on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerEntry {
    #[serde(flatten)]
    pub ledger: PrivacyLedger,
    /// [`input_fingerprint`]s of every input this stream has read; absent in version 1.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<String>,
}

/// Every stream's ledger.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LedgerBook {
    pub version: u32,
    pub streams: BTreeMap<String, LedgerEntry>,
    /// `serve` state directories whose ledgers (of versions before 3, kept in the
    /// checkpoint) were added to this book: importing one twice would count its spends
    /// twice, and a copy of the old checkpoint can outlive the import.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub imported: BTreeSet<String>,
}

/// What the checksum covers: everything but the version and the checksum itself.
#[derive(Serialize)]
struct Checked<'a> {
    streams: &'a BTreeMap<String, LedgerEntry>,
    #[serde(skip_serializing_if = "BTreeSet::is_empty")]
    imported: &'a BTreeSet<String>,
}

/// The file as written: the book and its checksum.
#[derive(Deserialize)]
struct Stored {
    version: u32,
    #[serde(default)]
    checksum: Option<String>,
    streams: BTreeMap<String, LedgerEntry>,
    #[serde(default)]
    imported: BTreeSet<String>,
}

impl LedgerBook {
    /// A book without ledgers.
    pub fn empty() -> Self {
        LedgerBook {
            version: BOOK_VERSION,
            streams: BTreeMap::new(),
            imported: BTreeSet::new(),
        }
    }

    /// Reads `path`; a missing file is an empty book. A file that does not parse, whose
    /// checksum does not hold, or that has none (version 3) is refused, naming the file.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let shown = path.display().to_string();
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(LedgerBook::empty()),
            Err(source) => {
                return Err(ConnectorError::Io {
                    path: shown,
                    source,
                }
                .into())
            }
        };
        Self::parse(&bytes, &shown)
    }

    /// The book in a ledger file's bytes (`shown` names the file in errors). Invalid UTF-8
    /// is refused as any other damage is.
    fn parse(bytes: &[u8], shown: &str) -> Result<Self, Error> {
        let refuse = |message: String| Error::Ledger {
            path: shown.to_string(),
            message,
        };
        let stored: Stored = serde_json::from_slice(bytes).map_err(|e| {
            refuse(format!(
                "not a privacy ledger, or truncated ({e}); it is not read as empty, which would \
                 give every budget back: restore it from a backup"
            ))
        })?;
        if !(1..=BOOK_VERSION).contains(&stored.version) {
            return Err(refuse(format!(
                "ledger format version {} (this build reads versions 1 to {BOOK_VERSION}); \
                 it was written by a newer ldpstream",
                stored.version
            )));
        }
        let book = LedgerBook {
            version: BOOK_VERSION,
            streams: stored.streams,
            imported: stored.imported,
        };
        if stored.version >= 3 {
            let expected = book.checksum().map_err(|e| refuse(e.to_string()))?;
            match stored.checksum {
                Some(c) if c == expected => {}
                Some(c) => {
                    return Err(refuse(format!(
                        "checksum mismatch (the file says {c}, its content hashes to \
                         {expected}): it was damaged or edited by hand; restore it from a backup"
                    )))
                }
                None => return Err(refuse("no checksum (format version 3 has one)".into())),
            }
        }
        Ok(book)
    }

    /// `sha256:` and the hex SHA-256 of the canonical JSON of what the file keeps: serde
    /// writes struct fields in order and `BTreeMap`s sorted, and floats round-trip
    /// exactly, so a file read and written back hashes the same.
    fn checksum(&self) -> Result<String, serde_json::Error> {
        let canonical = serde_json::to_vec(&Checked {
            streams: &self.streams,
            imported: &self.imported,
        })?;
        Ok(crate::digest::sha256_label(
            &sha2::Sha256::digest(&canonical).into(),
        ))
    }

    /// Writes atomically (see [`ldpstream_connectors::atomic_file`]), with its checksum.
    pub fn save(&self, path: &Path) -> Result<(), Error> {
        let shown = path.display().to_string();
        let encode_err = |e: serde_json::Error| Error::Ledger {
            path: shown.clone(),
            message: format!("cannot encode ledger: {e}"),
        };
        let checksum = self.checksum().map_err(encode_err)?;
        let text = serde_json::to_string_pretty(&serde_json::json!({
            "version": BOOK_VERSION,
            "checksum": checksum,
            "streams": &self.streams,
            "imported": &self.imported,
        }))
        .map_err(encode_err)?;
        // A file this build cannot read back would stop every later spend on the ledger,
        // every stream's included (a NaN is written as null, for one): refuse it here, and
        // keep the old file.
        if Self::parse(text.as_bytes(), &shown).ok().as_ref() != Some(self) {
            return Err(Error::Ledger {
                path: shown,
                message: "refusing to write a ledger this build could not read back (an \
                          internal error: please report it); the file is unchanged"
                    .into(),
            });
        }
        atomic_file::write_atomically(path, |mut f| {
            use std::io::Write;
            f.write_all(text.as_bytes())
                .map_err(|source| ConnectorError::Io {
                    path: shown.clone(),
                    source,
                })?;
            Ok(f)
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_other_versions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.json");
        assert_eq!(LedgerBook::load(&path).unwrap().streams.len(), 0);
        let mut book = LedgerBook::empty();
        let mut l = PrivacyLedger::new(1.0);
        l.try_spend(None, None, 0.25, "s/t").unwrap();
        book.streams.insert(
            "s".into(),
            LedgerEntry {
                ledger: l,
                inputs: vec!["parquet [\"/d/x\"], report column \"report\"".into()],
            },
        );
        book.save(&path).unwrap();
        assert_eq!(LedgerBook::load(&path).unwrap(), book);
        std::fs::write(&path, r#"{"version": 99, "streams": {}}"#).unwrap();
        let e = LedgerBook::load(&path).unwrap_err().to_string();
        assert!(
            e.contains("version 99") && e.contains("versions 1 to 3"),
            "{e}"
        );
    }

    /// A version-1 file (no inputs) still reads, with its stored budget as the ledger's.
    #[test]
    fn reads_version_1_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.json");
        std::fs::write(
            &path,
            r#"{"version":1,"streams":{"raw":{"version":1,"budget":1.5,"spends":[{"start":null,"end":null,"epsilon":0.5,"label":"raw/t"}]}}}"#,
        )
        .unwrap();
        let book = LedgerBook::load(&path).unwrap();
        assert_eq!(book.version, BOOK_VERSION);
        let entry = &book.streams["raw"];
        assert_eq!(entry.ledger.budget, 1.5);
        assert_eq!(entry.ledger.spends.len(), 1);
        assert!(entry.inputs.is_empty());
    }

    fn spent_book() -> LedgerBook {
        let mut book = LedgerBook::empty();
        let mut l = PrivacyLedger::new(1.0);
        l.try_spend(Some(0), Some(60_000), 0.6, "r/u").unwrap();
        book.streams.insert(
            "r".into(),
            LedgerEntry {
                ledger: l,
                inputs: vec!["parquet [\"/d/x\"], report column \"report\"".into()],
            },
        );
        book
    }

    /// Issue 34 (nit): the ledger had no checksum, so an edited spend (0.6 -> 0.0) or a
    /// truncated file went unnoticed. Both are refused, naming the file.
    #[test]
    fn a_tampered_or_truncated_ledger_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.json");
        spent_book().save(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"checksum\": \"sha256:"), "{text}");
        let edited = text.replace("0.6", "0.0");
        assert_ne!(edited, text);
        std::fs::write(&path, &edited).unwrap();
        let e = LedgerBook::load(&path).unwrap_err().to_string();
        assert!(
            e.contains(&path.display().to_string()) && e.contains("checksum mismatch"),
            "{e}"
        );
        for cut in [0, 1, text.len() / 2, text.len() - 2] {
            std::fs::write(&path, &text[..cut]).unwrap();
            let e = LedgerBook::load(&path).unwrap_err().to_string();
            assert!(
                e.contains(&path.display().to_string()) && e.contains("truncated"),
                "{cut}: {e}"
            );
        }
        let unsigned = text.replace("\"checksum\"", "\"note\"");
        std::fs::write(&path, unsigned).unwrap();
        let e = LedgerBook::load(&path).unwrap_err().to_string();
        assert!(e.contains("no checksum"), "{e}");
    }

    /// Issue 43 (ledger_utf8): the writer must never produce a file its reader refuses. A
    /// NaN budget would be written as null; the save is refused and the old file stays,
    /// byte for byte.
    #[test]
    fn a_ledger_that_would_not_read_back_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.json");
        spent_book().save(&path).unwrap();
        let before = std::fs::read(&path).unwrap();
        let mut bad = spent_book();
        bad.streams.get_mut("r").unwrap().ledger.budget = f64::NAN;
        let e = bad.save(&path).unwrap_err().to_string();
        assert!(e.contains("could not read back"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), before);
        // A file of invalid UTF-8 is refused as damaged, naming the file.
        std::fs::write(&path, b"{\"version\":3,\"streams\":{\"\xff\":{}}}").unwrap();
        let e = LedgerBook::load(&path).unwrap_err().to_string();
        assert!(e.contains("not a privacy ledger"), "{e}");
    }

    /// A version-2 file (no checksum) still reads, and is written back as 3.
    #[test]
    fn reads_version_2_files_and_writes_3() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.json");
        std::fs::write(
            &path,
            r#"{"version":2,"streams":{"r":{"version":1,"budget":1.0,"spends":[{"start":0,"end":60000,"epsilon":0.6,"label":"r/u"}],"inputs":["parquet [\"/d/x\"], report column \"report\""]}}}"#,
        )
        .unwrap();
        let book = LedgerBook::load(&path).unwrap();
        assert_eq!(book, spent_book());
        book.save(&path).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["version"], 3);
        assert_eq!(LedgerBook::load(&path).unwrap(), book);
    }
}
