//! Optimized unary encoding (`oue`, Wang et al., USENIX Security 2017) by seeded Monte
//! Carlo: the unbiased estimate against its closed-form mean and variance, the size and
//! power of the generalized LocalBitFlipGOF (fixed-n, asymptotic and Monte Carlo
//! calibrated) and the anytime validity of its sequential test.
//!
//! The probabilities p = 1/2 and q = 1/(e^ε+1) are written out here from the paper, not
//! read from the engine, so a wrong constant in the mechanism shows. The figures over all
//! 1,000 datasets per case are produced by `benches/oracles.sh` (benches/RESULTS.md).

use super::common;

use crate::eprocess::{gof_e_process, SequentialState};
use crate::mechanism::{simulate_sketch, Mechanism};
use crate::plan::{power, required_n, Alternative, PlanMechanism};
use crate::sketch::{BitSketch, Sketch};
use crate::stats::{run_gof, sample_multinomial, GofParams};
use ldpstream_config::{Calibration, MechanismConfig, TestMethod};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Binomial, Distribution};

const ALPHA: f64 = 0.05;

fn oue(epsilon: f64, domain: u32) -> Mechanism {
    Mechanism::from_config(&MechanismConfig::Oue { epsilon, domain }).unwrap()
}

/// `(p, q)` of OUE at ε, from the paper.
fn pq(epsilon: f64) -> (f64, f64) {
    (0.5, 1.0 / (epsilon.exp() + 1.0))
}

fn binomial(rng: &mut StdRng, n: u64, p: f64) -> u64 {
    if n == 0 {
        return 0;
    }
    Binomial::new(n, p).unwrap().sample(rng)
}

/// The bit counts of n OUE reports of values drawn from `truth`, from their exact law:
/// given the type counts N, bit j is Binomial(N_j, p) + Binomial(n − N_j, q).
fn exact_sketch(rng: &mut StdRng, epsilon: f64, truth: &[f64], n: u64) -> Sketch {
    let (p, q) = pq(epsilon);
    let types = sample_multinomial(rng, n, truth).unwrap();
    let bits = types
        .iter()
        .map(|&nj| binomial(rng, nj, p) + binomial(rng, n - nj, q))
        .collect();
    Sketch::Bits(BitSketch::from_counts(bits, n).unwrap())
}

/// A skewed distribution on d categories (weights 1..=d reversed, normalized).
fn skewed(d: usize) -> Vec<f64> {
    let total = (d * (d + 1) / 2) as f64;
    (0..d).map(|j| (d - j) as f64 / total).collect()
}

/// Wang et al. 2017: Var(p̂_j) = f_j(1−f_j)/(n(p−q)²), f_j = q + (p−q)p_j, the exact
/// variance of `(bit_j/n − q)/(p − q)`; at p_j → 0 it is their `4e^ε/(n(e^ε−1)²)`.
fn closed_form_variance(epsilon: f64, pj: f64, n: u64) -> f64 {
    let (p, q) = pq(epsilon);
    let f = q + (p - q) * pj;
    f * (1.0 - f) / (n as f64 * (p - q) * (p - q))
}

/// Runs `runs` datasets and returns, pooled over categories, the ratio of the empirical
/// variance to the closed form, and the largest |mean − truth| in standard errors of the
/// mean, with the share of categories beyond 3 of them.
fn estimate_check(
    epsilon: f64,
    d: usize,
    n: u64,
    runs: usize,
    mut draw: impl FnMut(&mut StdRng) -> Sketch,
) -> (f64, f64, f64) {
    let m = oue(epsilon, d as u32);
    let truth = skewed(d);
    let mut rng = StdRng::seed_from_u64(1000 + d as u64);
    let (mut sum, mut sum2) = (vec![0.0; d], vec![0.0; d]);
    for _ in 0..runs {
        let e = m.estimate(&draw(&mut rng)).unwrap();
        for j in 0..d {
            sum[j] += e.estimate[j];
            sum2[j] += e.estimate[j] * e.estimate[j];
        }
    }
    let r = runs as f64;
    let (mut ratio, mut worst, mut beyond) = (0.0, 0.0f64, 0usize);
    for j in 0..d {
        let mean = sum[j] / r;
        let var = (sum2[j] - r * mean * mean) / (r - 1.0);
        let closed = closed_form_variance(epsilon, truth[j], n);
        ratio += var / closed / d as f64;
        let z = (mean - truth[j]) / (closed / r).sqrt();
        worst = worst.max(z.abs());
        beyond += usize::from(z.abs() > 3.0);
    }
    (ratio, worst, beyond as f64 / d as f64)
}

