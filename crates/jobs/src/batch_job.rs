//! The batch job: every stream of a config over Parquet files, to test records.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ldpstream_config::{Config, SourceConfig, StreamConfig};
use ldpstream_connectors::parquet::{inspect, resolve_inputs};
use ldpstream_connectors::{ConnectorError, ParallelFiles, RowGroupInput};
use ldpstream_engine::kernels::fold_key_counts;
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::sketch::Sketch;
use ldpstream_engine::stream::{
    stream_pane_width, GroupFold, PanedDelta, RecordSink, ReportLayout, StreamError,
};
use ldpstream_engine::window::pane_start;
use ldpstream_engine::EngineError;
use tracing::info;

use crate::error::Error;
use crate::evaluate::test_streams_into;
use crate::ledger::file::input_fingerprint;
pub use crate::ledger::release::{Release, Released};
use crate::ledger::store::LockedLedger;

/// Runs every stream of `config` over its Parquet files (or `inputs`, when given) and
/// hands `sink` one record per (stream, test, window, group) as it is made. Curator-model
/// tests spend from `release.ledger` (see [`crate::ledger::file::open_ledger`]), which is
/// returned still locked: the caller releases the records through
/// [`crate::ledger::release`], which saves the spends first.
pub fn run_batch(
    config: &Config,
    inputs: &[String],
    release: Release<'_>,
    progress: &dyn Progress,
    sink: &mut dyn RecordSink,
) -> Result<Option<LockedLedger>, Error> {
    let fingerprints: Vec<String> = config
        .streams
        .iter()
        .map(|s| input_fingerprint(s, inputs))
        .collect();
    test_streams_into(config, &fingerprints, release, sink, |stream, mechanism| {
        let files = resolve_inputs(&patterns_of(stream, inputs)?)?;
        fold_stream(stream, mechanism, &files, progress)
    })
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
    let folded = ParallelFiles::new(&inputs, &layout).fold(
        || Folded {
            fold: GroupFold::new(&layout),
            counts: PanedDelta::default(),
        },
        |acc, input| fold_input(acc, input, &layout, pane_ms),
        |mut a, b| {
            a.fold.merge(b.fold)?;
            a.counts.merge(b.counts)?;
            Ok(a)
        },
        &|rows| progress.advance(rows),
    )?;
    let mut sketches = folded.counts;
    sketches.merge(folded.fold.into_delta()?)?;
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

/// What one task of the parallel fold accumulates: its batches' one-pass fold, and the
/// sketches of the row groups the dictionary-key fast path counted.
struct Folded {
    fold: GroupFold,
    counts: PanedDelta,
}

/// Folds one input of a row group into `acc`: a batch into its panes (a bounded input has
/// no late reports: every report lands in its pane), or the dictionary-key counts of the
/// fast path into the one untimed sketch.
fn fold_input(
    acc: &mut Folded,
    input: RowGroupInput<'_>,
    layout: &ReportLayout,
    pane_ms: i64,
) -> Result<(), ConnectorError> {
    match input {
        RowGroupInput::Batch { batch, origin, ts } => {
            let pane_of = |t: i64| Some(pane_start(t, pane_ms));
            acc.fold.fold_batch(batch, origin, ts, &pane_of)?;
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
            // A task folds several row groups: each adds to the one sketch.
            match acc.counts.untimed.get_mut(&Vec::new()) {
                Some(existing) => existing.merge(&sketch).map_err(StreamError::from)?,
                None => {
                    acc.counts.untimed.insert(Vec::new(), sketch);
                }
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
