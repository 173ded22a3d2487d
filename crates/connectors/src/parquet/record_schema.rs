//! Output records as Arrow and Parquet: one row per record, a typed column per field of
//! the JSON record (groups and rejected-report counts as maps, estimates as lists, window
//! bounds as UTC timestamps), so the same results load into DuckDB, polars or Spark without
//! parsing JSON.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use arrow::json::ReaderBuilder;
use arrow::record_batch::RecordBatch;
use ldpstream_engine::record::TestRecord;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

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

/// Writer properties for result files: small, so zstd and one row group per write.
pub(crate) fn writer_properties() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build()
}

/// Opens a Parquet writer of output records on `file`.
pub(crate) fn record_writer(file: File, path: &Path) -> Result<ArrowWriter<File>, ConnectorError> {
    ArrowWriter::try_new(file, record_schema(), Some(writer_properties())).map_err(|source| {
        ConnectorError::Parquet {
            path: path.display().to_string(),
            source,
        }
    })
}

/// Writes `records` to a Parquet file at `path`: to a temporary file beside it, fsynced,
/// then renamed, so a reader never sees a half-written file.
pub fn write_records_parquet(path: &Path, records: &[TestRecord]) -> Result<(), ConnectorError> {
    let batch = records_to_batch(records)?;
    crate::atomic_file::write_atomically(path, |file| {
        let mut writer = record_writer(file, path)?;
        let pq = |source| ConnectorError::Parquet {
            path: path.display().to_string(),
            source,
        };
        writer.write(&batch).map_err(pq)?;
        writer.into_inner().map_err(pq)
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use arrow::array::{
        Array, AsArray, BooleanArray, Float64Array, ListArray, MapArray, StringArray,
        TimestampMillisecondArray, UInt64Array,
    };
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    /// Every field set, so a field the schema lacks (or types differently) fails here.
    fn full() -> TestRecord {
        serde_json::from_value(serde_json::json!({
            "stream": "s", "test": "t", "method": "PrivateCollisions", "mechanism": "raw",
            "group": {"country": "fr", "os": null},
            "window_start": "2026-01-01T00:05:00Z", "window_end": "2026-01-01T00:10:00Z",
            "n": 1000, "n1": 400, "n2": 600, "statistic": 12.5, "df": 3, "p_value": 0.0058,
            "q_value": 0.0116, "reject": true, "alpha": 0.05,
            "estimate": [0.25, 0.75], "std_error": [0.01, 0.02],
            "estimate_norm_sub": [0.2, 0.8], "estimate_ibu": [0.1, 0.9],
            "ibu_iterations": 12, "ibu_converged": true, "mle": [0.3, 0.7],
            "estimate_plain": [0.3, 0.7], "estimate_plain_bias_bound": 0.04,
            "mle_converged": true, "mle_iterations": 7,
            "privacy": {"kind": "raw", "epsilon": 1.0, "rho": 0.5},
            "calibration": "monte_carlo", "mc_p_value": 0.006, "critical_value": 7.8,
            "tv_distance": 0.1, "fit_iterations": 4, "fit_converged": true,
            "refused": "privacy budget exhausted", "epsilon_spent": 0.5,
            "budget_remaining": 1.5, "blocks": 10, "block_size": 100, "block": 3,
            "rejected_reports": {"out_of_domain": 2, "null": 1},
            "inconclusive": false, "inconclusive_reason": "none", "final": true,
            "late_reports": 9, "e_value": 42.5, "anytime_p_value": 0.0235, "asymptotic_p_value": 0.0049,
            "calibration_reason": "few", "look_end": "2026-01-01T00:07:00Z"
        }))
        .unwrap()
    }

    /// The nulls a plain global-window GOF record has.
    pub(crate) fn sparse() -> TestRecord {
        serde_json::from_value(serde_json::json!({
            "stream": "s", "test": "t", "method": "LocalExpGOF", "mechanism": "grr",
            "group": null, "window_start": null, "window_end": null, "n": 5,
            "n1": null, "n2": null, "statistic": null, "df": null, "p_value": null,
            "q_value": null, "reject": false, "alpha": 0.05, "estimate": [], "std_error": [],
            "mle": [], "mle_converged": false, "mle_iterations": 0,
            "privacy": {"kind": "grr", "epsilon": 1.0}, "calibration": "asymptotic",
            "mc_p_value": null, "critical_value": null, "tv_distance": null,
            "fit_iterations": null, "fit_converged": null, "refused": null,
            "epsilon_spent": null, "budget_remaining": null, "blocks": null,
            "block_size": null, "block": null, "rejected_reports": {},
            "inconclusive": true, "inconclusive_reason": "n = 5 < 10", "final": false,
            "late_reports": 0
        }))
        .unwrap()
    }

    #[test]
    fn records_round_trip_through_parquet() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.parquet");
        write_records_parquet(&path, &[full(), sparse()]).unwrap();
        // Written atomically: nothing else is left in the directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let file = File::open(&path).unwrap();
        let mut reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap();
        let b = reader.next().unwrap().unwrap();
        assert_eq!(b.num_rows(), 2);
        let col = |name: &str| b.column_by_name(name).unwrap().clone();
        let method = col("method");
        let method = method.as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(method.value(0), "PrivateCollisions");
        let n = col("n");
        let n = n.as_any().downcast_ref::<UInt64Array>().unwrap();
        assert_eq!((n.value(0), n.value(1)), (1000, 5));
        let p = col("p_value");
        let p = p.as_any().downcast_ref::<Float64Array>().unwrap();
        assert_eq!(p.value(0), 0.0058);
        assert!(p.is_null(1));
        let start = col("window_start");
        let start = start
            .as_any()
            .downcast_ref::<TimestampMillisecondArray>()
            .unwrap();
        // 2026-01-01T00:05:00Z
        assert_eq!(start.value(0), 1_767_225_900_000);
        assert!(start.is_null(1));
        let est = col("estimate");
        let est = est.as_any().downcast_ref::<ListArray>().unwrap();
        assert_eq!(
            est.value(0)
                .as_primitive::<arrow::datatypes::Float64Type>()
                .values()
                .to_vec(),
            vec![0.25, 0.75]
        );
        assert_eq!(est.value(1).len(), 0);
        let norm_sub = col("estimate_norm_sub");
        let norm_sub = norm_sub.as_any().downcast_ref::<ListArray>().unwrap();
        assert_eq!(
            norm_sub
                .value(0)
                .as_primitive::<arrow::datatypes::Float64Type>()
                .values()
                .to_vec(),
            vec![0.2, 0.8]
        );
        let ibu = col("estimate_ibu");
        let ibu = ibu.as_any().downcast_ref::<ListArray>().unwrap();
        assert_eq!(
            ibu.value(0)
                .as_primitive::<arrow::datatypes::Float64Type>()
                .values()
                .to_vec(),
            vec![0.1, 0.9]
        );
        assert_eq!(ibu.value(1).len(), 0);
        // OLH's plain estimate: a list where given, null where a record has none.
        let plain = col("estimate_plain");
        let plain = plain.as_any().downcast_ref::<ListArray>().unwrap();
        assert_eq!(plain.value(0).len(), 2);
        assert!(plain.is_null(1));
        let bound = col("estimate_plain_bias_bound");
        let bound = bound.as_primitive::<arrow::datatypes::Float64Type>();
        assert_eq!(bound.value(0), 0.04);
        assert!(bound.is_null(1));
        let iterations = col("ibu_iterations");
        let iterations = iterations.as_primitive::<arrow::datatypes::UInt32Type>();
        assert_eq!(iterations.value(0), 12);
        assert!(iterations.is_null(1));
        let group = col("group");
        let group = group.as_any().downcast_ref::<MapArray>().unwrap();
        let entries = group.value(0);
        let keys = entries.column(0).as_string::<i32>();
        let values = entries.column(1).as_string::<i32>();
        assert_eq!((keys.value(0), values.value(0)), ("country", "fr"));
        assert_eq!(keys.value(1), "os");
        assert!(values.is_null(1));
        assert!(group.is_null(1));
        let fin = col("final");
        let fin = fin.as_any().downcast_ref::<BooleanArray>().unwrap();
        assert!(fin.value(0) && !fin.value(1));
        let privacy = col("privacy");
        let privacy = privacy.as_struct();
        let rho = privacy.column_by_name("rho").unwrap();
        assert_eq!(
            rho.as_primitive::<arrow::datatypes::Float64Type>().value(0),
            0.5
        );
        assert!(rho.is_null(1));
        let rejected = col("rejected_reports");
        let rejected = rejected.as_any().downcast_ref::<MapArray>().unwrap();
        assert_eq!(rejected.value(0).len(), 2);
        assert_eq!(rejected.value(1).len(), 0);
    }

    #[test]
    fn no_records_write_an_empty_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.parquet");
        write_records_parquet(&path, &[]).unwrap();
        let file = File::open(&path).unwrap();
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
        assert_eq!(builder.metadata().file_metadata().num_rows(), 0);
        assert_eq!(
            builder.schema().fields().len(),
            record_schema().fields().len()
        );
    }
}
