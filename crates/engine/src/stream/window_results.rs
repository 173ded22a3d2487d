//! A window's test results: sketches merged down to each test's groups, two-sample tests
//! paired, curator-model tests charged to the ledger, and Benjamini–Hochberg q-values
//! across the groups of one test and window.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use ldpstream_config::{StreamConfig, TestConfig, TestSpec};
use rand::rngs::StdRng;
use tracing::warn;

use super::due::{for_each_due, rfc3339, stream_pane_width, WindowSnapshot};
use super::error::StreamError;
use super::group_map::{GroupEmit, GroupMap};
use super::latches::SequentialLatches;
use super::layout::{block_column, ReportLayout};
use super::looks::{for_each_look, Look};
use super::paned_delta::PanedDelta;
use super::record_sink::{CollectRecords, Family, RecordSink};
use crate::curator::ledger::PrivacyLedger;
use crate::hypothesis::{evaluate, evaluate_private, evaluate_two_sample, BlockCounts, Scope};
use crate::mechanism::Mechanism;
use crate::record::TestRecord;
use crate::sketch::Sketch;
use crate::window::{Bounds, GroupKey, Grouped, PaneStore};
use crate::EngineError;

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

/// Merges the sketches whose projected keys agree. A group that is one fold key (the
/// usual case: a test grouped as the stream folds) is borrowed, not copied: at d = 2^24 a
/// copy of every group's table would double the window's memory.
fn merge_by<'a>(
    sketches: &'a Grouped,
    fold_columns: &[String],
    wanted: &[String],
    keep: impl Fn(&GroupKey) -> bool,
) -> Result<BTreeMap<GroupKey, Cow<'a, Sketch>>, StreamError> {
    let mut out: BTreeMap<GroupKey, Cow<'a, Sketch>> = BTreeMap::new();
    for (key, sketch) in sketches.iter().filter(|(k, _)| keep(k)) {
        match out.entry(project(key, fold_columns, wanted)) {
            std::collections::btree_map::Entry::Occupied(mut e) => {
                e.get_mut().to_mut().merge(sketch)?
            }
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(Cow::Borrowed(sketch));
            }
        }
    }
    Ok(out)
}

fn scope(columns: &[String], key: &GroupKey, bounds: Option<Bounds>, look: bool) -> Scope {
    Scope {
        group: (!columns.is_empty())
            .then(|| columns.iter().cloned().zip(key.iter().cloned()).collect()),
        window_start: bounds.map(|b| rfc3339(b.start)),
        window_end: bounds.map(|b| rfc3339(b.end)),
        look,
    }
}

/// What curator-model tests need: the stream's ledger (None when it has no budget) and
/// the noise generator (a CSPRNG unless the caller asked for an insecure seed).
pub struct Private<'a> {
    pub ledger: Option<&'a mut PrivacyLedger>,
    pub noise: &'a mut StdRng,
}

