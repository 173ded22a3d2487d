//! One row group of a checked file ([`super::files`]) read as Arrow batches: what
//! [`crate::ParallelFiles`] hands out for a row group that its dictionary-key fast path
//! ([`super::dictionary`]) does not take.

use arrow::record_batch::RecordBatch;
use ldpstream_engine::stream::{with_block_columns, ReportLayout};
use parquet::arrow::ProjectionMask;

use super::files::{open_inspected, InputFile};
use crate::error::ConnectorError;

pub use crate::records::BATCH_ROWS;

/// Reads row group `rg` of `file` batch by batch (every layout and encoding), with the
/// stream-order block columns added (`first_row` is the row group's first row in stream
/// order), and hands each batch to `each` with the file's name and its event-time column
/// (None when the file has none).
pub fn read_row_group_batches(
    file: &InputFile,
    rg: usize,
    first_row: u64,
    layout: &ReportLayout,
    mut each: impl FnMut(&RecordBatch, &str, Option<&str>) -> Result<(), ConnectorError>,
) -> Result<(), ConnectorError> {
    let path = file.path.as_path();
    let shown = || path.display().to_string();
    let arrow_err = |source| ConnectorError::Arrow {
        path: shown(),
        source,
    };
    let builder = open_inspected(file)?;
    let arrow_schema = builder.schema().clone();
    let ts = file.has_ts.then_some(layout.ts.as_str());
    let roots = layout
        .columns()
        .map(String::as_str)
        .chain(ts)
        .map(|c| arrow_schema.index_of(c).map_err(arrow_err))
        .collect::<Result<Vec<_>, _>>()?;
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let reader = builder
        .with_projection(mask)
        .with_row_groups(vec![rg])
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|source| ConnectorError::Parquet {
            path: shown(),
            source,
        })?;
    let origin = shown();
    let mut row = first_row;
    for batch in reader {
        let batch = batch.map_err(arrow_err)?;
        let rows = batch.num_rows() as u64;
        let batch = with_block_columns(&batch, row, &layout.block_sizes).map_err(arrow_err)?;
        each(&batch, &origin, ts)?;
        row += rows;
    }
    Ok(())
}
