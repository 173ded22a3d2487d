//! The privacy-budget ledgers of batch jobs, kept in a JSON file that survives runs: a
//! batch job re-run on the same data spends again, as it should.
//!
//! A ledger keeps the budget it was created with and the inputs it was charged on, so that
//! neither a raised `budget_epsilon` nor a renamed stream over the same data reopens a
//! spent budget; only `--reset-ledger STREAM` starts one afresh (`serve` keeps the same
//! entries in its checkpoint and applies the same rules through [`open_ledger`]).
//!
//! File versions: 1 had no `inputs` and overwrote `budget` with the config's on every run,
//! so its budget is the one of the last run; it still reads, and is written back as 2.

use std::collections::BTreeMap;
use std::path::Path;

use ldpstream_config::{compact, Config, SourceConfig, StreamConfig};
use ldpstream_engine::curator::ledger::PrivacyLedger;
use serde::{Deserialize, Serialize};
use tracing::warn;

use ldpstream_connectors::{atomic_file, ConnectorError};

use crate::error::Error;

/// Version of the ledger file's JSON form.
pub const BOOK_VERSION: u32 = 2;

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
}

impl LedgerBook {
    /// Reads `path`; a missing file is an empty book.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let shown = path.display().to_string();
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(LedgerBook {
                    version: BOOK_VERSION,
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
        let mut book: LedgerBook = serde_json::from_str(&text).map_err(|e| Error::Ledger {
            path: shown.clone(),
            message: format!("not a privacy ledger: {e}"),
        })?;
        if !(1..=BOOK_VERSION).contains(&book.version) {
            return Err(Error::Ledger {
                path: shown,
                message: format!(
                    "ledger format version {} (this build reads versions 1 to {BOOK_VERSION}); \
                     it was written by a newer ldpstream",
                    book.version
                ),
            });
        }
        book.version = BOOK_VERSION;
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
}

/// Which reports a stream reads: its source (Parquet paths made absolute, Kafka topics,
/// the simulator's settings) and its report column. `patterns` replaces the Parquet paths
/// (`batch --input`) when not empty. Group and time columns are left out on purpose: they
/// change how reports are split, not whose reports are charged.
pub fn input_fingerprint(stream: &StreamConfig, patterns: &[String]) -> String {
    let parquet = |given: &[String]| {
        let mut paths: Vec<String> = given
            .iter()
            .map(|p| std::path::absolute(p).map_or_else(|_| p.clone(), |a| a.display().to_string()))
            .collect();
        paths.sort();
        paths.dedup();
        format!("parquet {paths:?}")
    };
    let source = match &stream.source {
        _ if !patterns.is_empty() => parquet(patterns),
        SourceConfig::Parquet { paths, .. } => parquet(paths),
        SourceConfig::Kafka(k) => {
            let mut topics = k.topics.clone();
            topics.sort();
            topics.dedup();
            format!("kafka {topics:?}")
        }
        SourceConfig::Simulator(sim) => format!("simulator {sim:?}"),
    };
    format!("{source}, report column {:?}", stream.columns.report)
}

/// Every `--reset-ledger` name must be a configured stream that has a ledger: a typo would
/// otherwise silently reset nothing.
pub fn check_reset_names(config: &Config, reset: &[String]) -> Result<(), Error> {
    for name in reset {
        match config.streams.iter().find(|s| &s.name == name) {
            Some(s) if s.budget_epsilon.is_some() => {}
            Some(_) => {
                return Err(Error::ResetLedger {
                    stream: name.clone(),
                    reason: "that stream has no budget_epsilon, so no privacy ledger".into(),
                })
            }
            None => {
                return Err(Error::ResetLedger {
                    stream: name.clone(),
                    reason: format!(
                        "no stream of the config has that name (streams: {})",
                        config
                            .streams
                            .iter()
                            .map(|s| format!("{:?}", s.name))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                })
            }
        }
    }
    Ok(())
}

/// The ledger `stream` spends from, given the ledgers kept so far (`known`, by stream
/// name) and the fingerprint of what it reads; None when the stream has no budget.
/// `origin` names where the ledgers are kept, in errors.
///
/// Refused, unless `reset` names the stream: a kept ledger whose budget differs from the
/// config's, and a stream without a ledger whose input another stream's ledger was charged
/// on. A reset discards the stream's spends and is logged.
pub fn open_ledger(
    known: &BTreeMap<String, LedgerEntry>,
    stream: &StreamConfig,
    input: &str,
    reset: &[String],
    origin: &str,
) -> Result<Option<LedgerEntry>, Error> {
    let Some(budget) = stream.budget_epsilon else {
        return Ok(None);
    };
    let name = &stream.name;
    let fresh = LedgerEntry {
        ledger: PrivacyLedger::new(budget),
        inputs: vec![input.to_string()],
    };
    if reset.iter().any(|r| r == name) {
        let previous = known.get(name);
        warn!(
            stream = %name,
            ledger = origin,
            budget_epsilon = budget,
            previous_budget = previous.map(|e| e.ledger.budget),
            forgotten_spends = previous.map_or(0, |e| e.ledger.spends.len()),
            "--reset-ledger: starting a fresh privacy ledger; earlier spends no longer count"
        );
        return Ok(Some(fresh));
    }
    let conflict = |message: String| Error::LedgerConflict {
        origin: origin.to_string(),
        stream: name.clone(),
        message,
    };
    if let Some(entry) = known.get(name) {
        if entry.ledger.budget != budget {
            return Err(conflict(format!(
                "budget_epsilon = {} but its privacy ledger was created with budget_epsilon = {}; \
                 a ledger keeps its budget, since changing it would reopen a spent budget. Set \
                 budget_epsilon = {} again, or pass --reset-ledger {name} to discard the \
                 ledger's {} spends and start a new one",
                compact(budget),
                compact(entry.ledger.budget),
                compact(entry.ledger.budget),
                entry.ledger.spends.len()
            )));
        }
        let mut entry = entry.clone();
        if !entry.inputs.iter().any(|i| i == input) {
            entry.inputs.push(input.to_string());
        }
        return Ok(Some(entry));
    }
    if let Some((other, _)) = known
        .iter()
        .find(|(other, e)| *other != name && e.inputs.iter().any(|i| i == input))
    {
        return Err(conflict(format!(
            "it has no privacy ledger yet, but it reads the same input ({input}) as the ledger \
             of stream {other:?}; a new name would start a fresh budget over reports that \
             budget was already spent on. Rename the stream back to {other:?}, or pass \
             --reset-ledger {name} to start a new ledger anyway"
        )));
    }
    Ok(Some(fresh))
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
            version: BOOK_VERSION,
            streams: BTreeMap::new(),
        };
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
            e.contains("version 99") && e.contains("versions 1 to 2"),
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

    fn stream(name: &str, budget: f64, path: &str) -> StreamConfig {
        let text = format!(
            "[[stream]]\nname = \"{name}\"\nsource = {{ kind = \"parquet\", paths = [\"{path}\"] }}\n\
             mechanism = {{ kind = \"raw\", domain = 4 }}\nbudget_epsilon = {budget}\n"
        );
        Config::from_toml_str(&text, "t").unwrap().streams.remove(0)
    }

    /// Raising the budget, or renaming the stream over the same input, would reopen a spent
    /// ledger: both are refused unless `--reset-ledger` names the stream.
    #[test]
    fn budget_changes_and_renames_are_refused_unless_reset() {
        let old = stream("a", 1.0, "/data/x.parquet");
        let input = input_fingerprint(&old, &[]);
        let mut entry = open_ledger(&BTreeMap::new(), &old, &input, &[], "book")
            .unwrap()
            .unwrap();
        entry.ledger.try_spend(None, None, 1.0, "a/t").unwrap();
        let known = BTreeMap::from([("a".to_string(), entry)]);
        // Same name, same budget: the spends carry over.
        let again = open_ledger(&known, &old, &input, &[], "book")
            .unwrap()
            .unwrap();
        assert_eq!(again.ledger.remaining_overall(), 0.0);
        let raised = stream("a", 3.0, "/data/x.parquet");
        let e = open_ledger(&known, &raised, &input, &[], "book")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "budget_epsilon = 3 but its privacy ledger was created with budget_epsilon = 1"
            ) && e.contains("--reset-ledger a"),
            "{e}"
        );
        let reset = open_ledger(&known, &raised, &input, &["a".into()], "book")
            .unwrap()
            .unwrap();
        assert_eq!(reset.ledger.remaining_overall(), 3.0);
        let renamed = stream("b", 1.0, "/data/x.parquet");
        assert_eq!(input_fingerprint(&renamed, &[]), input);
        let e = open_ledger(&known, &renamed, &input, &[], "book")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("stream \"b\"") && e.contains("same input") && e.contains("\"a\""),
            "{e}"
        );
        open_ledger(&known, &renamed, &input, &["b".into()], "book")
            .unwrap()
            .unwrap();
        // Another input under a new name is a new ledger.
        let other = stream("c", 1.0, "/data/y.parquet");
        let fresh = open_ledger(&known, &other, &input_fingerprint(&other, &[]), &[], "book")
            .unwrap()
            .unwrap();
        assert_eq!(fresh.ledger.remaining_overall(), 1.0);
    }
}