/// The records of one test over one window's sketches, keyed by `key_columns`, handed to
/// `emit` in key order: sketches are merged down to the test's groups, two-sample tests
/// pair their labelled samples, curator-model tests spend from the ledger. The
/// Benjamini–Hochberg q-values across the window's groups are the caller's
/// ([`Family`]). `groups` runs the per-group tests that spend no budget (curator-model
/// tests draw noise and spend in group order, so they run in order). `look`: the records
/// are a sequential test's provisional ones, its looks ([`Scope::look`]).
#[allow(clippy::too_many_arguments)]
fn evaluate_test_groups(
    stream: &StreamConfig,
    test: &TestConfig,
    mechanism: &Mechanism,
    sketches: &Grouped,
    fold_columns: &[String],
    bounds: Option<Bounds>,
    look: bool,
    private: &mut Private,
    groups: &dyn GroupMap,
    emit: &mut GroupEmit<'_>,
) -> Result<(), StreamError> {
    let window = (bounds.map(|b| b.start), bounds.map(|b| b.end));
    let fold_columns = fold_columns.to_vec();
    let empty_group;
    let sketches = if sketches.is_empty() && stream.columns.group_by.is_empty() {
        empty_group = Grouped::from([(vec![None; fold_columns.len()], mechanism.new_sketch())]);
        &empty_group
    } else {
        sketches
    };
    let group_by = &stream.columns.group_by;
    {
        match &test.spec {
            TestSpec::TwoSample { by, a, b } => {
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
                let keys: Vec<&GroupKey> = sa
                    .keys()
                    .chain(sb.keys())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                let empty = mechanism.new_sketch();
                groups.map(
                    keys.len(),
                    &|i| {
                        let key = keys[i];
                        let x = sa.get(key).map_or(&empty, |s| &**s);
                        let y = sb.get(key).map_or(&empty, |s| &**s);
                        Ok(evaluate_two_sample(
                            stream,
                            test,
                            mechanism,
                            scope(&record_columns, key, bounds, look),
                            x,
                            y,
                        )?)
                    },
                    emit,
                )?;
            }
            TestSpec::Uniformity(_) | TestSpec::Identity { .. } => {
                let ledger =
                    private
                        .ledger
                        .as_deref_mut()
                        .ok_or_else(|| StreamError::NoBudget {
                            stream: stream.name.clone(),
                        })?;
                let by_block = match test.method.block_size() {
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
                        Ok(
                            match by_block.as_ref().and_then(|m| m.get(&k)).map(|s| &**s) {
                                Some(Sketch::Counts(c)) => c.counts().into_owned(),
                                _ => vec![0; d],
                            },
                        )
                    };
                    let blocks: Option<BlockCounts> =
                        by_block.as_ref().map(|_| &block_counts as BlockCounts);
                    emit(evaluate_private(
                        stream,
                        test,
                        mechanism,
                        scope(group_by, &key, bounds, look),
                        &sketch,
                        window,
                        ledger,
                        &mut *private.noise,
                        blocks,
                    )?)?;
                }
            }
            TestSpec::Gof { .. } | TestSpec::Independence { .. } => {
                let merged: Vec<(GroupKey, Cow<Sketch>)> =
                    merge_by(sketches, &fold_columns, group_by, |_| true)?
                        .into_iter()
                        .collect();
                groups.map(
                    merged.len(),
                    &|i| {
                        let (key, sketch) = &merged[i];
                        Ok(evaluate(
                            stream,
                            test,
                            mechanism,
                            scope(group_by, key, bounds, look),
                            sketch,
                        )?)
                    },
                    emit,
                )?;
            }
        }
    }
    Ok(())
}

/// One record per (test, window, group). The input is exhausted, so every window is final
/// and no report is late: each one lands in its window whatever order files were read in.
/// `groups` evaluates each (test, window)'s groups: [`Sequential`](super::Sequential), or the caller's pool.
pub fn evaluate_stream(
    stream: &StreamConfig,
    mechanism: &Mechanism,
    folded: PanedDelta,
    private: &mut Private,
    groups: &dyn GroupMap,
) -> Result<Vec<TestRecord>, StreamError> {
    let mut all = CollectRecords::default();
    evaluate_stream_into(stream, mechanism, folded, private, groups, &mut all)?;
    Ok(all.records)
}

/// [`evaluate_stream`], handing each record to `sink` as it is made, family by family
/// (a window's looks in order, then its final records), instead of keeping them all.
pub fn evaluate_stream_into(
    stream: &StreamConfig,
    mechanism: &Mechanism,
    folded: PanedDelta,
    private: &mut Private,
    groups: &dyn GroupMap,
    sink: &mut dyn RecordSink,
) -> Result<(), StreamError> {
    if stream.tests.is_empty() {
        warn!(stream = %stream.name, "stream has no [[stream.test]] entries; nothing to report");
    }
    let mut store = PaneStore::new(stream_pane_width(stream), 0).with_max_groups(stream.max_groups);
    // Moved in, not copied: the folded sketches are held once.
    folded.apply(&mut store)?;
    // A real group whose values are literally "__other__" is in the overflow group's key
    // too; only a full store can have overflowed.
    if store.holds_overflow() && store.groups_kept() >= stream.max_groups {
        warn!(
            stream = %stream.name,
            max_groups = stream.max_groups,
            "the input has more groups than max_groups; the reports of the rest are tested as \
             the \"__other__\" group"
        );
    }
    store.finish();
    // Looks first: taking the finals retires panes. Each look is evaluated as it is taken
    // and its records kept (one list per look, its family), to go out before its
    // window's final records.
    let mut look_records: BTreeMap<(usize, Option<i64>), Vec<Vec<TestRecord>>> = BTreeMap::new();
    for_each_look(stream, &store, None, i64::MAX, |look| {
        let key = (look.snapshot.test, look.snapshot.bounds.map(|b| b.start));
        let mut records = Vec::new();
        let end = rfc3339(look.end);
        snapshot_records(
            stream,
            mechanism,
            &look.snapshot,
            Some(&end),
            private,
            groups,
            &mut |r| {
                records.push(r);
                Ok(())
            },
        )?;
        look_records.entry(key).or_default().push(records);
        Ok::<(), StreamError>(())
    })?;
    // A sequential test's rejection at any look stands at its final record (and the
    // anytime p-value is the smallest over the looks), as in serve: every record is
    // observed in output order on its way to the sink.
    let mut latches = SequentialLatches::for_stream(stream);
    // One window at a time, borrowed from the store where it can be: the store is this
    // function's own, so nothing needs a copy taken under a lock.
    for_each_due(stream, &mut store, false, |snapshot| {
        let key = (snapshot.test, snapshot.bounds.map(|b| b.start));
        for look in look_records.remove(&key).unwrap_or_default() {
            let mut family = Family::new(&mut *sink, Some(&mut latches));
            for r in look {
                family.push(r)?;
            }
            family.end()?;
        }
        let mut family = Family::new(&mut *sink, Some(&mut latches));
        snapshot_records(
            stream,
            mechanism,
            &snapshot,
            None,
            private,
            groups,
            &mut |r| family.push(r),
        )?;
        family.end()
    })?;
    Ok(())
}

