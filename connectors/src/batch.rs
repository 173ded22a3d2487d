//! The batch job: every stream of a config over Parquet files, to test records.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ldpstream_config::{
    Config, MechanismConfig, SourceConfig, StreamConfig, TestConfig, TestKind, TestMethod,
};
use ldpstream_engine::curator::ledger::PrivacyLedger;
use ldpstream_engine::evaluate::{
    evaluate, evaluate_private, evaluate_two_sample, BlockCounts, Scope,
};
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::record::TestRecord;
use ldpstream_engine::sketch::Sketch;
use ldpstream_engine::stats::bh_q_values;
use ldpstream_engine::window::{Bounds, PaneStore};
use ldpstream_engine::EngineError;
use rand::rngs::StdRng;
use tracing::{info, warn};

use crate::error::ConnectorError;
use crate::grouping::GroupKey;
use crate::ledger_file::LedgerBook;
use crate::paned::PanedDelta;
use crate::parquet_in::{
    block_column, fold_files, inspect, progress_bar, resolve_inputs, GroupedSketches, ReportLayout,
};
use crate::windows::{evaluate_snapshot, rfc3339, stream_pane_width, take_due};

pub fn run_batch(
    config: &Config,
    inputs: &[String],
    ledgers: &mut LedgerBook,
    noise: &mut StdRng,
) -> Result<Vec<TestRecord>, ConnectorError> {
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
        let mut ledger = ledgers.for_stream(stream);
        let mut private = Private {
            ledger: ledger.as_mut(),
            noise: &mut *noise,
        };
        records.extend(evaluate_stream(
            stream,
            &mechanism,
            &sketches,
            &mut private,
        )?);
        if let Some(l) = ledger {
            ledgers.streams.insert(stream.name.clone(), l);
        }
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
        group_by: fold_columns(stream),
        ts: stream.columns.ts.clone(),
        block_sizes: block_sizes(stream),
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

/// Project a fold key (values of `fold_columns`) onto `wanted` columns.
fn project(key: &GroupKey, fold_columns: &[String], wanted: &[String]) -> GroupKey {
    wanted
        .iter()
        .map(|w| {
            fold_columns
                .iter()
                .position(|c| c == w)
                .and_then(|i| key.get(i).cloned())
                .flatten()
        })
        .collect()
}

/// Merges the sketches whose projected keys agree.
fn merge_by(
    sketches: &GroupedSketches,
    fold_columns: &[String],
    wanted: &[String],
    keep: impl Fn(&GroupKey) -> bool,
) -> Result<BTreeMap<GroupKey, Sketch>, ConnectorError> {
    let mut out: BTreeMap<GroupKey, Sketch> = BTreeMap::new();
    for (key, sketch) in sketches.iter().filter(|(k, _)| keep(k)) {
        match out.entry(project(key, fold_columns, wanted)) {
            std::collections::btree_map::Entry::Occupied(mut e) => e.get_mut().merge(sketch)?,
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(sketch.clone());
            }
        }
    }
    Ok(out)
}

fn scope(columns: &[String], key: &GroupKey, bounds: Option<Bounds>) -> Scope {
    Scope {
        group: (!columns.is_empty())
            .then(|| columns.iter().cloned().zip(key.iter().cloned()).collect()),
        window_start: bounds.map(|b| rfc3339(b.start)),
        window_end: bounds.map(|b| rfc3339(b.end)),
    }
}

/// What curator-model tests need: the stream's ledger (None when it has no budget) and
/// the noise generator (a CSPRNG unless the caller asked for an insecure seed).
pub struct Private<'a> {
    pub ledger: Option<&'a mut PrivacyLedger>,
    pub noise: &'a mut StdRng,
}

