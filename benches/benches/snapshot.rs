//! Snapshot to result: the test statistic alone, and the whole record (estimate, standard
//! errors, MLE, statistic, p-value) for LocalBitFlipGOF at d = 65,536; and LocalExpIND's
//! accelerated EM at ε = 0.25 (4×5 table, n = 10⁵), where the old parameter-change stop
//! ran to its 100,000-step cap.

use criterion::{criterion_group, criterion_main, Criterion};
use ldpstream_config::{Config, TestMethod};
use ldpstream_engine::hypothesis::{evaluate, Scope};
use ldpstream_engine::internals::{gof_statistic, local_exp_ind};
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::sketch::{BitSketch, Sketch};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::hint::black_box;

const D: u32 = 65_536;

fn bitflip_snapshot(c: &mut Criterion) {
    let config = Config::from_toml_str(
        &format!(
            "[[stream]]\nname = \"s\"\nsource = {{ kind = \"parquet\", paths = [\"x\"] }}\nmechanism = {{ kind = \"bitflip\", epsilon = 1.0, domain = {D} }}\n[[stream.test]]\nname = \"t\"\nkind = \"gof\"\nnull = \"uniform\"\n"
        ),
        "bench",
    )
    .expect("bench config is valid");
    let stream = &config.streams[0];
    let mechanism = Mechanism::from_config(&stream.mechanism).expect("valid mechanism");
    let Mechanism::BitFlip(m) = &mechanism else {
        unreachable!("configured as bitflip")
    };
    // Bit counts as 10⁷ uniform reports would give them.
    let n = 10_000_000u64;
    let mut rng = StdRng::seed_from_u64(1);
    let mean = m.bit_law(&[1.0 / f64::from(D)])[0] * n as f64;
    let counts: Vec<u64> = (0..D)
        .map(|_| (mean + rng.random_range(-3.0..3.0) * mean.sqrt()) as u64)
        .collect();
    let sketch = Sketch::Bits(BitSketch::from_counts(counts, n).expect("counts below n"));
    let p0 = vec![1.0 / f64::from(D); D as usize];

    let mut group = c.benchmark_group("snapshot_bitflip_d65536");
    group.bench_function("statistic", |b| {
        b.iter(|| {
            gof_statistic(
                &mechanism,
                TestMethod::LocalBitFlipGOF,
                black_box(&sketch),
                &p0,
            )
        })
    });
    group.bench_function("full_record", |b| {
        b.iter(|| {
            evaluate(
                stream,
                &stream.tests[0],
                &mechanism,
                Scope::default(),
                black_box(&sketch),
            )
        })
    });
    group.finish();
}

fn local_exp_ind_snapshot(c: &mut Criterion) {
    // A null table whose maximum sits on the boundary (the slow case for plain EM: about
    // 2·10⁶ steps), from crates/engine/src/tests/independence_two_sample.rs.
    let counts: [u64; 20] = [
        5038, 5111, 4996, 5093, 5069, 4900, 5053, 4997, 5035, 4994, 5052, 5119, 4998, 4901, 4979,
        4867, 4897, 5014, 4897, 4990,
    ];
    let mut group = c.benchmark_group("snapshot_local_exp_ind_eps0.25_4x5");
    group.bench_function("statistic", |b| {
        b.iter(|| local_exp_ind(0.25, 4, 5, black_box(&counts)))
    });
    group.finish();
}

criterion_group!(benches, bitflip_snapshot, local_exp_ind_snapshot);
criterion_main!(benches);