/// d ∈ {16, 1024}, ε ∈ {0.5, 2, 5}: the pooled empirical variance is within 5% of the
/// closed form and every mean within 3 s.e. of the truth (d = 1024: at most 1% of the
/// categories beyond 3 s.e., as 0.27% are expected, and none beyond 4.5). The pooled
/// variance ratio of R datasets × d categories has relative s.e. ≈ √(2/(R·d)): 1.1% for
/// d = 16 and R = 1000, 1.4% for d = 1024 and R = 10, so 5% is over 3.5 of them.
#[test]
fn estimate_mean_and_variance_match_the_closed_form() {
    for epsilon in [0.5, 2.0, 5.0] {
        for (d, runs) in [
            (16usize, common::runs_or(1000)),
            (1024, common::runs_or(10)),
        ] {
            let n = 20_000;
            let truth = skewed(d);
            let (ratio, worst, beyond) = estimate_check(epsilon, d, n, runs, |rng| {
                exact_sketch(rng, epsilon, &truth, n)
            });
            eprintln!(
                "| oue | {d} | {epsilon} | {runs} | {ratio:.4} | {worst:.2} | {:.4} |",
                beyond
            );
            common::assert_estimates_match(
                &format!("oue ε={epsilon}"),
                d as u64,
                ratio,
                worst,
                beyond,
            );
        }
    }
}

/// The same through the real randomizer and fold (exact Bernoulli draws, packed reports):
/// d = 16, ε = 2, 400 datasets of 2,000 reports.
#[test]
fn randomizer_estimates_match_the_closed_form() {
    let (epsilon, d, n) = (2.0, 16usize, 2000u64);
    let m = oue(epsilon, d as u32);
    let truth = skewed(d);
    let (ratio, worst, _) = estimate_check(epsilon, d, n, 400, |rng| {
        simulate_sketch(&m, &truth, n as usize, rng).unwrap()
    });
    eprintln!("oue randomizer: var/closed {ratio:.4}, worst |z| {worst:.2}");
    assert!((ratio - 1.0).abs() <= 0.06, "ratio {ratio}");
    assert!(worst <= 3.0, "worst |z| {worst}");
}

fn gof_params(p0: &[f64], calibration: Calibration, seed: u64) -> GofParams<'_> {
    GofParams {
        method: TestMethod::LocalBitFlipGOF,
        p0,
        alpha: ALPHA,
        calibration,
        mc_samples: if calibration == Calibration::MonteCarlo {
            99
        } else {
            0
        },
        seed,
        distance: None,
    }
}

/// 2,000 null datasets through the real randomizer: the rejection rate at α = 0.05 lies
/// within [0.035, 0.065] (±3.1 binomial s.e.), asymptotic at n = 5,000 and Monte Carlo
/// calibrated at n = 300, at ε = 1 and ε = 4.
#[test]
fn gof_size_is_alpha() {
    let p0 = [0.3, 0.2, 0.2, 0.1, 0.1, 0.1];
    for (epsilon, n, calibration, seed) in [
        (1.0, 5000usize, Calibration::Asymptotic, 1u64),
        (4.0, 5000, Calibration::Asymptotic, 2),
        (1.0, 300, Calibration::MonteCarlo, 3),
    ] {
        let m = oue(epsilon, 6);
        let mut rng = StdRng::seed_from_u64(seed);
        let mut rejections = 0u32;
        for run in 0..2000u64 {
            let sketch = simulate_sketch(&m, &p0, n, &mut rng).unwrap();
            let r = run_gof(&m, &sketch, &gof_params(&p0, calibration, run)).unwrap();
            rejections += u32::from(r.reject);
        }
        let rate = f64::from(rejections) / 2000.0;
        eprintln!("oue GOF ε={epsilon} n={n} {calibration:?}: size {rate}");
        assert!((0.035..=0.065).contains(&rate), "ε={epsilon}: size {rate}");
    }
}

