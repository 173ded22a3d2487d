//! One row group of a checked file ([`super::files`]) read as Arrow batches: what
//! [`crate::ParallelFiles`] hands out for a row group that its dictionary-key fast path
//! ([`super::dictionary`]) does not take. String group columns are read from their pages
//! as one dictionary per row group ([`super::group_pages`]) when the decoder reads every
//! page, else by the Arrow reader as a dictionary ([`super::group_dictionary`]).

use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use ldpstream_engine::stream::{with_block_columns, ReportLayout};
use parquet::arrow::ProjectionMask;

use super::files::{open_inspected, InputFile};
use super::group_pages::read_group_chunk;
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
    // The string group columns read from their pages, the whole row group at once; the
    // Arrow reader reads the rest.
    let mut direct: Vec<(Arc<Field>, ArrayRef)> = Vec::new();
    for g in &layout.group_by {
        let field = arrow_schema.field_with_name(g).map_err(arrow_err)?;
        if is_string_dictionary(field.data_type()) {
            if let Some(array) = read_group_chunk(file, rg, g)? {
                let field = Field::new(g, array.data_type().clone(), true);
                direct.push((Arc::new(field), array));
            }
        }
    }
    let roots = layout
        .columns()
        .filter(|c| !direct.iter().any(|(f, _)| f.name() == *c))
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
    let mut schema: Option<SchemaRef> = None;
    for batch in reader {
        let mut batch = batch.map_err(arrow_err)?;
        let rows = batch.num_rows() as u64;
        if !direct.is_empty() {
            let schema = schema.get_or_insert_with(|| {
                let read = batch.schema();
                let fields = read.fields().iter().cloned();
                let extra = direct.iter().map(|(f, _)| Arc::clone(f));
                Arc::new(Schema::new(fields.chain(extra).collect::<Vec<_>>()))
            });
            let at = (row - first_row) as usize;
            let mut columns = batch.columns().to_vec();
            columns.extend(direct.iter().map(|(_, a)| a.slice(at, rows as usize)));
            batch = RecordBatch::try_new(Arc::clone(schema), columns).map_err(arrow_err)?;
        }
        let batch = with_block_columns(&batch, row, &layout.block_sizes).map_err(arrow_err)?;
        each(&batch, &origin, ts)?;
        row += rows;
    }
    Ok(())
}

/// A dictionary of strings: what the reader was asked to read a string group column as
/// (see `group_dictionary`), so its pages may be read directly.
fn is_string_dictionary(t: &DataType) -> bool {
    matches!(t, DataType::Dictionary(_, v) if matches!(**v, DataType::Utf8 | DataType::LargeUtf8))
}
