//! The reference grouped fold of one decoded batch, kept to test the one-pass fold
//! ([`super::group_fold`]) against: rows are permuted once so that each group's rows are
//! contiguous, then each group's slice goes through the mechanism's batch kernel.

use arrow_array::RecordBatch;
use arrow_array::{Array, ArrayRef, StringArray, TimestampMillisecondArray, UInt32Array};
use arrow_cast::cast;
use arrow_schema::{DataType, TimeUnit};
use arrow_select::take::{take, take_record_batch};

use super::error::StreamError;
use super::groups::{group_rows, BatchGroups};
use super::layout::ReportLayout;
use super::paned_delta::PanedDelta;
use crate::kernels::fold_batch;
use crate::sketch::Sketch;
use crate::window::{other_key, Grouped, EVENT_TIME_MS};
use crate::EngineError;

/// Folds one decoded batch into `out`. Grouped batches are permuted once so that each
/// group's rows are contiguous, then every group's slice goes through the same batch kernel
/// as an ungrouped stream: one kernel call per group and batch, never one per row.
pub fn fold_record_batch(
    batch: &RecordBatch,
    layout: &ReportLayout,
    origin: &str,
    out: &mut Grouped,
) -> Result<(), StreamError> {
    let arrow_err = |source| StreamError::Arrow {
        origin: origin.to_string(),
        source,
    };
    let report = column(batch, &layout.report, origin)?;
    let index = layout
        .index
        .as_ref()
        .map(|c| column(batch, c, origin))
        .transpose()?;
    let fold = |sketch: &mut Sketch, report: &dyn Array, index: Option<&dyn Array>| {
        fold_batch(&layout.mechanism, sketch, report, index).map_err(|e| match e {
            EngineError::WrongArrayType { expected, found } => StreamError::WrongType {
                origin: origin.to_string(),
                column: layout.report.clone(),
                expected,
                found,
            },
            other => StreamError::Engine(other),
        })
    };
    let key_columns = layout.key_columns();
    if key_columns.is_empty() {
        let sketch = out
            .entry(Vec::new())
            .or_insert_with(|| layout.mechanism.new_sketch());
        return fold(sketch, report.as_ref(), index.as_deref());
    }
    let mut owned: Vec<ArrayRef> = Vec::with_capacity(key_columns.len());
    for g in &key_columns {
        let utf8 = arrow_cast::cast(column(batch, g, origin)?.as_ref(), &DataType::Utf8)
            .map_err(arrow_err)?;
        owned.push(utf8);
    }
    let strings: Vec<&StringArray> = owned
        .iter()
        .map(|a| a.as_any().downcast_ref::<StringArray>())
        .collect::<Option<_>>()
        .ok_or_else(|| StreamError::WrongType {
            origin: origin.to_string(),
            column: key_columns.join(", "),
            expected: "columns that cast to Utf8".into(),
            found: "a column whose cast did not produce Utf8".into(),
        })?;
    for (values, name) in strings.iter().zip(&key_columns) {
        check_value_lengths(values, name, layout.max_group_value_bytes, origin)?;
    }
    let mut groups = group_rows(&strings, batch.num_rows());
    cap_groups(&mut groups, layout.max_groups, key_columns.len());
    // Counting sort of row indices by group id.
    let mut starts = vec![0u32; groups.keys.len() + 1];
    for &g in &groups.ids {
        starts[g as usize + 1] += 1;
    }
    for k in 1..starts.len() {
        starts[k] += starts[k - 1];
    }
    let mut cursor = starts.clone();
    let mut order = vec![0u32; groups.ids.len()];
    for (row, &g) in groups.ids.iter().enumerate() {
        order[cursor[g as usize] as usize] = row as u32;
        cursor[g as usize] += 1;
    }
    let order = UInt32Array::from(order);
    let report = take(report.as_ref(), &order, None).map_err(arrow_err)?;
    let index = index
        .map(|a| take(a.as_ref(), &order, None))
        .transpose()
        .map_err(arrow_err)?;
    for (g, key) in groups.keys.into_iter().enumerate() {
        let (from, to) = (starts[g] as usize, starts[g + 1] as usize);
        let report_slice = report.slice(from, to - from);
        let index_slice = index.as_ref().map(|a| a.slice(from, to - from));
        let sketch = out
            .entry(key)
            .or_insert_with(|| layout.mechanism.new_sketch());
        fold(sketch, report_slice.as_ref(), index_slice.as_deref())?;
    }
    Ok(())
}