/// At the n the planner gives for power 0.8 (d = 16, ε = 1 and ε = 3, uniform null,
/// paninski:0.2), the empirical power over 2,000 datasets is within ±0.04 of 0.8.
#[test]
fn gof_power_at_the_planner_n() {
    let h = Alternative::Paninski { distance: 0.2 }
        .against(&[1.0 / 16.0; 16])
        .unwrap();
    for (epsilon, seed) in [(1.0, 11u64), (3.0, 12)] {
        let plan = PlanMechanism::Oue { epsilon };
        let n = required_n(plan, &h, ALPHA, 0.8).unwrap();
        let predicted = power(plan, &h, ALPHA, n).unwrap();
        let m = oue(epsilon, 16);
        let mut rng = StdRng::seed_from_u64(seed);
        let mut rejections = 0u32;
        for run in 0..2000u64 {
            let sketch = exact_sketch(&mut rng, epsilon, h.p1(), n);
            let params = gof_params(h.p0(), Calibration::Asymptotic, run);
            rejections += u32::from(run_gof(&m, &sketch, &params).unwrap().reject);
        }
        let rate = f64::from(rejections) / 2000.0;
        eprintln!("oue ε={epsilon}: n = {n}, predicted {predicted:.3}, empirical {rate}");
        assert!(
            (rate - 0.8).abs() <= 0.04,
            "ε={epsilon}: power {rate} at n = {n}"
        );
    }
}

/// 2,000 null streams × 500 looks of 200 reports (d = 10, ε = 1, skewed null): the
/// sequential test rejects at some look in at most α + 2 s.e. of them, while the fixed-n
/// test looked at as often rejects far more.
#[test]
fn sequential_never_rejects_beyond_alpha() {
    let (epsilon, d, step) = (1.0, 10usize, 200u64);
    let m = oue(epsilon, d as u32);
    let p0 = skewed(d);
    let mut rng = StdRng::seed_from_u64(21);
    let (streams, looks) = (2000usize, 500usize);
    let (mut e_rejects, mut fixed_rejects) = (0usize, 0usize);
    for _ in 0..streams {
        let (mut bits, mut n) = (vec![0u64; d], 0u64);
        let mut seq = SequentialState::default();
        let mut fixed = false;
        for _ in 0..looks {
            let Sketch::Bits(more) = exact_sketch(&mut rng, epsilon, &p0, step) else {
                unreachable!()
            };
            bits.iter_mut()
                .zip(more.bit_counts())
                .for_each(|(a, b)| *a += b);
            n += step;
            let sketch = Sketch::Bits(BitSketch::from_counts(bits.clone(), n).unwrap());
            seq.observe(gof_e_process(&m, &sketch, &p0).unwrap().e_value(), ALPHA);
            if !fixed {
                let params = gof_params(&p0, Calibration::Asymptotic, 0);
                fixed = run_gof(&m, &sketch, &params).unwrap().reject;
            }
            if seq.rejected && fixed {
                break;
            }
        }
        e_rejects += usize::from(seq.rejected);
        fixed_rejects += usize::from(fixed);
    }
    let (re, rf) = (
        e_rejects as f64 / streams as f64,
        fixed_rejects as f64 / streams as f64,
    );
    let bound = ALPHA + 2.0 * (ALPHA * (1.0 - ALPHA) / streams as f64).sqrt();
    eprintln!("oue sequential: P(ever reject) {re}, fixed-n looked at 500 times {rf}");
    assert!(re <= bound, "P(ever reject | H0) = {re} > {bound}");
    assert!(rf > bound, "fixed-n rate {rf} not inflated");
}
