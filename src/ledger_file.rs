//! The privacy-budget ledgers of batch jobs, kept in a JSON file that survives runs: a
//! batch job re-run on the same data spends again, as it should.

use std::collections::BTreeMap;
use std::path::Path;

use ldpstream_config::StreamConfig;
use ldpstream_engine::curator::ledger::{PrivacyLedger, LEDGER_VERSION};
use serde::{Deserialize, Serialize};

use ldpstream_connectors::{atomic_file, ConnectorError};

use crate::error::Error;

/// Every stream's ledger.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LedgerBook {
    pub version: u32,
    pub streams: BTreeMap<String, PrivacyLedger>,
}

impl LedgerBook {
    /// Reads `path`; a missing file is an empty book.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let shown = path.display().to_string();
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(LedgerBook {
                    version: LEDGER_VERSION,
                    streams: BTreeMap::new(),
                })
            }
            Err(source) => {
                return Err(ConnectorError::Io {
                    path: shown,
                    source,
                }
                .into())
            }
        };
        let book: LedgerBook = serde_json::from_str(&text).map_err(|e| Error::Ledger {
            path: shown.clone(),
            message: format!("not a privacy ledger: {e}"),
        })?;
        if book.version != LEDGER_VERSION {
            return Err(Error::Ledger {
                path: shown,
                message: format!(
                    "ledger format version {} (this build reads {LEDGER_VERSION})",
                    book.version
                ),
            });
        }
        Ok(book)
    }

    /// Writes atomically (see [`ldpstream_connectors::atomic_file`]).
    pub fn save(&self, path: &Path) -> Result<(), Error> {
        let shown = path.display().to_string();
        let text = serde_json::to_string_pretty(self).map_err(|e| Error::Ledger {
            path: shown.clone(),
            message: format!("cannot encode ledger: {e}"),
        })?;
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

    /// The stream's ledger with the config's budget (spends carry over), or None when the
    /// stream has no budget.
    pub fn for_stream(&self, stream: &StreamConfig) -> Option<PrivacyLedger> {
        let budget = stream.budget_epsilon?;
        let mut ledger = self
            .streams
            .get(&stream.name)
            .cloned()
            .unwrap_or_else(|| PrivacyLedger::new(budget));
        ledger.budget = budget;
        Some(ledger)
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
        let mut book = LedgerBook {
            version: LEDGER_VERSION,
            streams: BTreeMap::new(),
        };
        let mut l = PrivacyLedger::new(1.0);
        l.try_spend(None, None, 0.25, "s/t").unwrap();
        book.streams.insert("s".into(), l);
        book.save(&path).unwrap();
        assert_eq!(LedgerBook::load(&path).unwrap(), book);
        std::fs::write(&path, r#"{"version": 99, "streams": {}}"#).unwrap();
        let e = LedgerBook::load(&path).unwrap_err().to_string();
        assert!(e.contains("version 99"), "{e}");
    }
}
