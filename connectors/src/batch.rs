//! The batch job: every stream of a config over Parquet files, to test records.

use std::path::PathBuf;

use ldpstream_config::{Config, MechanismConfig, SourceConfig, StreamConfig};
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::record::TestRecord;
use ldpstream_engine::window::PaneStore;
use tracing::{info, warn};

use crate::error::ConnectorError;
use crate::paned::PanedDelta;
use crate::parquet_in::{fold_files, inspect, progress_bar, resolve_inputs, ReportLayout};
use crate::windows::{evaluate_snapshot, stream_pane_width, take_due};

/// Runs every test of every stream. `inputs`, when not empty, replaces the paths of every
/// Parquet source in the config.
pub fn run_batch(config: &Config, inputs: &[String]) -> Result<Vec<TestRecord>, ConnectorError> {
    let mut records = Vec::new();
    for stream in &config.streams {
        let patterns = match (&stream.source, inputs.is_empty()) {
            (_, false) => inputs.to_vec(),
            (SourceConfig::Parquet { paths, .. }, true) => paths.clone(),
            (SourceConfig::Simulator(_) | SourceConfig::Kafka(_), true) => {
                return Err(ConnectorError::Invalid(format!(
                    "stream {:?} has a simulator or Kafka source, which only `serve` runs; give `batch` Parquet files with --input",
                    stream.name
                )))
            }
        };
        let files = resolve_inputs(&patterns)?;
        let mechanism = Mechanism::from_config(&stream.mechanism)?;
        let sketches = fold_stream(stream, &mechanism, &files)?;
        records.extend(evaluate_stream(stream, &mechanism, &sketches)?);
    }
    Ok(records)
}

/// The columns a stream's reports use, from its config.
pub fn layout(stream: &StreamConfig, mechanism: &Mechanism) -> ReportLayout {
    let index = match stream.mechanism {
        MechanismConfig::Hadamard { .. } => Some(stream.columns.row.clone()),
        MechanismConfig::Cohort { .. } => Some(stream.columns.cohort.clone()),
        _ => None,
    };
    ReportLayout {
        mechanism: mechanism.clone(),
        report: stream.columns.report.clone(),
        index,
        group_by: stream.columns.group_by.clone(),
        ts: stream.columns.ts.clone(),
    }
}

/// Checks and folds a stream's files into per-pane, per-group sketches.
pub fn fold_stream(
    stream: &StreamConfig,
    mechanism: &Mechanism,
    files: &[PathBuf],
) -> Result<PanedDelta, ConnectorError> {
    let layout = layout(stream, mechanism);
    let inputs = inspect(files, &layout)?;
    let total: u64 = inputs.iter().flat_map(|f| &f.row_group_rows).sum();
    info!(stream = %stream.name, files = inputs.len(), rows = total, "folding");
    let bar = progress_bar(total);
    let started = std::time::Instant::now();
    let sketches = fold_files(&inputs, &layout, stream_pane_width(stream), &bar)?;
    bar.finish_and_clear();
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

/// One record per (test, window, group). The input is exhausted, so every window is final
/// and no report is late: each one lands in its window whatever order files were read in.
pub fn evaluate_stream(
    stream: &StreamConfig,
    mechanism: &Mechanism,
    folded: &PanedDelta,
) -> Result<Vec<TestRecord>, ConnectorError> {
    if stream.tests.is_empty() {
        warn!(stream = %stream.name, "stream has no [[stream.test]] entries; nothing to report");
    }
    let mut store = PaneStore::new(stream_pane_width(stream), 0);
    folded.apply(&mut store)?;
    store.finish();
    let mut records = Vec::new();
    for snapshot in take_due(stream, &mut store, false)? {
        records.extend(evaluate_snapshot(stream, mechanism, &snapshot)?);
    }
    Ok(records)
}
