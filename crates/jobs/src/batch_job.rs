//! The batch job: every stream of a config over Parquet files, to test records.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ldpstream_config::{Config, SourceConfig, StreamConfig, TestSpec};
use ldpstream_connectors::parquet::{inspect, resolve_inputs};
use ldpstream_connectors::{ConnectorError, ParallelFiles, RowGroupInput};
use ldpstream_engine::kernels::fold_key_counts;
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::sketch::{Rejections, Sketch};
use ldpstream_engine::stream::layout::fold_columns;
use ldpstream_engine::stream::{
    evaluate_stream, fold_paned_batch, stream_pane_width, PanedDelta, Private, ReportLayout,
};
use ldpstream_engine::window::pane_start;
use ldpstream_engine::EngineError;
use tracing::info;

use crate::error::Error;
use crate::ledger::file::{check_reset_names, input_fingerprint, open_ledger, LedgerEntry};
pub use crate::ledger::release::{Release, Released};
use crate::ledger::store::{LedgerFile, LockedLedger};

/// Runs every stream of `config` over its Parquet files (or `inputs`, when given) and
/// returns one record per (stream, test, window, group). Curator-model tests spend from
/// `release.ledger` (see [`open_ledger`]); the caller releases the records through
/// [`crate::ledger::release`], which saves the spends first.
pub fn run_batch(
    config: &Config,
    inputs: &[String],
    release: Release<'_>,
    progress: &dyn Progress,
) -> Result<Released, Error> {
    let fingerprints: Vec<String> = config
        .streams
        .iter()
        .map(|s| input_fingerprint(s, inputs))
        .collect();
    test_streams(config, &fingerprints, release, |stream, mechanism| {
        let files = resolve_inputs(&patterns_of(stream, inputs)?)?;
        fold_stream(stream, mechanism, &files, progress)
    })
}

/// Tests every stream of `config` on the sketches `sketches_of` gives it (folded here, or
/// merged from partial sketch files). `fingerprints[i]` identifies stream i's input for
/// its privacy ledger.
///
/// Every stream is folded before the ledger is locked, so that a long fold never holds
/// up another process's spends; the ledgers are then opened on the file as read under
/// the lock, and the lock is handed back with the records, to be released by the save.
/// The ledgers are also checked once before the fold, so that a conflict fails at once.
pub fn test_streams(
    config: &Config,
    fingerprints: &[String],
    release: Release<'_>,
    mut sketches_of: impl FnMut(&StreamConfig, &Mechanism) -> Result<PanedDelta, Error>,
) -> Result<Released, Error> {
    let Release {
        ledger,
        reset,
        noise,
    } = release;
    check_reset_names(config, reset)?;
    if let Some(file) = ledger {
        // Reset streams cannot conflict; leaving them out logs each reset once.
        let before = file.lock()?;
        let origin = before.path().display().to_string();
        for (stream, fingerprint) in config.streams.iter().zip(fingerprints) {
            if !reset.contains(&stream.name) {
                open_ledger(&before.book.streams, stream, fingerprint, &[], &origin)?;
            }
        }
    }
    let mut folded = Vec::new();
    for stream in &config.streams {
        let mechanism = Mechanism::from_config(&stream.mechanism)?;
        let sketches = sketches_of(stream, &mechanism)?;
        check_testable(stream, &sketches)?;
        folded.push((mechanism, sketches));
    }
    let mut locked = ledger.map(LedgerFile::lock).transpose()?;
    let mut opened = match &locked {
        Some(l) => open_ledgers(config, fingerprints, l, reset)?,
        None => vec![None; config.streams.len()],
    };
    let mut records = Vec::new();
    for ((stream, (mechanism, sketches)), ledger) in
        config.streams.iter().zip(folded).zip(&mut opened)
    {
        let mut private = Private {
            ledger: ledger.as_mut().map(|e| &mut e.ledger),
            noise: &mut *noise,
        };
        records.extend(evaluate_stream(stream, &mechanism, sketches, &mut private)?);
    }
    if let Some(l) = &mut locked {
        for (stream, entry) in config.streams.iter().zip(opened) {
            if let Some(entry) = entry {
                l.book.streams.insert(stream.name.clone(), entry);
            }
        }
    }
    Ok(Released {
        records,
        spends: locked,
    })
}

