//! The report simulator: draws true categories from a known distribution, privatizes them
//! with the real client-side randomizer and writes the canonical Parquet schema.
//!
//! Output is a pure function of the seed: rows are generated in fixed-size chunks, chunk k
//! seeded from (seed, k), so the file is identical whatever the thread count.

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_array::{StringArray, TimestampMillisecondArray};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use ldpstream_engine::mechanism::{privatize_batch, Mechanism};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::weighted::WeightedAliasIndex;
use rand_distr::Distribution;
use rayon::prelude::*;

use crate::error::ConnectorError;

/// Rows generated per seeded chunk (and written per Arrow batch).
pub const CHUNK_ROWS: u64 = 1 << 20;
/// Rows per Parquet row group: the unit of parallel reading.
pub const ROW_GROUP_ROWS: usize = 1 << 20;

/// What to simulate.
#[derive(Debug, Clone)]
pub struct SimulateSpec {
    pub mechanism: Mechanism,
    /// Distribution of the true categories (length = domain, sums to 1).
    pub p: Vec<f64>,
    /// `(label, rows)` per group, in file order; a single unlabeled group when `None`.
    pub groups: Option<Vec<(String, u64)>>,
    pub n: u64,
    pub seed: u64,
    /// Event time of the first report (ms since the epoch) and reports per second.
    pub ts: Option<(i64, f64)>,
}

impl SimulateSpec {
    fn total_rows(&self) -> u64 {
        match &self.groups {
            Some(g) => g.iter().map(|(_, n)| n).sum(),
            None => self.n,
        }
    }

    fn schema(&self) -> Arc<Schema> {
        let mut fields = report_fields(&self.mechanism);
        if self.groups.is_some() {
            fields.push(Field::new("group", DataType::Utf8, false));
        }
        if self.ts.is_some() {
            fields.push(Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
                false,
            ));
        }
        Arc::new(Schema::new(fields))
    }
}

/// The report columns of `mechanism` in the canonical schema's order.
fn report_fields(mechanism: &Mechanism) -> Vec<Field> {
    let d = mechanism.domain();
    match mechanism {
        Mechanism::Longitudinal(l) => report_fields(l.composed()),
        Mechanism::Grr(_) | Mechanism::Channel(_) | Mechanism::Raw { .. } => {
            vec![Field::new("report", DataType::UInt32, false)]
        }
        Mechanism::BitFlip(m) => vec![Field::new(
            "report",
            DataType::FixedSizeBinary(m.report_bytes() as i32),
            false,
        )],
        Mechanism::Subset(_) => vec![Field::new(
            "report",
            DataType::List(Arc::new(Field::new("item", DataType::UInt32, false))),
            false,
        )],
        Mechanism::Noise(_) => vec![Field::new(
            "report",
            DataType::FixedSizeList(
                Arc::new(Field::new("item", DataType::Float64, false)),
                d as i32,
            ),
            false,
        )],
        Mechanism::Hadamard(_) => vec![
            Field::new("row", DataType::UInt32, false),
            Field::new("report", DataType::Int8, false),
        ],
        Mechanism::Cohort(_) => vec![
            Field::new("cohort", DataType::UInt32, false),
            Field::new("report", DataType::Int8, false),
        ],
        Mechanism::Olh(_) => vec![
            Field::new("seed", DataType::UInt32, false),
            Field::new("report", DataType::UInt32, false),
        ],
    }
}

/// SplitMix64: decorrelates the per-chunk seeds derived from one user seed.
fn chunk_seed(seed: u64, chunk: u64) -> u64 {
    let mut z = seed ^ chunk.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Writes the simulated reports to `out`; returns the number of rows written.
pub fn simulate_to_parquet(spec: &SimulateSpec, out: &str) -> Result<u64, ConnectorError> {
    if spec.p.len() != spec.mechanism.domain() {
        return Err(ConnectorError::Distribution {
            what: "--p".into(),
            message: format!(
                "has {} entries but the domain is {}",
                spec.p.len(),
                spec.mechanism.domain()
            ),
        });
    }
    let sampler = super::sampler(spec.p.clone(), &format!("distribution {:?}", spec.p))?;
    let total = spec.total_rows();
    let schema = spec.schema();
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .build();
    let parquet_err = |source| ConnectorError::Parquet {
        path: out.to_string(),
        source,
    };
    crate::atomic_file::write_atomically(std::path::Path::new(out), |file| {
        let mut writer =
            ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(parquet_err)?;
        let chunks = total.div_ceil(CHUNK_ROWS);
        let wave = rayon::current_num_threads().max(1) as u64;
        let mut start = 0;
        while start < chunks {
            let end = (start + wave).min(chunks);
            let batches: Vec<Result<RecordBatch, ConnectorError>> = (start..end)
                .into_par_iter()
                .map(|k| chunk_batch(spec, &sampler, schema.clone(), k, total))
                .collect();
            for batch in batches {
                writer.write(&batch?).map_err(parquet_err)?;
            }
            start = end;
        }
        writer.into_inner().map_err(parquet_err)
    })?;
    Ok(total)
}

fn chunk_batch(
    spec: &SimulateSpec,
    sampler: &WeightedAliasIndex<f64>,
    schema: Arc<Schema>,
    chunk: u64,
    total: u64,
) -> Result<RecordBatch, ConnectorError> {
    let first = chunk * CHUNK_ROWS;
    let last = (first + CHUNK_ROWS).min(total);
    let mut rng = StdRng::seed_from_u64(chunk_seed(spec.seed, chunk));
    let truth: Vec<u32> = (first..last)
        .map(|_| sampler.sample(&mut rng) as u32)
        .collect();
    let mut columns = privatize_batch(&spec.mechanism, &truth, &mut rng)?;
    if let Some(groups) = &spec.groups {
        let mut labels = Vec::with_capacity((last - first) as usize);
        let mut group_end = 0u64;
        let mut it = groups.iter();
        let mut current = it.next();
        for row in first..last {
            while let Some((_, size)) = current {
                if row < group_end + size {
                    break;
                }
                group_end += size;
                current = it.next();
            }
            labels.push(current.map_or("", |(label, _)| label.as_str()));
        }
        columns.push(Arc::new(StringArray::from(labels)));
    }
    if let Some((start_ms, rate)) = spec.ts {
        let ts: Vec<i64> = (first..last)
            .map(|i| start_ms + (i as f64 * 1000.0 / rate).floor() as i64)
            .collect();
        columns.push(Arc::new(
            TimestampMillisecondArray::from(ts).with_timezone("UTC"),
        ));
    }
    RecordBatch::try_new(schema, columns).map_err(|source| ConnectorError::Arrow {
        path: "simulated batch".into(),
        source,
    })
}
