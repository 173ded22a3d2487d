//! Fold kernels on in-memory Arrow arrays, one core. Throughput is reports per second.

use std::sync::Arc;

use arrow::array::{FixedSizeBinaryArray, Int8Array, UInt32Array};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ldpstream_benches::random_categories;
use ldpstream_engine::fold::{fold_bits, fold_categories, fold_signed};
use ldpstream_engine::sketch::{BitSketch, CountSketch, RejectReason, SignedSketch};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::hint::black_box;

const SIZES: [usize; 2] = [8192, 1 << 20];

fn grr_counts(c: &mut Criterion) {
    let mut group = c.benchmark_group("fold_grr");
    for rows in SIZES {
        for d in [16u32, 1024] {
            let array = UInt32Array::from(random_categories(rows, d, 1));
            group.throughput(Throughput::Elements(rows as u64));
            group.bench_with_input(
                BenchmarkId::new(format!("d{d}"), rows),
                &array,
                |b, array| {
                    let mut sketch = CountSketch::new(d as usize);
                    b.iter(|| fold_categories(black_box(array), &mut sketch));
                },
            );
        }
    }
    group.finish();
}

fn bitflip(c: &mut Criterion) {
    let mut group = c.benchmark_group("fold_bitflip_d64");
    let mut rng = StdRng::seed_from_u64(2);
    for rows in SIZES {
        let bytes: Vec<u8> = (0..rows * 8).map(|_| rng.random()).collect();
        let array = FixedSizeBinaryArray::try_new(8, bytes.into(), None).expect("8-byte reports");
        group.throughput(Throughput::Elements(rows as u64));
        group.bench_with_input(BenchmarkId::from_parameter(rows), &array, |b, array| {
            let mut sketch = BitSketch::new(64);
            b.iter(|| fold_bits(black_box(array), &mut sketch));
        });
    }
    group.finish();
}

fn hadamard(c: &mut Criterion) {
    let mut group = c.benchmark_group("fold_hadamard_k1024");
    let mut rng = StdRng::seed_from_u64(3);
    for rows in SIZES {
        let index = Arc::new(UInt32Array::from(random_categories(rows, 1024, 4)));
        let signs = Int8Array::from(
            (0..rows)
                .map(|_| if rng.random::<bool>() { 1i8 } else { -1 })
                .collect::<Vec<_>>(),
        );
        group.throughput(Throughput::Elements(rows as u64));
        group.bench_with_input(
            BenchmarkId::from_parameter(rows),
            &(index, signs),
            |b, (index, signs)| {
                let mut sketch = SignedSketch::new(1024);
                b.iter(|| {
                    fold_signed(
                        black_box(index),
                        black_box(signs),
                        &mut sketch,
                        RejectReason::RowOutOfRange,
                    )
                });
            },
        );
    }
    group.finish();
}

criterion_group!(benches, grr_counts, bitflip, hadamard);
criterion_main!(benches);
