//! k-subset selection (Wang et al. 2016; Ye & Barg 2018) by seeded Monte Carlo: the
//! unbiased estimate against its closed-form mean and variance, the size and power of the
//! generalized-inverse χ² identity test, the anytime validity of its Gaussian-mixture
//! e-process, and the fold kernel's merge equivalence.
//!
//! The probabilities are written out here from the papers, not read from the engine, so a
//! wrong constant in the mechanism shows. Reports are drawn by the randomizer itself.

use super::common;

use crate::eprocess::gaussian::{log_e_mixture, PRECISION_GRID};
use crate::eprocess::{crosses, finite_e_value, gof_e_process};
use crate::kernels::fold_subsets;
use crate::mechanism::{Mechanism, Subset};
use crate::plan::{power, required_n, Alternative, PlanMechanism};
use crate::sketch::{BitSketch, Sketch};
use crate::stats::{run_gof, sample_subset_counts, subset_gof, subset_statistic, GofParams};
use arrow_array::builder::{ListBuilder, UInt32Builder};
use arrow_array::ListArray;
use ldpstream_config::{Calibration, TestMethod};
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;

const ALPHA: f64 = 0.05;

/// `(p, q)` of k-subset selection, from Wang et al. 2016 (§IV): the true value is in the
/// subset with `p = k e^ε/(k e^ε + d − k)`, and any other value with
/// `q = k((k−1)e^ε + d − k) / ((d−1)(k e^ε + d − k))`.
fn pq(epsilon: f64, d: u32, k: u32) -> (f64, f64) {
    let (e, d, k) = (epsilon.exp(), f64::from(d), f64::from(k));
    let z = k * e + d - k;
    (k * e / z, k * ((k - 1.0) * e + d - k) / ((d - 1.0) * z))
}

/// A skewed distribution on d categories (weights d..=1, normalized).
fn skewed(d: usize) -> Vec<f64> {
    let total = (d * (d + 1) / 2) as f64;
    (0..d).map(|j| (d - j) as f64 / total).collect()
}

/// Over `runs` datasets of n reports drawn by the randomizer: the empirical variance of
/// p̂_j over `f(1−f)/(n(p−q)²)`, f = q + (p−q)p_j (the exact variance of `(c_j/n − q)/(p −
/// q)`), pooled over the categories; the largest |mean − p_j| in standard errors; and the
/// share of categories beyond 3 of them.
fn estimate_check(eps: f64, d: u32, n: u64, runs: usize, rng: &mut StdRng) -> (f64, f64, f64) {
    let m = Subset::new(eps, d, None).unwrap();
    let (p, q) = pq(eps, d, m.k());
    let truth = skewed(d as usize);
    let (mut sum, mut sum_sq) = (vec![0.0; d as usize], vec![0.0; d as usize]);
    for _ in 0..runs {
        let counts = sample_subset_counts(&m, &truth, n, rng).unwrap();
        for (j, e) in m.estimate(&counts, n).estimate.into_iter().enumerate() {
            sum[j] += e;
            sum_sq[j] += e * e;
        }
    }
    let r = runs as f64;
    let (mut ratio, mut worst, mut beyond) = (0.0, 0.0f64, 0usize);
    for j in 0..d as usize {
        let f = q + (p - q) * truth[j];
        let var = f * (1.0 - f) / (n as f64 * (p - q) * (p - q));
        let mean = sum[j] / r;
        let z = (mean - truth[j]).abs() / (var / r).sqrt();
        worst = worst.max(z);
        beyond += usize::from(z > 3.0);
        ratio += (sum_sq[j] - r * mean * mean) / (r - 1.0) / var / f64::from(d);
    }
    (ratio, worst, beyond as f64 / f64::from(d))
}

/// d ∈ {16, 1024}, ε ∈ {0.5, 2, 5}, default k: the pooled empirical variance is within 5%
/// of the closed form and every mean within 3 s.e. of the truth (d = 1024: at most 1% of
/// the categories beyond 3 s.e., 0.27% expected, none beyond 4.5). The pooled ratio of R
/// datasets × d categories has relative s.e. ≈ √(2/(R·d)) if the categories were
/// independent: 1.1% at d = 16, R = 1000; at d = 1024 they share each dataset's draw of
/// true values, and R = 10 gave 1.057 where R = 100 gives 1.003, so R = 100.
#[test]
fn estimate_mean_and_variance_match_the_closed_form() {
    let mut rng = StdRng::seed_from_u64(30);
    for eps in [0.5, 2.0, 5.0] {
        for (d, runs) in [(16u32, common::runs_or(1000)), (1024, common::runs_or(100))] {
            let n = 2000;
            let (ratio, worst, beyond) = estimate_check(eps, d, n, runs, &mut rng);
            let k = Subset::new(eps, d, None).unwrap().k();
            eprintln!(
                "| subset | {d} | {k} | {eps} | {runs} | {ratio:.4} | {worst:.2} | {beyond:.4} |"
            );
            common::assert_estimates_match(
                &format!("subset ε={eps}"),
                d.into(),
                ratio,
                worst,
                beyond,
            );
        }
    }
}