/// Keeps the `max_groups` smallest keys of a batch apart and gives the rest one overflow
/// id, the rule [`super::paned_delta::PanedDelta`] applies across batches, so a high-cardinality
/// batch never allocates a sketch per row and the groups kept do not depend on row order.
fn cap_groups(groups: &mut BatchGroups, max_groups: usize, columns: usize) {
    if groups.keys.len() <= max_groups {
        return;
    }
    let other = other_key(columns);
    let mut by_key: Vec<usize> = (0..groups.keys.len())
        .filter(|&g| groups.keys[g] != other)
        .collect();
    by_key.sort_unstable_by(|&x, &y| groups.keys[x].cmp(&groups.keys[y]));
    let other_id = max_groups.min(by_key.len()) as u32;
    let mut new_id = vec![other_id; groups.keys.len()];
    let mut keys = Vec::with_capacity(other_id as usize + 1);
    for (i, &g) in by_key.iter().take(max_groups).enumerate() {
        new_id[g] = i as u32;
        keys.push(std::mem::take(&mut groups.keys[g]));
    }
    keys.push(other);
    for id in &mut groups.ids {
        *id = new_id[*id as usize];
    }
    groups.keys = keys;
}

/// Refuses a group column holding a value longer than `limit` bytes: the fold would keep
/// a copy of it per pane and the service one per metric series (the offsets say every
/// value's length without reading the bytes).
fn check_value_lengths(
    values: &StringArray,
    column: &str,
    limit: usize,
    origin: &str,
) -> Result<(), StreamError> {
    let offsets = values.value_offsets();
    match offsets
        .windows(2)
        .position(|w| (w[1] - w[0]) as usize > limit)
    {
        None => Ok(()),
        Some(row) => Err(StreamError::GroupValueTooLong {
            origin: origin.to_string(),
            column: column.to_string(),
            row,
            bytes: (offsets[row + 1] - offsets[row]) as usize,
            limit,
        }),
    }
}

/// The reference paned fold the one-pass [`super::group_fold::GroupFold`] is tested
/// against: rows split by pane, then by group, each group through its kernel.
/// Folds `batch` into `out`. `ts` names the event-time column when the batch has one;
/// `pane_of` maps an event time to its open pane, or None when the report is late.
pub fn fold_paned_batch_reference(
    batch: &RecordBatch,
    layout: &ReportLayout,
    origin: &str,
    ts: Option<&str>,
    pane_of: &dyn Fn(i64) -> Option<i64>,
    out: &mut PanedDelta,
) -> Result<(), StreamError> {
    out.max_groups = Some(layout.max_groups);
    fold_timed(batch, layout, origin, ts, pane_of, out)?;
    out.cap_groups()
}

