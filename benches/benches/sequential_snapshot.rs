//! The cost of a sequential (anytime-valid) snapshot against the fixed-n one it replaces
//! (issue 14's target: within 2×): one record of a bit-flip stream at d = 65,536, and one
//! `serve` snapshot round of 1,000 groups of d = 64 bit-flip sketches, each evaluated with
//! the same test as `sequential = false` and as `sequential = true`.

use criterion::{criterion_group, criterion_main, Criterion};
use ldpstream_config::Config;
use ldpstream_engine::hypothesis::{evaluate, Scope};
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::sketch::{BitSketch, Sketch};
use ldpstream_engine::stream::{evaluate_snapshot, take_due, Private, Sequential};
use ldpstream_engine::window::{Grouped, PaneStore};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::hint::black_box;

fn config(d: u32, grouped: bool, sequential: bool) -> Config {
    let group_by = if grouped {
        "columns = { group_by = [\"g\"] }\n"
    } else {
        ""
    };
    let window = if grouped {
        "window = { kind = \"tumbling\", size = \"2m\" }\n"
    } else {
        ""
    };
    Config::from_toml_str(
        &format!(
            "[[stream]]\nname = \"s\"\nsource = {{ kind = \"parquet\", paths = [\"x\"] }}\nmechanism = {{ kind = \"bitflip\", epsilon = 1.0, domain = {d} }}\n{group_by}[[stream.test]]\nname = \"t\"\nkind = \"gof\"\nnull = \"uniform\"\nsequential = {sequential}\n{window}"
        ),
        "bench",
    )
    .expect("bench config is valid")
}

/// Bit counts as `n` uniform reports would give them.
fn bit_sketch(m: &Mechanism, d: u32, n: u64, rng: &mut StdRng) -> Sketch {
    let Mechanism::BitFlip(bf) = m else {
        unreachable!("configured as bitflip")
    };
    let mean = bf.bit_law(&[1.0 / f64::from(d)])[0] * n as f64;
    let counts: Vec<u64> = (0..d)
        .map(|_| (mean + rng.random_range(-3.0..3.0) * mean.sqrt()) as u64)
        .collect();
    Sketch::Bits(BitSketch::from_counts(counts, n).expect("counts below n"))
}

fn one_record_d65536(c: &mut Criterion) {
    const D: u32 = 65_536;
    let mut rng = StdRng::seed_from_u64(1);
    let mut group = c.benchmark_group("record_bitflip_d65536");
    for sequential in [false, true] {
        let config = config(D, false, sequential);
        let stream = &config.streams[0];
        let mechanism = Mechanism::from_config(&stream.mechanism).expect("valid mechanism");
        let sketch = bit_sketch(&mechanism, D, 10_000_000, &mut rng);
        let name = if sequential { "sequential" } else { "fixed_n" };
        group.bench_function(name, |b| {
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
    }
    group.finish();
}

fn round_1000_groups(c: &mut Criterion) {
    const D: u32 = 64;
    const GROUPS: usize = 1_000;
    let mut group = c.benchmark_group("round_bitflip_1000_groups_d64");
    for sequential in [false, true] {
        let config = config(D, true, sequential);
        let stream = &config.streams[0];
        let mechanism = Mechanism::from_config(&stream.mechanism).expect("valid mechanism");
        let mut rng = StdRng::seed_from_u64(3);
        let mut store = PaneStore::new(60_000, 0);
        for pane in [0i64, 60_000] {
            let grouped: Grouped = (0..GROUPS)
                .map(|g| {
                    (
                        vec![Some(format!("g{g}"))],
                        bit_sketch(&mechanism, D, 100_000, &mut rng),
                    )
                })
                .collect();
            store.merge_pane(pane, grouped).expect("same shapes");
        }
        store.observe(90_000);
        let name = if sequential { "sequential" } else { "fixed_n" };
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut store = store.clone();
                let due = take_due(stream, &mut store, true).expect("snapshot");
                let mut noise = ldpstream_engine::curator::secure_rng();
                let mut private = Private {
                    ledger: None,
                    noise: &mut noise,
                };
                due.iter()
                    .map(|s| {
                        evaluate_snapshot(stream, &mechanism, s, &mut private, &Sequential)
                            .expect("evaluate")
                            .len()
                    })
                    .sum::<usize>()
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = one_record_d65536, round_1000_groups
}
criterion_main!(benches);