/// Every stream's ledger as opened on `locked` (None for a stream without a budget).
/// Conflicts are judged against the ledgers as they were before this run.
fn open_ledgers(
    config: &Config,
    fingerprints: &[String],
    locked: &LockedLedger,
    reset: &[String],
) -> Result<Vec<Option<LedgerEntry>>, Error> {
    let origin = locked.path().display().to_string();
    config
        .streams
        .iter()
        .zip(fingerprints)
        .map(|(stream, fingerprint)| {
            open_ledger(&locked.book.streams, stream, fingerprint, reset, &origin)
        })
        .collect()
}

/// The reports (rows) each stream's input holds, read from the Parquet footers, whose
/// schemas are checked on the way: what bounds the state of sparse count tables.
pub fn input_reports(config: &Config, inputs: &[String]) -> Result<BTreeMap<String, u64>, Error> {
    let mut out = BTreeMap::new();
    for stream in &config.streams {
        let files = resolve_inputs(&patterns_of(stream, inputs)?)?;
        let mechanism = Mechanism::from_config(&stream.mechanism)?;
        let layout = ReportLayout::of(stream, &mechanism);
        let rows = inspect(&files, &layout)?
            .iter()
            .flat_map(|f| &f.row_group_rows)
            .sum();
        out.insert(stream.name.clone(), rows);
    }
    Ok(out)
}

/// The Parquet patterns a stream reads: `inputs` when given, else its source's paths.
pub fn patterns_of(stream: &StreamConfig, inputs: &[String]) -> Result<Vec<String>, Error> {
    match (&stream.source, inputs.is_empty()) {
        (_, false) => Ok(inputs.to_vec()),
        (SourceConfig::Parquet { paths, .. }, true) => Ok(paths.clone()),
        (SourceConfig::Simulator(_) | SourceConfig::Kafka(_), true) => Err(Error::NotBatchSource {
            stream: stream.name.clone(),
        }),
    }
}

/// Checks and folds a stream's files into per-pane, per-group sketches.
pub fn fold_stream(
    stream: &StreamConfig,
    mechanism: &Mechanism,
    files: &[PathBuf],
    progress: &dyn Progress,
) -> Result<PanedDelta, Error> {
    let layout = ReportLayout::of(stream, mechanism);
    let inputs = inspect(files, &layout)?;
    let total: u64 = inputs.iter().flat_map(|f| &f.row_group_rows).sum();
    info!(stream = %stream.name, files = inputs.len(), rows = total, "folding");
    progress.start(total);
    let started = std::time::Instant::now();
    let pane_ms = stream_pane_width(stream);
    let sketches = ParallelFiles::new(&inputs, &layout).fold(
        PanedDelta::default,
        |delta, input| fold_input(delta, input, &layout, pane_ms),
        |mut a, b| {
            a.merge(b)?;
            Ok(a)
        },
        &|rows| progress.advance(rows),
    )?;
    progress.finish();
    let secs = started.elapsed().as_secs_f64();
    info!(
        stream = %stream.name,
        rows = total,
        panes = sketches.panes.len(),
        late = sketches.late,
        seconds = secs,
        rows_per_second = total as f64 / secs.max(1e-9),
        "folded"
    );
    Ok(sketches)
}

