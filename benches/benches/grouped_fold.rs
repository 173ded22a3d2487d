//! The grouped fold of in-memory batches (issue 45), one core: GenRR d = 16 reports with a
//! string group column of 1,000 or 10⁵ Zipf-popular groups in random order, given as plain
//! strings (what a Python table or a Kafka message batch holds) and as a dictionary (what
//! the Parquet reader hands over). Throughput is reports per second; each iteration folds
//! 2²⁰ reports in 16 batches of 2¹⁶ into a fresh fold, as a row group of a `batch` job.

use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{ArrayRef, DictionaryArray, Int32Array, RecordBatch, StringArray, UInt32Array};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ldpstream_benches::random_categories;
use ldpstream_config::Config;
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::stream::{GroupFold, ReportLayout};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::hint::black_box;

const BATCH: usize = 1 << 16;
const BATCHES: usize = 16;

fn layout() -> ReportLayout {
    let toml = "[[stream]]\nname = \"s\"\nsource = { kind = \"parquet\", paths = [\"x\"] }\n\
                mechanism = { kind = \"grr\", epsilon = 1.0, domain = 16 }\n\
                columns = { group_by = [\"grp\"] }\nmax_groups = 200000\n";
    let stream = Config::from_toml_str(toml, "bench")
        .unwrap()
        .streams
        .remove(0);
    let mechanism = Mechanism::from_config(&stream.mechanism).unwrap();
    ReportLayout::of(&stream, &mechanism)
}

/// Zipf(1)-popular group indices below `groups`, by inversion of the harmonic weights.
fn zipf_groups(rows: usize, groups: usize, seed: u64) -> Vec<usize> {
    let mut cdf: Vec<f64> = (1..=groups).map(|k| 1.0 / k as f64).collect();
    for k in 1..groups {
        cdf[k] += cdf[k - 1];
    }
    let total = cdf[groups - 1];
    let mut rng = StdRng::seed_from_u64(seed);
    (0..rows)
        .map(|_| {
            let u = rng.random::<f64>() * total;
            cdf.partition_point(|&c| c < u).min(groups - 1)
        })
        .collect()
}

/// The batches of one iteration: plain strings, or a dictionary over the group names
/// shared by every batch (as a Parquet column chunk's batches share theirs).
fn batches(groups: usize, dictionary: bool) -> Vec<RecordBatch> {
    let names: Vec<String> = (0..groups).map(|g| format!("seg-{g:06}")).collect();
    let values: ArrayRef = Arc::new(StringArray::from(names.clone()));
    (0..BATCHES)
        .map(|b| {
            let report: ArrayRef =
                Arc::new(UInt32Array::from(random_categories(BATCH, 16, b as u64)));
            let rows = zipf_groups(BATCH, groups, 1000 + b as u64);
            let grp: ArrayRef = if dictionary {
                let keys = Int32Array::from_iter_values(rows.iter().map(|&g| g as i32));
                Arc::new(DictionaryArray::<Int32Type>::try_new(keys, Arc::clone(&values)).unwrap())
            } else {
                Arc::new(StringArray::from_iter_values(
                    rows.iter().map(|&g| names[g].as_str()),
                ))
            };
            RecordBatch::try_from_iter([("report", report), ("grp", grp)]).unwrap()
        })
        .collect()
}

fn grouped(c: &mut Criterion) {
    let layout = layout();
    let mut group = c.benchmark_group("fold_grouped_grr_d16");
    group.sample_size(20);
    group.throughput(Throughput::Elements((BATCH * BATCHES) as u64));
    for groups in [1_000usize, 100_000] {
        for (label, dictionary) in [("strings", false), ("dictionary", true)] {
            let input = batches(groups, dictionary);
            group.bench_with_input(
                BenchmarkId::new(label, groups),
                &input,
                |b, input: &Vec<RecordBatch>| {
                    b.iter(|| {
                        let mut fold = GroupFold::new(&layout);
                        for batch in input {
                            fold.fold_batch(black_box(batch), "bench", None, &|_| None)
                                .unwrap();
                        }
                        fold
                    });
                },
            );
        }
    }
    group.finish();
}

criterion_group!(benches, grouped);
criterion_main!(benches);