fn fold_timed(
    batch: &RecordBatch,
    layout: &ReportLayout,
    origin: &str,
    ts: Option<&str>,
    pane_of: &dyn Fn(i64) -> Option<i64>,
    out: &mut PanedDelta,
) -> Result<(), StreamError> {
    let arrow_err = |source| StreamError::Arrow {
        origin: origin.to_string(),
        source,
    };
    let Some(ts_array) = ts.and_then(|c| batch.column_by_name(c)) else {
        return fold_record_batch(batch, layout, origin, &mut out.untimed);
    };
    let ms = cast(
        ts_array.as_ref(),
        &DataType::Timestamp(TimeUnit::Millisecond, None),
    )
    .map_err(arrow_err)?;
    let ms = ms
        .as_any()
        .downcast_ref::<TimestampMillisecondArray>()
        .ok_or_else(|| StreamError::WrongType {
            origin: origin.to_string(),
            column: layout.ts.clone(),
            expected: "Timestamp (ms, UTC) or Int64 milliseconds".into(),
            found: ts_array.data_type().to_string(),
        })?;
    // Per row: the index of its pane in `panes`, UNTIMED for a row without event time, or
    // LATE for a row whose pane had closed.
    const LATE: u32 = u32::MAX;
    const UNTIMED: u32 = u32::MAX - 1;
    let mut panes: Vec<i64> = Vec::new();
    let mut ids = Vec::with_capacity(ms.len());
    let mut last: Option<(i64, u32)> = None;
    let mut untimed = 0usize;
    for i in 0..ms.len() {
        // A report without event time is in no pane, yet it is a report of the stream:
        // the global and cumulative windows take it (as for a source with no ts column).
        if ms.is_null(i) {
            ids.push(UNTIMED);
            untimed += 1;
            continue;
        }
        let t = ms.value(i);
        if !EVENT_TIME_MS.contains(&t) {
            ids.push(LATE);
            continue;
        }
        out.max_ts = Some(out.max_ts.map_or(t, |m| m.max(t)));
        let Some(pane) = pane_of(t) else {
            ids.push(LATE);
            continue;
        };
        // Rows of a live stream arrive mostly in time order: remember the last pane.
        let id = match last {
            Some((p, id)) if p == pane => id,
            _ => {
                let id = match panes.iter().position(|&p| p == pane) {
                    Some(id) => id as u32,
                    None => {
                        panes.push(pane);
                        (panes.len() - 1) as u32
                    }
                };
                last = Some((pane, id));
                id
            }
        };
        ids.push(id);
    }
    let late = ids.iter().filter(|&&id| id == LATE).count();
    out.late += late as u64;
    if panes.len() == 1 && late == 0 && untimed == 0 {
        return fold_record_batch(
            batch,
            layout,
            origin,
            out.panes.entry(panes[0]).or_default(),
        );
    }
    if panes.is_empty() && late == 0 {
        return fold_record_batch(batch, layout, origin, &mut out.untimed);
    }
    // Counting sort of row indices by bucket: the panes, then the untimed rows last; late
    // rows are left out.
    let bucket = |id: u32| match id {
        LATE => None,
        UNTIMED => Some(panes.len()),
        id => Some(id as usize),
    };
    let mut starts = vec![0u32; panes.len() + 2];
    for &id in &ids {
        if let Some(b) = bucket(id) {
            starts[b + 1] += 1;
        }
    }
    for k in 1..starts.len() {
        starts[k] += starts[k - 1];
    }
    let mut cursor = starts.clone();
    let mut order = vec![0u32; starts[panes.len() + 1] as usize];
    for (row, &id) in ids.iter().enumerate() {
        if let Some(b) = bucket(id) {
            order[cursor[b] as usize] = row as u32;
            cursor[b] += 1;
        }
    }
    let sorted = take_record_batch(batch, &UInt32Array::from(order)).map_err(arrow_err)?;
    let slice = |b: usize| {
        let (from, to) = (starts[b] as usize, starts[b + 1] as usize);
        sorted.slice(from, to - from)
    };
    for (id, &pane) in panes.iter().enumerate() {
        fold_record_batch(
            &slice(id),
            layout,
            origin,
            out.panes.entry(pane).or_default(),
        )?;
    }
    if untimed > 0 {
        fold_record_batch(&slice(panes.len()), layout, origin, &mut out.untimed)?;
    }
    Ok(())
}

fn column(batch: &RecordBatch, name: &str, origin: &str) -> Result<ArrayRef, StreamError> {
    batch
        .column_by_name(name)
        .cloned()
        .ok_or_else(|| StreamError::MissingColumn {
            origin: origin.to_string(),
            column: name.to_string(),
            expected: "a column the schema check found".into(),
            available: batch
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect::<Vec<_>>()
                .join(", "),
        })
}
