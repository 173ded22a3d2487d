//! OLH's exactly unbiased pool estimate (issue 44, docs/STATISTICS.md §1.8): the one-time
//! cost of the pool's factor (C from bucket pairs, Cholesky, W = C⁻¹, the exact variance
//! table) and the per-snapshot cost of the estimate and its standard errors from support
//! counts, at the default pool (S = 1024, pool seed 0) and ε = 2 (g = 8). d = 16, 256 and
//! 1,024; d = 4,096 (seconds per factor) only with LDPSTREAM_BENCH_OLH_4096=1. One core.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use ldpstream_engine::mechanism::{Olh, PoolSolver};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use std::time::Duration;

fn domains() -> Vec<u32> {
    let mut d = vec![16, 256, 1024];
    if std::env::var_os("LDPSTREAM_BENCH_OLH_4096").is_some() {
        d.push(4096);
    }
    d
}

fn pool(d: u32) -> Olh {
    Olh::new(2.0, d, 8, 1024, 0).expect("a valid OLH pool")
}

fn factor(c: &mut Criterion) {
    let mut group = c.benchmark_group("olh_factor");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(5));
    for d in domains() {
        let olh = pool(d);
        group.bench_with_input(BenchmarkId::from_parameter(d), &olh, |b, olh| {
            b.iter(|| PoolSolver::new(black_box(olh)).expect("the pool identifies d"));
        });
    }
    group.finish();
}

fn snapshot(c: &mut Criterion) {
    let mut group = c.benchmark_group("olh_pool_estimate");
    for d in domains() {
        let olh = pool(d);
        let solver = PoolSolver::new(&olh).expect("the pool identifies d");
        // Support counts of 10⁶ reports, near their uniform-null mean n/g.
        let n = 1_000_000u64;
        let mut rng = StdRng::seed_from_u64(1);
        let supports: Vec<u64> = (0..d).map(|_| n / 8 + rng.random_range(0..700)).collect();
        group.bench_with_input(BenchmarkId::from_parameter(d), &supports, |b, s| {
            b.iter(|| solver.estimate(&olh, black_box(s), n));
        });
    }
    group.finish();
}

criterion_group!(benches, factor, snapshot);
criterion_main!(benches);
