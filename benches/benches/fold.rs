//! Fold kernels on in-memory Arrow arrays, one core. Throughput is reports per second.

use std::sync::Arc;

use arrow_array::{FixedSizeBinaryArray, Int8Array, UInt32Array};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ldpstream_benches::random_categories;
use ldpstream_engine::kernels::popcount::Kernel;
use ldpstream_engine::kernels::{fold_bits_with, fold_categories, fold_signed, fold_signed_scalar};
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

/// The bit-flip fold per kernel (the scalar one is the previous implementation, kept as the
/// fallback), at d = 64 and d = 8, on a batch that stays in cache (8192 reports) and on
/// one that does not (2²⁰).
fn bitflip(c: &mut Criterion) {
    for d in [64usize, 8] {
        let mut group = c.benchmark_group(format!("fold_bitflip_d{d}"));
        let width = d / 8;
        let mut rng = StdRng::seed_from_u64(2);
        for rows in [8192, 1 << 16, 1 << 20] {
            let bytes: Vec<u8> = (0..rows * width).map(|_| rng.random()).collect();
            let array = FixedSizeBinaryArray::try_new(width as i32, bytes.into(), None)
                .expect("packed reports");
            group.throughput(Throughput::Elements(rows as u64));
            for kernel in Kernel::available() {
                group.bench_with_input(
                    BenchmarkId::new(format!("{kernel:?}").to_lowercase(), rows),
                    &array,
                    |b, array| {
                        let mut sketch = BitSketch::new(d);
                        b.iter(|| fold_bits_with(kernel, black_box(array), &mut sketch));
                    },
                );
            }
        }
        group.finish();
    }
}

/// The Hadamard fold: the laned kernel (`fold_signed`) and the previous one
/// (`fold_signed_scalar`) side by side.
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
        type Fold = fn(&UInt32Array, &Int8Array, &mut SignedSketch, RejectReason);
        let kernels: [(&str, Fold); 2] = [("laned", fold_signed), ("scalar", fold_signed_scalar)];
        for (name, fold) in kernels {
            group.bench_with_input(
                BenchmarkId::new(name, rows),
                &(&index, &signs),
                |b, (index, signs)| {
                    let mut sketch = SignedSketch::new(1024);
                    b.iter(|| {
                        fold(
                            black_box(index),
                            black_box(signs),
                            &mut sketch,
                            RejectReason::RowOutOfRange,
                        )
                    });
                },
            );
        }
    }
    group.finish();
}

criterion_group!(benches, grr_counts, bitflip, hadamard);
criterion_main!(benches);
