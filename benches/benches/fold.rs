//! Fold kernels on in-memory Arrow arrays, one core. Throughput is reports per second.

use arrow::array::UInt32Array;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ldpstream_benches::random_categories;
use ldpstream_engine::fold::fold_categories;
use ldpstream_engine::sketch::CountSketch;
use std::hint::black_box;

fn grr_counts(c: &mut Criterion) {
    let mut group = c.benchmark_group("fold_grr");
    for &(rows, d) in &[(8192usize, 16u32), (1 << 20, 16), (1 << 20, 1024)] {
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
    group.finish();
}

criterion_group!(benches, grr_counts);
criterion_main!(benches);