/// The planner's `n·Var(p̂_j)` at p_j → 0 is Wang et al. 2016's `q(1−q)/(p−q)²`, which at
/// k = 1 is GRR's `(e^ε+d−2)/(e^ε−1)²` (Wang et al. 2017, §4.1).
#[test]
fn variance_at_zero_is_the_published_form() {
    for d in [2u32, 16, 1024, 1 << 20] {
        for eps in [0.1, 0.5, 2.0, 5.0, 10.0] {
            let m = Subset::new(eps, d, None).unwrap();
            let (p, q) = pq(eps, d, m.k());
            let published = q * (1.0 - q) / ((p - q) * (p - q));
            let got = m.variance_at_zero();
            assert!((got / published - 1.0).abs() < 1e-9, "ε={eps} d={d}");
            let grr = Subset::new(eps, d, Some(1)).unwrap().variance_at_zero();
            let e = f64::exp(eps);
            let closed = (e + f64::from(d) - 2.0) / ((e - 1.0) * (e - 1.0));
            assert!((grr / closed - 1.0).abs() < 1e-9, "k=1 ε={eps} d={d}");
            // The default k never does worse than GRR.
            assert!(got <= grr * (1.0 + 1e-12), "ε={eps} d={d}");
        }
    }
}

/// Over 2,000 null datasets the test rejects at a rate within 3 binomial s.e. of α, for a
/// uniform and a skewed null; under a shifted alternative it rejects almost always.
#[test]
fn gof_size_and_power() {
    let mut rng = StdRng::seed_from_u64(31);
    let runs = 2000;
    for (eps, d, k, skew) in [(1.0, 8u32, None, false), (2.0, 12, Some(4), true)] {
        let m = Subset::new(eps, d, k).unwrap();
        let p0 = if skew {
            skewed(d as usize)
        } else {
            vec![1.0 / f64::from(d); d as usize]
        };
        let n = 1000;
        let rejected = (0..runs)
            .filter(|_| {
                let c = sample_subset_counts(&m, &p0, n, &mut rng).unwrap();
                subset_gof(&m, &c, n, &p0).p_value.unwrap() < ALPHA
            })
            .count();
        let rate = rejected as f64 / f64::from(runs);
        let se = (ALPHA * (1.0 - ALPHA) / f64::from(runs)).sqrt();
        eprintln!("subset gof size ε={eps} d={d} k={} n={n}: {rate:.4}", m.k());
        assert!(
            (rate - ALPHA).abs() < 3.0 * se,
            "ε={eps} d={d}: size {rate}"
        );
        let mut alt = p0.clone();
        alt[0] += 0.15;
        alt[1] = (alt[1] - 0.15).max(0.0);
        let total: f64 = alt.iter().sum();
        alt.iter_mut().for_each(|x| *x /= total);
        let power = (0..200)
            .filter(|_| {
                let c = sample_subset_counts(&m, &alt, 4 * n, &mut rng).unwrap();
                subset_gof(&m, &c, 4 * n, &p0).p_value.unwrap() < ALPHA
            })
            .count();
        eprintln!("subset gof power ε={eps} d={d} n={}: {power}/200", 4 * n);
        assert!(power > 180, "ε={eps} d={d}: power {power}/200");
    }
}

