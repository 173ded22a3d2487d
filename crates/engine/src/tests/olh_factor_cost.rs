//! OLH's factors at large d, timed once each (issue 44; docs/STATISTICS.md §1.8, §10.1):
//! criterion's ten samples of a factor that takes minutes are not affordable on the shared
//! machine, so this prints one wall time per step instead (indicative, like every figure
//! taken under load; see benches/RESULTS.md). It asserts no time, only that the
//! matrix-free solve and the factor agree. In the engine's test build (opt-level 3, as
//! nalgebra and matrixmultiply), so that no second profile is compiled:
//!
//!   LDPSTREAM_OLH_FACTOR_DOMAINS="1024 4096" cargo test --workspace --lib -- \
//!     tests::olh_factor_cost --ignored --nocapture
//!
//! For each d, at ε = 2 (g = 8), the default pool (S = 1,024, pool seed 0), uniform null:
//! - the pool solver (C by bucket pairs, Cholesky, W = C⁻¹; the variance table M where
//!   2·S·d² ≤ 2³³), and the per-snapshot estimate with its standard errors;
//! - the sequential test's null factor (Σ̄ by bucket pairs and one S·d² product, Cholesky),
//!   and the per-snapshot whitened statistic from a table (the S·d gather included);
//! - the matrix-free alternative for the estimate: preconditioned conjugate gradients on
//!   `C π = b`, C·x by bucket sums (O(S·d)), preconditioner `(1 − 1/g)I + 11ᵀ/g`, to a
//!   relative residual of 1e-10: its iterations and time per snapshot.

use std::time::Instant;

use crate::mechanism::{olh_bucket, Olh};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const EPSILON: f64 = 2.0;
const G: u32 = 8;
const POOL: u32 = 1024;

fn seconds(start: Instant) -> f64 {
    start.elapsed().as_secs_f64()
}

/// `C x` by bucket sums: per pool entry, each bucket's total of x, gathered back.
fn collision_times(buckets: &[u16], g: usize, d: usize, x: &[f64], out: &mut [f64]) {
    out.iter_mut().for_each(|o| *o = 0.0);
    let mut sums = vec![0.0; g];
    for row in buckets.chunks_exact(d) {
        sums.iter_mut().for_each(|s| *s = 0.0);
        for (&y, &xv) in row.iter().zip(x) {
            sums[y as usize] += xv;
        }
        for (&y, o) in row.iter().zip(out.iter_mut()) {
            *o += sums[y as usize];
        }
    }
    let s = (buckets.len() / d) as f64;
    out.iter_mut().for_each(|o| *o /= s);
}

/// PCG on `C x = b`; returns (x, iterations).
fn pcg(buckets: &[u16], g: usize, d: usize, b: &[f64]) -> (Vec<f64>, usize) {
    let a = 1.0 - 1.0 / g as f64;
    let c = (1.0 / g as f64) / (a + d as f64 / g as f64);
    let precondition = |r: &[f64]| -> Vec<f64> {
        let total: f64 = r.iter().sum();
        r.iter().map(|&v| (v - c * total) / a).collect()
    };
    let dot = |u: &[f64], v: &[f64]| -> f64 { u.iter().zip(v).map(|(a, b)| a * b).sum() };
    let mut x = vec![0.0; d];
    let mut r = b.to_vec();
    let mut z = precondition(&r);
    let mut p = z.clone();
    let mut rz = dot(&r, &z);
    let norm_b = dot(b, b).sqrt();
    let mut cp = vec![0.0; d];
    for iteration in 1..=10_000 {
        collision_times(buckets, g, d, &p, &mut cp);
        let step = rz / dot(&p, &cp);
        for k in 0..d {
            x[k] += step * p[k];
            r[k] -= step * cp[k];
        }
        if dot(&r, &r).sqrt() <= 1e-10 * norm_b {
            return (x, iteration);
        }
        z = precondition(&r);
        let rz_next = dot(&r, &z);
        let beta = rz_next / rz;
        rz = rz_next;
        for k in 0..d {
            p[k] = z[k] + beta * p[k];
        }
    }
    (x, 10_000)
}

#[test]
#[ignore = "benches/RESULTS.md: minutes per domain; LDPSTREAM_OLH_FACTOR_DOMAINS picks them"]
fn olh_factor_cost() {
    let domains: Vec<u32> = {
        let given: Vec<u32> = std::env::var("LDPSTREAM_OLH_FACTOR_DOMAINS")
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|a| a.parse().ok())
            .collect();
        if given.is_empty() {
            vec![1024, 4096]
        } else {
            given
        }
    };
    eprintln!(
        "| d | solver: build (s) | estimate + s.e. per snapshot (ms) | null factor: build (s) \
         | whitened statistic per snapshot (ms) | PCG: iterations | PCG per snapshot (ms) |"
    );
    eprintln!("|---|---|---|---|---|---|---|");
    for d in domains {
        let olh = Olh::new(EPSILON, d, G, POOL, 0).expect("a valid pool");
        let du = d as usize;
        let start = Instant::now();
        let solver = olh.solver().expect("the pool identifies d");
        let solver_build = seconds(start);
        let n = 10_000_000u64;
        let mut rng = StdRng::seed_from_u64(1);
        // A table of 10⁷ reports near the uniform null, and its support counts.
        let per_cell = n / u64::from(POOL * G);
        let table: Vec<u64> = (0..POOL * G)
            .map(|_| per_cell + rng.random_range(0..50))
            .collect();
        let supports = olh.supports(&table);
        let total: u64 = table.iter().sum();
        let start = Instant::now();
        let reps = 5;
        for _ in 0..reps {
            std::hint::black_box(solver.estimate(&olh, &supports, total));
        }
        let estimate_ms = seconds(start) * 1e3 / f64::from(reps);
        let p0 = vec![1.0 / f64::from(d); du];
        let start = Instant::now();
        olh.sequential_statistic(&table, &p0)
            .expect("a null factor");
        let whitener_build = seconds(start);
        let start = Instant::now();
        for _ in 0..reps {
            std::hint::black_box(
                olh.sequential_statistic(&table, &p0)
                    .expect("a null factor"),
            );
        }
        let statistic_ms = seconds(start) * 1e3 / f64::from(reps);
        let buckets: Vec<u16> = olh
            .pool()
            .iter()
            .flat_map(|&(a, b)| (0..d).map(move |v| olh_bucket(a, b, G, v) as u16))
            .collect();
        let q = olh.q();
        let b: Vec<f64> = supports
            .iter()
            .map(|&c| c as f64 / total as f64 - q)
            .collect();
        let start = Instant::now();
        let (x, iterations) = pcg(&buckets, G as usize, du, &b);
        let pcg_ms = seconds(start) * 1e3;
        // The two solutions agree (W b against PCG's), as a check that both solved C x = b.
        let direct = solver.apply(&b);
        let worst = direct
            .iter()
            .zip(&x)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f64, f64::max);
        assert!(worst < 1e-6, "PCG and the factor disagree by {worst}");
        eprintln!(
            "| {d} | {solver_build:.2} | {estimate_ms:.2} | {whitener_build:.2} | {statistic_ms:.2} \
             | {iterations} | {pcg_ms:.1} |"
        );
    }
}
