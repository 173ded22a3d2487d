//! Output records as Arrow (and, in `parquet::record_schema`, Parquet): one row per record, a typed column per field of
//! the JSON record (groups and rejected-report counts as maps, estimates as lists, window
//! bounds as UTC timestamps), so the same results load into DuckDB, polars or Spark without
//! parsing JSON.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_json::ReaderBuilder;
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use ldpstream_engine::record::TestRecord;

use crate::error::ConnectorError;

fn map_of(value: DataType) -> DataType {
    DataType::Map(
        Arc::new(Field::new(
            "entries",
            DataType::Struct(Fields::from(vec![
                Field::new("key", DataType::Utf8, false),
                Field::new("value", value, true),
            ])),
            false,
        )),
        false,
    )
}

fn list_of_f64() -> DataType {
    DataType::List(Arc::new(Field::new("item", DataType::Float64, true)))
}

/// The Arrow schema of an output record; field names are the JSON record's.
pub fn record_schema() -> SchemaRef {
    let f = |name: &str, t: DataType, nullable: bool| Field::new(name, t, nullable);
    // An offset, not "UTC": arrow parses offset time zones without the chrono-tz tables;
    // Parquet stores either as a UTC-adjusted timestamp.
    let ts = DataType::Timestamp(TimeUnit::Millisecond, Some("+00:00".into()));
    Arc::new(Schema::new(vec![
        f("stream", DataType::Utf8, false),
        f("test", DataType::Utf8, false),
        f("method", DataType::Utf8, false),
        f("mechanism", DataType::Utf8, false),
        f("group", map_of(DataType::Utf8), true),
        f("window_start", ts.clone(), true),
        f("window_end", ts, true),
        f("n", DataType::UInt64, true),
        f("n1", DataType::UInt64, true),
        f("n2", DataType::UInt64, true),
        f("statistic", DataType::Float64, true),
        f("df", DataType::UInt32, true),
        f("p_value", DataType::Float64, true),
        f("q_value", DataType::Float64, true),
        f("reject", DataType::Boolean, false),
        f("alpha", DataType::Float64, false),
        f("estimate", list_of_f64(), false),
        f("std_error", list_of_f64(), false),
        f("estimate_norm_sub", list_of_f64(), false),
        f("estimate_ibu", list_of_f64(), false),
        f("ibu_iterations", DataType::UInt32, true),
        f("ibu_converged", DataType::Boolean, true),
        f("cs_lower", list_of_f64(), false),
        f("cs_upper", list_of_f64(), false),
        f("estimate_omitted", DataType::Utf8, true),
        f("estimate_plain", list_of_f64(), true),
        f("estimate_plain_bias_bound", DataType::Float64, true),
        f("mle", list_of_f64(), false),
        f("mle_converged", DataType::Boolean, false),
        f("mle_iterations", DataType::UInt32, false),
        f("mle_omitted", DataType::Utf8, true),
        f(
            "privacy",
            DataType::Struct(Fields::from(vec![
                Field::new("kind", DataType::Utf8, false),
                Field::new("epsilon", DataType::Float64, true),
                Field::new("rho", DataType::Float64, true),
                // The longitudinal kinds (lgrr, losue, lsue): ε∞ of the memo, the period.
                Field::new("epsilon_perm", DataType::Float64, true),
                Field::new("period_ms", DataType::UInt64, true),
            ])),
            false,
        ),
        f("calibration", DataType::Utf8, false),
        f("mc_p_value", DataType::Float64, true),
        f("critical_value", DataType::Float64, true),
        f("tv_distance", DataType::Float64, true),
        f("fit_iterations", DataType::UInt32, true),
        f("fit_converged", DataType::Boolean, true),
        f("refused", DataType::Utf8, true),
        f("epsilon_spent", DataType::Float64, true),
        f("budget_remaining", DataType::Float64, true),
        f("blocks", DataType::UInt64, true),
        f("block_size", DataType::UInt64, true),
        f("block", DataType::UInt64, true),
        f("rejected_reports", map_of(DataType::UInt64), false),
        f("inconclusive", DataType::Boolean, false),
        f("inconclusive_reason", DataType::Utf8, true),
        f("final", DataType::Boolean, false),
        f("late_reports", DataType::UInt64, false),
        f("e_value", DataType::Float64, true),
        f("anytime_p_value", DataType::Float64, true),
        f("validity", DataType::Utf8, true),
        f("anytime_q_value", DataType::Float64, true),
        f("asymptotic_p_value", DataType::Float64, true),
        f("calibration_reason", DataType::Utf8, true),
        f("look_end", DataType::Utf8, true),
    ]))
}

/// Records as one Arrow batch in [`record_schema`], through arrow's own serde decoder
/// (strict: a record field the schema lacks is an error, so the two cannot drift apart).
pub fn records_to_batch(records: &[TestRecord]) -> Result<RecordBatch, ConnectorError> {
    let arrow_err = |source| ConnectorError::Arrow {
        path: "output records".into(),
        source,
    };
    let schema = record_schema();
    let mut decoder = ReaderBuilder::new(schema.clone())
        .with_strict_mode(true)
        .with_batch_size(records.len().max(1))
        .build_decoder()
        .map_err(arrow_err)?;
    decoder.serialize(records).map_err(arrow_err)?;
    Ok(decoder
        .flush()
        .map_err(arrow_err)?
        .unwrap_or_else(|| RecordBatch::new_empty(schema)))
}

/// Rows per Arrow batch that ldpstream makes (the Parquet reader's batches, the Python
/// package's record tables): large enough to amortise per-batch work, small enough that a
/// batch of a few columns stays in L2.
pub const BATCH_ROWS: usize = 64 * 1024;
