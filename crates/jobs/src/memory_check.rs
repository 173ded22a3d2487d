//! In-memory Arrow data checked as the file readers check theirs, before the fold reads a
//! row. Arrow handed over through the C data interface is imported without validation
//! (arrow-rs's `from_ffi` skips it), so a producer may hand over offsets past its buffers or
//! string columns holding bytes that are not UTF-8 (pyarrow's `cast(..., safe=False)` makes
//! them). Folded unchecked, such a group value would become a Rust `String` that is not
//! UTF-8, be written into the privacy ledger byte for byte, and make the ledger unreadable
//! for every stream; bad offsets would read out of bounds. Parquet, sketch files and Kafka
//! messages are validated by their readers; this is the same check for the Python package.

use arrow_array::RecordBatch;
use ldpstream_engine::stream::ReportLayout;

use crate::error::Error;

/// Fully validates (buffer sizes, offsets, dictionary keys, UTF-8) every column of
/// `batches` that the stream reads: the layout's columns and the event time. `origin` names
/// the data in errors; the first bad column is named with arrow's reason.
pub fn validate_columns(
    batches: &[RecordBatch],
    layout: &ReportLayout,
    origin: &str,
) -> Result<(), Error> {
    let names: Vec<&String> = layout
        .columns()
        .chain(std::iter::once(&layout.ts))
        .collect();
    for batch in batches {
        for name in &names {
            let Some(column) = batch.column_by_name(name) else {
                continue;
            };
            column
                .to_data()
                .validate_full()
                .map_err(|e| Error::InvalidColumn {
                    origin: origin.to_string(),
                    column: name.to_string(),
                    message: e.to_string(),
                })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{StringArray, UInt32Array};
    use arrow_buffer::Buffer;
    use arrow_data::ArrayData;
    use arrow_schema::{DataType, Field, Schema};
    use ldpstream_config::Config;
    use ldpstream_engine::mechanism::Mechanism;

    use super::*;

    fn layout() -> ReportLayout {
        let config = Config::from_toml_str(
            "[[stream]]\nname = \"s\"\nsource = { kind = \"parquet\", paths = [\"x\"] }\n\
             mechanism = { kind = \"grr\", epsilon = 1.0, domain = 4 }\n\
             columns = { group_by = [\"g\"] }\n",
            "t",
        )
        .unwrap();
        let stream = &config.streams[0];
        ReportLayout::of(stream, &Mechanism::from_config(&stream.mechanism).unwrap())
    }

    /// Issue 43 (ledger_utf8): a string column of bytes that are not UTF-8, as
    /// `cast(..., safe=False)` makes, is refused naming the column.
    #[test]
    fn a_group_column_that_is_not_utf8_is_named() {
        let data = unsafe {
            // SAFETY (of the test): the buffers are consistent; only the UTF-8 is wrong,
            // which is exactly what validate_full must find.
            ArrayData::new_unchecked(
                DataType::Utf8,
                2,
                None,
                None,
                0,
                vec![
                    Buffer::from_slice_ref([0i32, 2, 4]),
                    Buffer::from_slice_ref([0xffu8, 0xfe, b'o', b'k']),
                ],
                vec![],
            )
        };
        let bad = StringArray::from(data);
        let schema = Arc::new(Schema::new(vec![
            Field::new("report", DataType::UInt32, false),
            Field::new("g", DataType::Utf8, false),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![Arc::new(UInt32Array::from(vec![0, 1])), Arc::new(bad)],
        )
        .unwrap();
        let e = validate_columns(&[batch], &layout(), "in-memory data")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("column \"g\"") && e.contains("in-memory data") && e.contains("UTF8"),
            "{e}"
        );
    }
}
