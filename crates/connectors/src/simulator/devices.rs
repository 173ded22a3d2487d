//! `ldpstream simulate` for the longitudinal kinds (`lgrr`, `losue`, `lsue`): simulated
//! devices that keep a memo per value and report once per period through the real client
//! (`ldpstream_engine::mechanism::longitudinal::population`), written as the canonical
//! Parquet schema (the report column and `ts`), one row group per period.
//!
//! Output is a pure function of the seed: the devices are drawn and report in order from
//! one seeded generator.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_array::{ArrayRef, FixedSizeBinaryArray, TimestampMillisecondArray, UInt32Array};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use ldpstream_engine::mechanism::longitudinal::device::DeviceOptions;
use ldpstream_engine::mechanism::longitudinal::population::{DeviceReport, Population};
use ldpstream_engine::mechanism::{Longitudinal, Mechanism, Response};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::error::ConnectorError;

/// What to simulate.
#[derive(Debug, Clone)]
pub struct DeviceSimulation {
    pub mechanism: Longitudinal,
    pub options: DeviceOptions,
    /// Distribution of the devices' values (length = domain, sums to 1).
    pub p: Vec<f64>,
    pub devices: u32,
    pub periods: u32,
    /// The share of devices that redraw their value from `p` before each later period.
    pub change: f64,
    pub seed: u64,
    /// Event time (ms) in the first period; the periods follow it.
    pub start_ms: i64,
}

/// What was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevicesWritten {
    pub rows: u64,
    /// Devices that stopped reporting, their values past `max_memoized_values`.
    pub stopped: u64,
}

fn report_field(mechanism: &Longitudinal) -> Field {
    match mechanism.composed() {
        Mechanism::BitFlip(b) => Field::new(
            "report",
            DataType::FixedSizeBinary(b.report_bytes() as i32),
            false,
        ),
        _ => Field::new("report", DataType::UInt32, false),
    }
}

fn report_array(mechanism: &Longitudinal, reports: &[DeviceReport]) -> Result<ArrayRef, String> {
    match mechanism.composed() {
        Mechanism::BitFlip(b) => {
            let mut bytes = Vec::with_capacity(reports.len() * b.report_bytes());
            for r in reports {
                match &r.report {
                    Response::Bits(bits) => bytes.extend_from_slice(bits),
                    Response::Category(_) => return Err("a category from a unary kind".into()),
                }
            }
            FixedSizeBinaryArray::try_new(b.report_bytes() as i32, bytes.into(), None)
                .map(|a| Arc::new(a) as ArrayRef)
                .map_err(|e| e.to_string())
        }
        _ => reports
            .iter()
            .map(|r| match r.report {
                Response::Category(c) => Ok(c),
                Response::Bits(_) => Err("bits from lgrr".to_string()),
            })
            .collect::<Result<Vec<u32>, String>>()
            .map(|v| Arc::new(UInt32Array::from(v)) as ArrayRef),
    }
}

/// Writes the devices' reports to `out`, period by period.
pub fn simulate_devices_to_parquet(
    spec: &DeviceSimulation,
    out: &str,
) -> Result<DevicesWritten, ConnectorError> {
    let engine = |e: ldpstream_engine::mechanism::longitudinal::device::DeviceError| {
        ConnectorError::Distribution {
            what: "device simulation".into(),
            message: e.to_string(),
        }
    };
    let period = i64::try_from(spec.mechanism.period_ms()).unwrap_or(i64::MAX);
    let mut rng = StdRng::seed_from_u64(spec.seed);
    let mut population = Population::new(
        spec.mechanism.clone(),
        spec.options,
        &spec.p,
        spec.devices,
        spec.change,
        spec.start_ms.div_euclid(period),
        &mut rng,
    )
    .map_err(engine)?;
    let schema = Arc::new(Schema::new(vec![
        report_field(&spec.mechanism),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            false,
        ),
    ]));
    // A file's identity (`merge`'s and the ledger's) is its length and footer: device
    // reports have the same event times and often the same encoded sizes and statistics
    // whatever the seed, so two shares simulated with other seeds would be one input
    // without the simulation's own description in the footer.
    let description = format!(
        "{} devices={} periods={} change={} seed={} start_ms={}",
        spec.mechanism.kind(),
        spec.devices,
        spec.periods,
        spec.change,
        spec.seed,
        spec.start_ms
    );
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_key_value_metadata(Some(vec![KeyValue::new(
            "ldpstream.simulate".to_string(),
            description,
        )]))
        .build();
    let parquet_err = |source| ConnectorError::Parquet {
        path: out.to_string(),
        source,
    };
    let arrow_err = |message: String| ConnectorError::Corrupt {
        path: out.to_string(),
        message,
    };
    let mut rows = 0u64;
    crate::atomic_file::write_atomically(std::path::Path::new(out), |file| {
        let mut writer =
            ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(parquet_err)?;
        for _ in 0..spec.periods {
            let reports = population.next_period(&mut rng).map_err(engine)?;
            let ts: Vec<i64> = reports.iter().map(|r| r.ts_ms).collect();
            let columns = vec![
                report_array(&spec.mechanism, &reports).map_err(arrow_err)?,
                Arc::new(TimestampMillisecondArray::from(ts).with_timezone("UTC")) as ArrayRef,
            ];
            let batch = RecordBatch::try_new(schema.clone(), columns)
                .map_err(|e| arrow_err(e.to_string()))?;
            writer.write(&batch).map_err(parquet_err)?;
            // One row group per period.
            writer.flush().map_err(parquet_err)?;
            rows += reports.len() as u64;
        }
        writer.into_inner().map_err(parquet_err)
    })?;
    Ok(DevicesWritten {
        rows,
        stopped: population.stopped(),
    })
}