/// The records of one event-time look: provisional, with `look_end` set. `groups`
/// evaluates its groups: [`Sequential`](super::Sequential), or the caller's pool.
pub fn evaluate_look(
    stream: &StreamConfig,
    mechanism: &Mechanism,
    look: &Look,
    private: &mut Private,
    groups: &dyn GroupMap,
) -> Result<Vec<TestRecord>, StreamError> {
    let end = rfc3339(look.end);
    one_family(|emit| {
        snapshot_records(
            stream,
            mechanism,
            &look.snapshot,
            Some(&end),
            private,
            groups,
            emit,
        )
    })
}

/// The records of one window snapshot. Curator-model (private) tests release only final
/// windows: every release spends privacy budget, and provisional snapshots repeat.
/// `groups` evaluates its groups: [`Sequential`](super::Sequential), or the caller's pool.
pub fn evaluate_snapshot(
    stream: &StreamConfig,
    mechanism: &Mechanism,
    snapshot: &WindowSnapshot,
    private: &mut Private,
    groups: &dyn GroupMap,
) -> Result<Vec<TestRecord>, StreamError> {
    one_family(|emit| snapshot_records(stream, mechanism, snapshot, None, private, groups, emit))
}

/// The records `make` hands on, kept as one family with its q-values set (the anytime
/// ones are the caller's, who observes the looks).
fn one_family(
    make: impl FnOnce(&mut GroupEmit<'_>) -> Result<(), StreamError>,
) -> Result<Vec<TestRecord>, StreamError> {
    let mut all = CollectRecords::default();
    let mut family = Family::new(&mut all, None);
    make(&mut |r| family.push(r))?;
    family.end()?;
    Ok(all.records)
}

/// One snapshot's records, handed to `emit` in key order with what the snapshot says of
/// them: final or not, the late reports, and a look's end.
#[allow(clippy::too_many_arguments)]
fn snapshot_records(
    stream: &StreamConfig,
    mechanism: &Mechanism,
    snapshot: &WindowSnapshot,
    look_end: Option<&str>,
    private: &mut Private,
    groups: &dyn GroupMap,
    emit: &mut GroupEmit<'_>,
) -> Result<(), StreamError> {
    let test = &stream.tests[snapshot.test];
    if test.spec.curator().is_some() && !snapshot.is_final {
        return Ok(());
    }
    let key_columns = ReportLayout::of(stream, mechanism).key_columns();
    // A private test releases no count of raw reports, late ones included (they stay 0).
    let late = if test.spec.curator().is_some() {
        0
    } else {
        snapshot.late
    };
    evaluate_test_groups(
        stream,
        test,
        mechanism,
        &snapshot.sketches,
        &key_columns,
        snapshot.bounds,
        test.sequential && !snapshot.is_final,
        private,
        groups,
        &mut |mut record| {
            record.is_final = snapshot.is_final;
            record.late_reports = late;
            if let Some(end) = look_end {
                record.look_end = Some(end.to_string());
            }
            emit(record)
        },
    )
}
