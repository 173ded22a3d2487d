//! The rules a privacy ledger is opened by: what input a stream's spends are charged on
//! ([`input_fingerprint`]), and when a kept ledger may be carried on, must be refused, or
//! is reset ([`open_ledger`], [`check_reset_names`]). `batch`, `merge` and `serve` apply
//! the same rules to the one ledger file of the deployment (see [`crate::ledger::store`]).

use std::collections::BTreeMap;
use std::path::Path;

use ldpstream_config::{compact, Config, SourceConfig, StreamConfig};
use ldpstream_connectors::inputs::resolve_inputs;
use ldpstream_engine::curator::ledger::PrivacyLedger;
use tracing::warn;

use crate::error::Error;
use crate::ledger::file::LedgerEntry;

/// Which reports a stream reads: its source (Parquet files, resolved from their patterns
/// and made canonical; Kafka topics; the simulator's settings) and its report column.
/// `patterns` replaces the Parquet paths (`batch --input`) when not empty. Group and time
/// columns are left out on purpose: they change how reports are split, not whose reports
/// are charged.
///
/// Canonical paths (symlinks resolved, `.` and `..` gone) make `./data/a.parquet`,
/// `data/*.parquet` and `link/a.parquet` (a symlinked directory) the same input, so another
/// spelling cannot pass for new data. Kafka is identified by its topics, not its brokers.
pub fn input_fingerprint(stream: &StreamConfig, patterns: &[String]) -> String {
    let source = match &stream.source {
        _ if !patterns.is_empty() => parquet_identity(patterns),
        SourceConfig::Parquet { paths, .. } => parquet_identity(paths),
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

/// The canonical paths of the files `patterns` name, sorted and deduplicated. Patterns
/// that name no readable file are kept as written (made absolute): the job then fails on
/// them before any spend, naming them.
fn parquet_identity(patterns: &[String]) -> String {
    let mut paths: Vec<String> = Vec::new();
    for pattern in patterns {
        // In-memory data (the Python package) is named by its content identity, which no
        // working directory may turn into a path.
        if pattern.starts_with(crate::memory_id::MEMORY_INPUT) {
            paths.push(pattern.clone());
            continue;
        }
        match resolve_inputs(std::slice::from_ref(pattern)) {
            Ok(files) => paths.extend(files.iter().map(|f| canonical(f))),
            Err(_) => paths.push(canonical(Path::new(pattern))),
        }
    }
    paths.sort();
    paths.dedup();
    format!("parquet {paths:?}")
}

/// `path` with symlinks resolved, or made absolute when it cannot be (it does not exist).
pub fn canonical(path: &Path) -> String {
    std::fs::canonicalize(path)
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
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

    /// Issue 34, item 2: `./x`, `dir/../x`, a glob and a symlinked directory all name the
    /// same file, so they are one input to the ledger.
    #[test]
    fn spellings_of_one_file_are_one_input() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("a.parquet"), b"x").unwrap();
        std::os::unix::fs::symlink(&data, dir.path().join("link")).unwrap();
        let d = dir.path().display();
        let spellings = [
            format!("{d}/data/a.parquet"),
            format!("{d}/./data/../data/a.parquet"),
            format!("{d}/data/*.parquet"),
            format!("{d}/link/a.parquet"),
        ];
        let prints: Vec<String> = spellings
            .iter()
            .map(|p| input_fingerprint(&stream("s", 1.0, p), &[]))
            .collect();
        assert!(prints.iter().all(|p| p == &prints[0]), "{prints:#?}");
        let given = input_fingerprint(&stream("s", 1.0, "/elsewhere"), &[spellings[3].clone()]);
        assert_eq!(given, prints[0]);
    }
}