fn gof_params(p0: &[f64], calibration: Calibration, seed: u64) -> GofParams<'_> {
    GofParams {
        method: TestMethod::SubsetGOF,
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

fn sketch_of(counts: Vec<u64>, n: u64) -> Sketch {
    Sketch::Bits(BitSketch::from_counts(counts, n).unwrap())
}

/// At the n the planner gives for power 0.8 (paninski:0.2 on a uniform null; d = 8,
/// ε = 1, k = 3 and d = 12, ε = 2, k = 2), the empirical power of the stream's test
/// (`run_gof`, asymptotic) over 1,000 datasets is within ±0.04 of 0.8.
#[test]
fn gof_power_at_the_planner_n() {
    for (d, epsilon, seed) in [(8usize, 1.0, 41u64), (12, 2.0, 42)] {
        let h = Alternative::Paninski { distance: 0.2 }
            .against(&vec![1.0 / d as f64; d])
            .unwrap();
        let plan = PlanMechanism::Subset { epsilon };
        let n = required_n(plan, &h, ALPHA, 0.8).unwrap();
        let predicted = power(plan, &h, ALPHA, n).unwrap();
        let m = Subset::new(epsilon, d as u32, None).unwrap();
        let mechanism = Mechanism::Subset(m);
        let mut rng = StdRng::seed_from_u64(seed);
        let runs = common::runs_or(1000);
        let mut rejections = 0usize;
        for run in 0..runs {
            let counts = sample_subset_counts(&m, h.p1(), n, &mut rng).unwrap();
            let params = gof_params(h.p0(), Calibration::Asymptotic, run as u64);
            let sketch = sketch_of(counts, n);
            rejections += usize::from(run_gof(&mechanism, &sketch, &params).unwrap().reject);
        }
        let rate = rejections as f64 / runs as f64;
        eprintln!(
            "subset power d={d} ε={epsilon} k={}: n = {n}, predicted {predicted:.3}, empirical {rate} over {runs}",
            m.k()
        );
        assert!(
            (rate - 0.8).abs() <= 0.04,
            "d={d} ε={epsilon}: power {rate} at n = {n}"
        );
    }
}

/// Monte Carlo calibration simulates the sketch under H0 exactly (the randomizer itself):
/// at n = 40 (d = 6, k = 2: the stream's own rule, n·min(f, 1 − f) ≈ 13 ≥ 5, would not
/// switch) the simulated p-values of 400 null datasets reject at a rate within 3
/// binomial s.e. of α, and one simulated p-value is reproducible from its seed.
#[test]
fn monte_carlo_calibration_holds_its_level() {
    let m = Subset::new(1.0, 6, None).unwrap();
    let mechanism = Mechanism::Subset(m);
    let p0 = vec![1.0 / 6.0; 6];
    let mut rng = StdRng::seed_from_u64(43);
    let runs = 400;
    let mut rejected = 0;
    for run in 0..runs {
        let sketch = sketch_of(sample_subset_counts(&m, &p0, 40, &mut rng).unwrap(), 40);
        let params = gof_params(&p0, Calibration::MonteCarlo, run);
        let r = run_gof(&mechanism, &sketch, &params).unwrap();
        let p = r.mc_p_value.unwrap();
        assert_eq!(r.p_value, Some(p));
        rejected += u32::from(r.reject);
        if run == 0 {
            let again = run_gof(&mechanism, &sketch, &params).unwrap();
            assert_eq!(again.mc_p_value, Some(p));
        }
    }
    let rate = f64::from(rejected) / runs as f64;
    let se = (ALPHA * (1.0 - ALPHA) / runs as f64).sqrt();
    eprintln!("subset Monte Carlo size, n = 40, {runs} datasets: {rate:.4}");
    assert!((rate - ALPHA).abs() < 3.0 * se, "size {rate}");
}

/// The Gaussian-mixture e-process on the statistic (`T = |Z_n|²/n`, Z the whitened count
/// walk) crosses 1/α on at most α of null paths over 600 looks.
#[test]
fn sequential_never_rejects_more_than_alpha() {
    let mut rng = StdRng::seed_from_u64(32);
    let m = Subset::new(1.0, 6, None).unwrap();
    let mechanism = Mechanism::Subset(m);
    let p0 = vec![1.0 / 6.0; 6];
    let (paths, looks, step) = (300, 600, 50u64);
    let mut ever = 0;
    for _ in 0..paths {
        let mut counts = vec![0u64; 6];
        let mut n = 0u64;
        for _ in 0..looks {
            let batch = sample_subset_counts(&m, &p0, step, &mut rng).unwrap();
            counts.iter_mut().zip(&batch).for_each(|(c, b)| *c += b);
            n += step;
            // The stream's dispatch, checked against the mixture on the statistic itself.
            let sketch = sketch_of(counts.clone(), n);
            let e = gof_e_process(&mechanism, &sketch, &p0).unwrap().e_value();
            let t = subset_statistic(&m, &counts, n, &p0);
            let direct = finite_e_value(log_e_mixture(t, 5, n as f64, &PRECISION_GRID));
            assert_eq!(e, direct);
            if crosses(e, ALPHA) {
                ever += 1;
                break;
            }
        }
    }
    let rate = f64::from(ever) / f64::from(paths);
    eprintln!("subset sequential P(ever reject | H0), {paths} paths × {looks} looks: {rate:.4}");
    assert!(rate <= ALPHA, "P(ever reject | H0) = {rate}");
}

fn list(rows: &[Vec<u32>]) -> ListArray {
    let mut b = ListBuilder::new(UInt32Builder::new());
    for row in rows {
        b.values().append_slice(row);
        b.append(true);
    }
    b.finish()
}

proptest! {
    /// Folding a stream in two parts and merging the sketches equals folding it whole,
    /// counts and rejections alike (rows may be invalid: any length, range, repeats).
    #[test]
    fn fold_then_merge_equals_one_fold(
        rows in prop::collection::vec(prop::collection::vec(0u32..10, 0..5), 0..60),
        cut in 0usize..60,
    ) {
        let cut = cut.min(rows.len());
        let mut whole = BitSketch::new(8);
        fold_subsets(&list(&rows), 3, &mut whole);
        let (mut a, mut b) = (BitSketch::new(8), BitSketch::new(8));
        fold_subsets(&list(&rows[..cut]), 3, &mut a);
        fold_subsets(&list(&rows[cut..]), 3, &mut b);
        a.merge(&b).unwrap();
        prop_assert_eq!(a.bit_counts(), whole.bit_counts());
        prop_assert_eq!(a.n(), whole.n());
        prop_assert_eq!(a.rejected(), whole.rejected());
        let folded: u64 = whole.bit_counts().iter().sum();
        prop_assert_eq!(folded, 3 * whole.n());
    }
}
