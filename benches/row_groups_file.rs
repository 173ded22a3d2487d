//! Writes a Parquet file of GenRR reports (d = 16) with a `group` column, split into a
//! given number of row groups, for `benches/row_groups.sh`.
//! Usage: row-groups-file OUT ROWS ROW_GROUPS

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_array::{Array, ArrayRef, StringArray, UInt32Array};
use arrow_schema::{Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, out, rows, groups] = args.as_slice() else {
        return Err("usage: row-groups-file OUT ROWS ROW_GROUPS".into());
    };
    let rows: u32 = rows.parse()?;
    let groups: u32 = groups.parse()?;
    let per_group = rows.div_ceil(groups.max(1)) as usize;
    // A fixed pseudo-random sequence: the bench compares files, not seeds.
    let report =
        UInt32Array::from_iter_values((0..rows).map(|i| (i.wrapping_mul(2_654_435_761) >> 7) % 16));
    let group = StringArray::from_iter_values((0..rows).map(|i| ["a", "b", "c"][(i % 3) as usize]));
    let schema = Arc::new(Schema::new(vec![
        Field::new("report", report.data_type().clone(), false),
        Field::new("group", group.data_type().clone(), false),
    ]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(report) as ArrayRef, Arc::new(group) as ArrayRef],
    )?;
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(per_group))
        .build();
    let mut w = ArrowWriter::try_new(std::fs::File::create(out)?, schema, Some(props))?;
    w.write(&batch)?;
    w.close()?;
    Ok(())
}
