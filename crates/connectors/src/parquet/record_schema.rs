//! Output records as Parquet files: the Arrow batch of [`crate::records`], zstd, one row
//! group per write, written atomically.

use std::fs::File;
use std::path::Path;

use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use ldpstream_engine::record::TestRecord;

use crate::error::ConnectorError;
pub use crate::records::{record_schema, records_to_batch};

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

/// The bytes of a Parquet file of `records` (`path` names it in errors), as
/// [`write_records_parquet`] writes it: rendered before anything is published.
pub fn records_parquet_bytes(
    path: &Path,
    records: &[TestRecord],
) -> Result<Vec<u8>, ConnectorError> {
    let batch = records_to_batch(records)?;
    let pq = |source| ConnectorError::Parquet {
        path: path.display().to_string(),
        source,
    };
    let mut writer =
        ArrowWriter::try_new(Vec::new(), record_schema(), Some(writer_properties())).map_err(pq)?;
    writer.write(&batch).map_err(pq)?;
    writer.into_inner().map_err(pq)
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
    use arrow_array::cast::AsArray;
    use arrow_array::{
        Array, BooleanArray, Float64Array, ListArray, MapArray, StringArray,
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
                .as_primitive::<arrow_array::types::Float64Type>()
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
                .as_primitive::<arrow_array::types::Float64Type>()
                .values()
                .to_vec(),
            vec![0.2, 0.8]
        );
        let ibu = col("estimate_ibu");
        let ibu = ibu.as_any().downcast_ref::<ListArray>().unwrap();
        assert_eq!(
            ibu.value(0)
                .as_primitive::<arrow_array::types::Float64Type>()
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
        let bound = bound.as_primitive::<arrow_array::types::Float64Type>();
        assert_eq!(bound.value(0), 0.04);
        assert!(bound.is_null(1));
        let iterations = col("ibu_iterations");
        let iterations = iterations.as_primitive::<arrow_array::types::UInt32Type>();
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
            rho.as_primitive::<arrow_array::types::Float64Type>()
                .value(0),
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