/// The records of one test over one window's sketches, keyed by `key_columns`: sketches are
/// merged down to the test's groups, two-sample tests pair their labelled samples,
/// curator-model tests spend from the ledger, and every record gets its Benjamini–Hochberg
/// q-value across the window's groups.
pub fn evaluate_test_groups(
    stream: &StreamConfig,
    test: &TestConfig,
    mechanism: &Mechanism,
    sketches: &GroupedSketches,
    fold_columns: &[String],
    bounds: Option<Bounds>,
    private: &mut Private,
) -> Result<Vec<TestRecord>, ConnectorError> {
    let window = (bounds.map(|b| b.start), bounds.map(|b| b.end));
    let fold_columns = fold_columns.to_vec();
    let empty_group;
    let sketches = if sketches.is_empty() && stream.columns.group_by.is_empty() {
        empty_group =
            GroupedSketches::from([(vec![None; fold_columns.len()], mechanism.new_sketch())]);
        &empty_group
    } else {
        sketches
    };
    let group_by = &stream.columns.group_by;
    let mut batch = Vec::new();
    {
        match (&test.kind, &test.by, &test.a, &test.b) {
            (TestKind::TwoSample, Some(by), Some(a), Some(b)) => {
                let record_columns: Vec<String> =
                    group_by.iter().filter(|c| *c != by).cloned().collect();
                let by_index = fold_columns.iter().position(|c| c == by);
                let side = |value: &String| {
                    merge_by(sketches, &fold_columns, &record_columns, |k| {
                        by_index
                            .and_then(|i| k.get(i))
                            .is_some_and(|v| v.as_ref() == Some(value))
                    })
                };
                let (sa, sb) = (side(a)?, side(b)?);
                let keys: std::collections::BTreeSet<&GroupKey> =
                    sa.keys().chain(sb.keys()).collect();
                let empty = mechanism.new_sketch();
                for key in keys {
                    let x = sa.get(key).unwrap_or(&empty);
                    let y = sb.get(key).unwrap_or(&empty);
                    batch.push(evaluate_two_sample(
                        stream,
                        test,
                        mechanism,
                        scope(&record_columns, key, bounds),
                        x,
                        y,
                    )?);
                }
            }
            (TestKind::Uniformity | TestKind::Identity, _, _, _) => {
                let ledger = private.ledger.as_deref_mut().ok_or_else(|| {
                    ConnectorError::Invalid(format!(
                        "stream {:?} has private tests but no budget_epsilon",
                        stream.name
                    ))
                })?;
                let by_block = match test.block_size {
                    Some(size) => {
                        let mut wanted = group_by.clone();
                        wanted.push(block_column(size));
                        Some(merge_by(sketches, &fold_columns, &wanted, |_| true)?)
                    }
                    None => None,
                };
                for (key, sketch) in merge_by(sketches, &fold_columns, group_by, |_| true)? {
                    let d = mechanism.domain();
                    let block_counts = |b: u64| -> Result<Vec<u64>, EngineError> {
                        let mut k = key.clone();
                        k.push(Some(b.to_string()));
                        Ok(match by_block.as_ref().and_then(|m| m.get(&k)) {
                            Some(Sketch::Counts(c)) => c.counts().to_vec(),
                            _ => vec![0; d],
                        })
                    };
                    let blocks: Option<BlockCounts> =
                        by_block.as_ref().map(|_| &block_counts as BlockCounts);
                    batch.push(evaluate_private(
                        stream,
                        test,
                        mechanism,
                        scope(group_by, &key, bounds),
                        &sketch,
                        window,
                        ledger,
                        &mut *private.noise,
                        blocks,
                    )?);
                }
            }
            _ => {
                for (key, sketch) in merge_by(sketches, &fold_columns, group_by, |_| true)? {
                    batch.push(evaluate(
                        stream,
                        test,
                        mechanism,
                        scope(group_by, &key, bounds),
                        &sketch,
                    )?);
                }
            }
        }
        let q = bh_q_values(&batch.iter().map(|r| r.p_value).collect::<Vec<_>>());
        for (r, q) in batch.iter_mut().zip(q) {
            r.q_value = q;
        }
    }
    let q = bh_q_values(&batch.iter().map(|r| r.p_value).collect::<Vec<_>>());
    for (r, q) in batch.iter_mut().zip(q) {
        r.q_value = q;
    }
    Ok(batch)
}

/// One record per (test, window, group). The input is exhausted, so every window is final
/// and no report is late: each one lands in its window whatever order files were read in.
pub fn evaluate_stream(
    stream: &StreamConfig,
    mechanism: &Mechanism,
    folded: &PanedDelta,
    private: &mut Private,
) -> Result<Vec<TestRecord>, ConnectorError> {
    if stream.tests.is_empty() {
        warn!(stream = %stream.name, "stream has no [[stream.test]] entries; nothing to report");
    }
    let mut store = PaneStore::new(stream_pane_width(stream), 0);
    folded.apply(&mut store)?;
    store.finish();
    let mut records = Vec::new();
    for snapshot in take_due(stream, &mut store, false)? {
        records.extend(evaluate_snapshot(stream, mechanism, &snapshot, private)?);
    }
    Ok(records)
}

/// The block sizes of a stream's SubsampleAndAggregate tests.
pub fn block_sizes(stream: &StreamConfig) -> Vec<u64> {
    let mut sizes: Vec<u64> = stream
        .tests
        .iter()
        .filter(|t| t.method == Some(TestMethod::SubsampleAndAggregate))
        .filter_map(|t| t.block_size)
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// The columns a stream's reports are folded by: its `group_by`, then every two-sample
/// label column not already among them.
pub fn fold_columns(stream: &StreamConfig) -> Vec<String> {
    let mut columns = stream.columns.group_by.clone();
    for test in &stream.tests {
        if let Some(by) = &test.by {
            if !columns.contains(by) {
                columns.push(by.clone());
            }
        }
    }
    columns
}