/// Folds one input of a row group into `delta`: a batch into its panes (a bounded input
/// has no late reports: every report lands in its pane), or the dictionary-key counts of
/// the fast path into the one untimed sketch.
fn fold_input(
    delta: &mut PanedDelta,
    input: RowGroupInput<'_>,
    layout: &ReportLayout,
    pane_ms: i64,
) -> Result<(), ConnectorError> {
    match input {
        RowGroupInput::Batch { batch, origin, ts } => {
            let pane_of = |t: i64| Some(pane_start(t, pane_ms));
            fold_paned_batch(batch, layout, origin, ts, &pane_of, delta)?;
        }
        // The Arrow path makes no sketch for a row group without rows; neither does this
        // one, so that an empty file yields the same (empty) set of groups.
        RowGroupInput::KeyCounts(counts) if counts.rows == 0 => {}
        RowGroupInput::KeyCounts(counts) => {
            let mut sketch = layout.mechanism.new_sketch();
            let Sketch::Counts(s) = &mut sketch else {
                // The fast path is offered to count-sketch mechanisms only.
                return Err(EngineError::InvalidParameter {
                    name: "mechanism",
                    value: layout.mechanism.kind().to_string(),
                    allowed: "a count-sketch mechanism for dictionary-key counts",
                }
                .into());
            };
            fold_key_counts(&counts.dictionary, &counts.key_counts, counts.nulls, s);
            delta.untimed.insert(Vec::new(), sketch);
        }
    }
    Ok(())
}

/// Fails a bounded job whose input leaves nothing to test: every report rejected (or no
/// report at all), or a two-sample test whose `a` or `b` value never occurs in its `by`
/// column. Checked after the fold and before any test runs, so that no curator budget is
/// spent; otherwise such input would give empty or inconclusive records and exit 0, and a
/// typo in a sample label or a producer writing the wrong width would go unnoticed.
fn check_testable(stream: &StreamConfig, sketches: &PanedDelta) -> Result<(), Error> {
    let all = || {
        sketches
            .untimed
            .iter()
            .chain(sketches.panes.values().flatten())
    };
    let valid: u64 = all().map(|(_, s)| s.n()).sum();
    if valid == 0 {
        let mut rejected = Rejections::default();
        for (_, s) in all() {
            rejected.merge(s.rejected());
        }
        let reasons: Vec<String> = rejected
            .to_map()
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| format!("{r}: {n}"))
            .collect();
        let message =
            if reasons.is_empty() && sketches.late == 0 {
                "the input has no reports".to_string()
            } else {
                format!(
                "no report of the input is valid (rejected: {}; without event time or late: {})",
                if reasons.is_empty() { "none".to_string() } else { reasons.join(", ") },
                sketches.late
            )
            };
        return Err(Error::NothingToTest {
            stream: stream.name.clone(),
            message,
        });
    }
    let fold_columns = fold_columns(stream);
    for test in &stream.tests {
        let TestSpec::TwoSample { by, a, b } = &test.spec else {
            continue;
        };
        let Some(i) = fold_columns.iter().position(|c| c == by) else {
            continue;
        };
        let has = |label: &String| {
            all().any(|(key, s)| s.n() > 0 && key.get(i).is_some_and(|v| v.as_ref() == Some(label)))
        };
        for (side, label) in [("a", a), ("b", b)] {
            if !has(label) {
                return Err(Error::NothingToTest {
                    stream: stream.name.clone(),
                    message: format!(
                        "test {:?}: sample {side} = {label:?} has no valid report in column {by:?}",
                        test.name
                    ),
                });
            }
        }
    }
    Ok(())
}

/// How a long fold shows its progress: the CLI draws a bar, the Python package and the
/// tests show nothing. Called from the fold's worker threads.
pub trait Progress: Sync {
    /// The fold is about to read `total_rows` rows.
    fn start(&self, total_rows: u64);
    /// `rows` more rows were folded.
    fn advance(&self, rows: u64);
    /// The fold ended (also on error paths that return early, nothing is promised).
    fn finish(&self);
}

/// No progress shown.
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&self, _: u64) {}
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}
