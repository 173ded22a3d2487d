//! The batch job's fold over in-memory Arrow batches (the Python package's `Job.fold`):
//! the same fold as a Parquet row group's batches in [`crate::batch_job`] (`GroupFold`,
//! block columns in stream order, every report in its pane), run in parallel on the
//! current rayon pool over slices of the batches (one fold per thread) and merged exactly, so the sketches equal those of
//! `batch` over a Parquet file with the same rows.

use arrow_array::RecordBatch;
use ldpstream_config::StreamConfig;
use ldpstream_connectors::per_thread::fold_per_thread;
use ldpstream_connectors::schema_check::check_schema;
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::stream::{
    stream_pane_width, with_block_columns, GroupFold, PanedDelta, ReportLayout, StreamError,
};
use ldpstream_engine::window::pane_start;

use crate::error::Error;

/// Folds `batches` (in stream order: block columns count rows from the first batch) into
/// one stream's per-pane, per-group sketches. `origin` names the data in errors.
pub fn fold_batches(
    stream: &StreamConfig,
    mechanism: &Mechanism,
    batches: &[RecordBatch],
    origin: &str,
) -> Result<PanedDelta, Error> {
    let layout = ReportLayout::of(stream, mechanism);
    // The columns are checked as `batch` checks a Parquet file's schema, before any row is
    // read: a wrong type is refused naming the column, never cast.
    for b in batches {
        check_schema(origin, &b.schema(), &layout)?;
    }
    crate::memory_check::validate_columns(batches, &layout, origin)?;
    let pane_ms = stream_pane_width(stream);
    // Slices of at most SLICE_ROWS rows (zero-copy), each with its first row in stream
    // order: a one-chunk table is then folded by every core, as a file's row groups are.
    let mut slices = Vec::new();
    let mut row = 0u64;
    for b in batches {
        let mut offset = 0;
        while offset < b.num_rows() {
            let len = SLICE_ROWS.min(b.num_rows() - offset);
            slices.push((b.slice(offset, len), row + offset as u64));
            offset += len;
        }
        row += b.num_rows() as u64;
    }
    // One fold per thread (not per split of the slices): each holds a full (group × cell)
    // table, and at many groups those dominate the memory.
    let folded = fold_per_thread(
        &slices,
        || GroupFold::new(&layout),
        |fold, (batch, first_row)| fold_one(fold, batch, *first_row, &layout, pane_ms, origin),
        |mut a, b| {
            a.merge(b)?;
            Ok::<_, StreamError>(a)
        },
    )?;
    Ok(folded.into_delta()?)
}

/// The rows a task folds at a time: the Parquet reader's batch size.
const SLICE_ROWS: usize = 64 * 1024;

/// One batch, as `batch` folds a Parquet batch: a bounded input has no late reports.
fn fold_one(
    fold: &mut GroupFold,
    batch: &RecordBatch,
    first_row: u64,
    layout: &ReportLayout,
    pane_ms: i64,
    origin: &str,
) -> Result<(), StreamError> {
    let batch = with_block_columns(batch, first_row, &layout.block_sizes).map_err(|source| {
        StreamError::Arrow {
            origin: origin.to_string(),
            source,
        }
    })?;
    let ts = batch
        .schema()
        .column_with_name(&layout.ts)
        .map(|_| layout.ts.as_str());
    let pane_of = |t: i64| Some(pane_start(t, pane_ms));
    fold.fold_batch(&batch, origin, ts, &pane_of)
}
