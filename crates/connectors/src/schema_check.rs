//! An Arrow schema checked against a stream's layout: the report, index, group and
//! event-time columns, each named with what it should be when it is missing or of another
//! type. Parquet footers and in-memory Arrow data (the Python package) are checked alike.

use arrow_schema::{DataType, Schema};
use ldpstream_engine::kernels::report_schema;
use ldpstream_engine::stream::{is_event_time, ReportLayout};

use crate::error::ConnectorError;

fn is_string(t: &DataType) -> bool {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        // Utf8View values: polars' Categorical and Enum columns.
        DataType::Dictionary(_, v) => {
            matches!(
                **v,
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            )
        }
        _ => false,
    }
}

fn check_column(
    origin: &str,
    schema: &Schema,
    column: &str,
    expected: &str,
    accepts: impl Fn(&DataType) -> bool,
) -> Result<(), ConnectorError> {
    let field = schema
        .field_with_name(column)
        .map_err(|_| ConnectorError::MissingColumn {
            path: origin.to_string(),
            column: column.to_string(),
            expected: expected.to_string(),
            available: schema
                .fields()
                .iter()
                .map(|f| format!("{} ({})", f.name(), f.data_type()))
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    if accepts(field.data_type()) {
        Ok(())
    } else {
        Err(ConnectorError::WrongType {
            path: origin.to_string(),
            column: column.to_string(),
            expected: expected.to_string(),
            found: field.data_type().to_string(),
        })
    }
}

/// Checks the report, index, group and event-time columns of `schema` against `layout`
/// (`origin` names the data in errors); returns whether it has the event-time column.
/// Parquet files and in-memory Arrow data (the Python package) are checked alike.
pub fn check_schema(
    origin: &str,
    schema: &Schema,
    layout: &ReportLayout,
) -> Result<bool, ConnectorError> {
    let expected = report_schema(&layout.mechanism);
    let d = layout.mechanism.domain();
    check_column(origin, schema, &layout.report, &expected.report_type, |t| {
        (expected.accepts_report)(t, d)
    })?;
    if let Some(index) = &layout.index {
        check_column(origin, schema, index, "UInt32", |t| *t == DataType::UInt32)?;
    }
    for g in &layout.group_by {
        check_column(origin, schema, g, "Utf8", is_string)?;
    }
    let has_ts = schema.field_with_name(&layout.ts).is_ok();
    if has_ts {
        check_column(
            origin,
            schema,
            &layout.ts,
            "Timestamp (ms, UTC) or Int64 milliseconds",
            is_event_time,
        )?;
    }
    Ok(has_ts)
}
