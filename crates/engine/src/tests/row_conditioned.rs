//! Issue 31, defect 4: the Hadamard and cohort tests condition on how many reports each
//! public row received. Before, Sheffet's χ² and the (row, sign) Dirichlet e-process
//! assumed rows drawn uniformly, and a client whose row choice was merely non-uniform
//! made every test reject a true null (rows 4–7 thinned by 20%: p = 4e-26, e = 1.8e308).
//!
//! Null datasets with unequal rows are drawn exactly: row counts Multinomial(n, rows'
//! weights), then each row's "+" count Binomial(n_j, ½ + η (F p0)_j), the law of the real
//! randomizer given its row (the case below uses the randomizer itself).

use crate::eprocess::{dirichlet, gof_e_process, null_report_law};
use crate::mechanism::{Cohort, Hadamard, Mechanism};
use crate::sketch::{SignedSketch, Sketch};
use crate::stats::{
    chi2_sf, cohort_chi2_statistic, gof_statistic, run_gof, sample_multinomial,
    sheffet_chi2_statistic, GofParams,
};
use ldpstream_config::{Calibration, TestMethod};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Binomial, Distribution};

const ALPHA: f64 = 0.05;

fn skewed(d: usize) -> Vec<f64> {
    let total = (d * (d + 1) / 2) as f64;
    (1..=d).map(|j| j as f64 / total).collect()
}

fn eta(m: &Mechanism) -> f64 {
    match m {
        Mechanism::Hadamard(h) => h.eta(),
        Mechanism::Cohort(c) => c.eta(),
        _ => unreachable!("a ±1 family"),
    }
}

/// Row weights with the upper half of the rows thinned by 20% (normalized).
fn thinned_rows(rows: usize) -> Vec<f64> {
    let w: Vec<f64> = (0..rows)
        .map(|j| if j >= rows / 2 { 0.8 } else { 1.0 })
        .collect();
    let total: f64 = w.iter().sum();
    w.iter().map(|x| x / total).collect()
}

/// Row weights rising linearly from 1 to 3 (normalized): an unbalanced cohort population.
fn rising_rows(rows: usize) -> Vec<f64> {
    let w: Vec<f64> = (0..rows)
        .map(|j| 1.0 + 2.0 * j as f64 / (rows - 1) as f64)
        .collect();
    let total: f64 = w.iter().sum();
    w.iter().map(|x| x / total).collect()
}

/// `(F p)_j`, read off the (row, sign) law under uniform rows, whose "+" cell of row j is
/// `(½ + η (F p)_j)/J` (so that this file builds against the code before the fix too).
fn sign_row_means(m: &Mechanism, p: &[f64]) -> Vec<f64> {
    let q = null_report_law(m, p).unwrap().unwrap();
    let j = q.len() / 2;
    q[..j]
        .iter()
        .map(|&c| (c * j as f64 - 0.5) / eta(m))
        .collect()
}

/// Adds `n` reports under the true law `p` with row weights `rows` to `(plus, minus)`.
fn add_reports(
    m: &Mechanism,
    p: &[f64],
    rows: &[f64],
    n: u64,
    plus: &mut [u64],
    minus: &mut [u64],
    rng: &mut StdRng,
) {
    let h = sign_row_means(m, p);
    let counts = sample_multinomial(rng, n, rows).unwrap();
    for (j, &nj) in counts.iter().enumerate() {
        let q = (0.5 + eta(m) * h[j]).clamp(0.0, 1.0);
        let k = if nj == 0 {
            0
        } else {
            Binomial::new(nj, q).unwrap().sample(rng)
        };
        plus[j] += k;
        minus[j] += nj - k;
    }
}

fn dataset(m: &Mechanism, p: &[f64], rows: &[f64], n: u64, rng: &mut StdRng) -> Sketch {
    let (mut plus, mut minus) = (vec![0; rows.len()], vec![0; rows.len()]);
    add_reports(m, p, rows, n, &mut plus, &mut minus, rng);
    Sketch::Signed(SignedSketch::from_tables(plus, minus).unwrap())
}

fn params(p0: &[f64]) -> GofParams<'_> {
    GofParams {
        method: TestMethod::SheffetChi2,
        p0,
        alpha: ALPHA,
        calibration: Calibration::Asymptotic,
        mc_samples: 0,
        seed: 0,
        distance: None,
    }
}

fn hadamard(d: u32) -> Mechanism {
    Mechanism::Hadamard(Hadamard::new(1.0, d).unwrap())
}

fn cohort(d: u32, cohorts: u32) -> Mechanism {
    Mechanism::Cohort(Box::new(Cohort::new(1.0, d, cohorts, 7).unwrap()))
}

/// The case, with the real randomizer: Hadamard d = 8 (rows 0–7), ε = 1, a skewed
/// true null, and reports that landed in rows 4–7 dropped with probability 0.2; 10⁶
/// reports. Before the fix p was below 1e-20 and e astronomically large.
#[test]
fn thinned_rows_under_the_null_do_not_reject() {
    let had = Hadamard::new(1.0, 8).unwrap();
    let m = Mechanism::Hadamard(had);
    let p0 = skewed(8);
    let mut rng = StdRng::seed_from_u64(31);
    let truths = sample_multinomial(&mut rng, 1_000_000, &p0).unwrap();
    let (mut plus, mut minus) = (vec![0u64; 8], vec![0u64; 8]);
    for (x, &times) in truths.iter().enumerate() {
        for _ in 0..times {
            let (j, y) = had.randomize_with(x as u32, &mut rng).unwrap();
            if j >= 4 && rand::Rng::random_bool(&mut rng, 0.2) {
                continue;
            }
            if y > 0 {
                plus[j as usize] += 1;
            } else {
                minus[j as usize] += 1;
            }
        }
    }
    let sketch = Sketch::Signed(SignedSketch::from_tables(plus, minus).unwrap());
    let r = run_gof(&m, &sketch, &params(&p0)).unwrap();
    let e = gof_e_process(&m, &sketch, &p0).unwrap().e_value();
    eprintln!("thinned rows: p = {:?}, e = {e}", r.p_value);
    assert!(r.p_value.unwrap() > 1e-3, "{r:?}");
    assert!(!r.reject);
    assert!(e < 1.0 / ALPHA, "e = {e}");
}

/// Fixed-n size with unequal rows: 2000 null datasets of 20,000 reports each; the rate at
/// α = 0.05 must lie within 3 binomial SE (0.0049) of α.
fn fixed_n_size(m: &Mechanism, rows: &[f64], seed: u64) -> f64 {
    let p0 = skewed(m.domain());
    let mut rng = StdRng::seed_from_u64(seed);
    let runs = 2000;
    let rejected = (0..runs)
        .filter(|_| {
            let s = dataset(m, &p0, rows, 20_000, &mut rng);
            run_gof(m, &s, &params(&p0)).unwrap().reject
        })
        .count();
    rejected as f64 / f64::from(runs)
}

#[test]
fn fixed_n_size_with_unequal_rows() {
    for (what, m, rows, seed) in [
        (
            "hadamard d=6 (K=8), thinned",
            hadamard(6),
            thinned_rows(8),
            1,
        ),
        ("hadamard d=8, rising", hadamard(8), rising_rows(8), 2),
        (
            "cohort d=4, C=16, rising",
            cohort(4, 16),
            rising_rows(16),
            3,
        ),
        (
            "cohort d=6, C=24, thinned",
            cohort(6, 24),
            thinned_rows(24),
            4,
        ),
    ] {
        let rate = fixed_n_size(&m, &rows, seed);
        eprintln!("SheffetChi2 {what}: size {rate}");
        assert!((0.035..=0.065).contains(&rate), "{what}: size {rate}");
    }
}

/// The Monte Carlo null (which always drew each row's signs given its observed count)
/// calibrates the row-conditioned statistic as its χ² law does: 600 null datasets with
/// thinned rows (n = 5000, Hadamard d = 6), 199 simulated sketches each. The simulated
/// p-values reject within 3 SE (0.027) of α and stay within 0.03 of the χ² ones on
/// average. (This check passes before the fix too: a conditional simulation calibrates
/// any statistic; it shows that the two calibrations now agree.)
#[test]
fn monte_carlo_calibration_agrees_with_the_chi2_law() {
    let m = hadamard(6);
    let p0 = skewed(6);
    let rows = thinned_rows(8);
    let mut rng = StdRng::seed_from_u64(51);
    let runs = 600;
    let (mut rejected, mut gap) = (0, 0.0);
    for run in 0..runs {
        let s = dataset(&m, &p0, &rows, 5000, &mut rng);
        let params = GofParams {
            calibration: Calibration::MonteCarlo,
            mc_samples: 199,
            seed: run,
            ..params(&p0)
        };
        let r = run_gof(&m, &s, &params).unwrap();
        rejected += usize::from(r.reject);
        gap += (r.mc_p_value.unwrap() - r.asymptotic_p_value.unwrap()).abs();
    }
    let (rate, gap) = (rejected as f64 / runs as f64, gap / runs as f64);
    eprintln!("Monte Carlo SheffetChi2, thinned rows: size {rate}, mean |p_mc − p_χ²| {gap}");
    assert!((ALPHA - rate).abs() <= 0.027, "size {rate}");
    assert!(gap < 0.03, "{gap}");
}

/// Sequential size with unequal rows: 1000 null streams × 200 looks of 500 reports (up
/// to n = 10⁵); P(ever e ≥ 1/α) must be at most α + 2 SE (SE 0.0069).
fn ever_crossed(m: &Mechanism, rows: &[f64], seed: u64) -> f64 {
    let p0 = skewed(m.domain());
    let mut rng = StdRng::seed_from_u64(seed);
    let streams = 1000;
    let crossed = (0..streams)
        .filter(|_| {
            let (mut plus, mut minus) = (vec![0; rows.len()], vec![0; rows.len()]);
            (0..200).any(|_| {
                add_reports(m, &p0, rows, 500, &mut plus, &mut minus, &mut rng);
                let s =
                    Sketch::Signed(SignedSketch::from_tables(plus.clone(), minus.clone()).unwrap());
                gof_e_process(m, &s, &p0).unwrap().e_value() >= 1.0 / ALPHA
            })
        })
        .count();
    crossed as f64 / f64::from(streams)
}

#[test]
fn sequential_size_with_unequal_rows() {
    let bound = ALPHA + 2.0 * (ALPHA * (1.0 - ALPHA) / 1000.0).sqrt();
    for (what, m, rows, seed) in [
        (
            "hadamard d=6 (K=8), thinned",
            hadamard(6),
            thinned_rows(8),
            11,
        ),
        (
            "cohort d=4, C=16, rising",
            cohort(4, 16),
            rising_rows(16),
            12,
        ),
    ] {
        let rate = ever_crossed(&m, &rows, seed);
        eprintln!("e-process {what}: P(ever e >= 20) = {rate}");
        assert!(rate <= bound, "{what}: {rate} > {bound}");
    }
}

/// Under uniformly drawn rows the row-conditioned statistic tracks Sheffet's: both are
/// χ²_d, and they differ by the row-count noise Sheffet's θ carries,
/// `(n_j/n − 1/J)·2ηh_j`, a share ≈ 4η²h_j² of a row's variance. A perturbation of that
/// relative size moves the statistic by O(2η|h|·√T), not O(η²), and it does not shrink
/// with n. Measured over 300 null datasets (n = 20,000, skewed p0): mean |ΔT| 0.19
/// (Hadamard d = 6) and 0.14 (cohort d = 4, C = 16) at ε = 0.25, mean |Δp| 0.015–0.017;
/// at ε = 1, mean |ΔT| 0.67 and 0.54, mean |Δp| 0.06. The bounds leave ~30% room.
#[test]
fn agrees_with_sheffet_under_uniform_rows() {
    for (eps, bound_t, bound_p) in [(0.25, 0.25, 0.025), (1.0, 0.8, 0.08)] {
        for (m, seed) in [
            (Mechanism::Hadamard(Hadamard::new(eps, 6).unwrap()), 21),
            (
                Mechanism::Cohort(Box::new(Cohort::new(eps, 4, 16, 7).unwrap())),
                22,
            ),
        ] {
            let p0 = skewed(m.domain());
            let rows = sign_row_means(&m, &p0).len();
            let uniform = vec![1.0 / rows as f64; rows];
            let mut rng = StdRng::seed_from_u64(seed);
            let (mut gap, mut p_gap) = (0.0, 0.0);
            let runs = 300;
            for _ in 0..runs {
                let s = dataset(&m, &p0, &uniform, 20_000, &mut rng);
                let new = gof_statistic(&m, TestMethod::SheffetChi2, &s, &p0).unwrap();
                let old = unconditional(&m, &s, &p0);
                gap += (new.statistic - old).abs();
                let df = new.df.unwrap();
                p_gap += (new.p_value.unwrap() - chi2_sf(df, old)).abs();
            }
            let (gap, p_gap) = (gap / f64::from(runs), p_gap / f64::from(runs));
            eprintln!(
                "{} ε = {eps}: mean |T_new − T_sheffet| = {gap:.4}, mean |Δp| = {p_gap:.4}",
                m.kind()
            );
            assert!(gap < bound_t && p_gap < bound_p, "{gap} {p_gap}");
        }
    }
}

/// Sheffet's unconditional statistic (the pre-fix one), for comparison.
fn unconditional(m: &Mechanism, s: &Sketch, p0: &[f64]) -> f64 {
    let Sketch::Signed(s) = s else { unreachable!() };
    match m {
        Mechanism::Hadamard(h) => {
            let theta = h.theta(&s.signed(), s.n());
            sheffet_chi2_statistic(&theta, s.n(), h.eta(), h.one_minus_two_eta(), p0)
        }
        Mechanism::Cohort(c) => {
            let theta = c.theta(&s.signed(), s.n());
            cohort_chi2_statistic(&theta, s.n(), c.eta(), c.one_minus_two_eta(), c.gram(), p0)
                .unwrap()
                .0
        }
        _ => unreachable!(),
    }
}

/// Power under uniform rows is not worse than Sheffet's: 400 datasets from an alternative
/// at n = 4000, fixed-n rejection rates within 0.04 of each other (or better); and the
/// row-conditioned e-process detects within 10⁴ reports at least as often as the
/// (row, sign) Dirichlet mixture did, less 0.04.
#[test]
fn power_under_uniform_rows_is_kept() {
    for (m, seed) in [(hadamard(6), 41), (cohort(4, 16), 42)] {
        let d = m.domain();
        let p0 = vec![1.0 / d as f64; d];
        let mut p1 = p0.clone();
        p1[0] += 0.06;
        p1[d - 1] -= 0.06;
        let q0 = null_report_law(&m, &p0).unwrap().unwrap();
        let rows = q0.len() / 2;
        let uniform = vec![1.0 / rows as f64; rows];
        let mut rng = StdRng::seed_from_u64(seed);
        let (mut new, mut old, mut e_new, mut e_old) = (0, 0, 0, 0);
        let runs = 400;
        for _ in 0..runs {
            let s = dataset(&m, &p1, &uniform, 4000, &mut rng);
            new += usize::from(run_gof(&m, &s, &params(&p0)).unwrap().reject);
            let t = unconditional(&m, &s, &p0);
            old += usize::from(chi2_sf(d as u32, t) < ALPHA);
        }
        for _ in 0..runs / 4 {
            let (mut plus, mut minus) = (vec![0; rows], vec![0; rows]);
            let (mut hit_new, mut hit_old) = (false, false);
            for _ in 0..100 {
                add_reports(&m, &p1, &uniform, 100, &mut plus, &mut minus, &mut rng);
                let s =
                    Sketch::Signed(SignedSketch::from_tables(plus.clone(), minus.clone()).unwrap());
                hit_new |= gof_e_process(&m, &s, &p0).unwrap().e_value() >= 1.0 / ALPHA;
                let cells = [plus.as_slice(), minus.as_slice()].concat();
                hit_old |= dirichlet::log_e_mixture(&cells, &q0, &dirichlet::KAPPA_GRID)
                    >= (1.0 / ALPHA).ln();
            }
            e_new += usize::from(hit_new);
            e_old += usize::from(hit_old);
        }
        let rate = |k: usize, of: u32| k as f64 / f64::from(of);
        let (new, old) = (rate(new, runs), rate(old, runs));
        let (e_new, e_old) = (rate(e_new, runs / 4), rate(e_old, runs / 4));
        eprintln!(
            "{}: fixed-n power {new} (Sheffet {old}); sequential by n = 1e4 {e_new} (Dirichlet {e_old})",
            m.kind()
        );
        assert!(new >= old - 0.04, "fixed-n {new} vs {old}");
        assert!(e_new >= e_old - 0.04, "sequential {e_new} vs {e_old}");
    }
}

/// Reports to detection at the planner's example (docs/user-guide.md, "plan") (d = 16, ε = 1, uniform null,
/// `paninski:0.2`, α = 0.05, uniform rows, looks every fixed-n/50 reports, 200 streams),
/// for the row-conditioned e-process and the (row, sign) Dirichlet mixture it replaced.
/// Measured: median 45,423 (1.26× the fixed-n 36,061) against 59,843 (1.66×); `plan
/// --sequential` predicts 43,560 (1.21×). A measurement, not a check: run with
/// `cargo test -p ldpstream-engine --test row_conditioned -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement for docs/STATISTICS.md §10.1, not a check"]
fn hadamard_reports_to_detection() {
    let d = 16;
    let m = hadamard(d as u32);
    let p0 = vec![1.0 / d as f64; d];
    let h = "paninski:0.2"
        .parse::<crate::plan::Alternative>()
        .unwrap()
        .against(&p0)
        .unwrap();
    let q0 = null_report_law(&m, &p0).unwrap().unwrap();
    let uniform = vec![1.0 / 16.0; 16];
    let fixed = 36_061u64;
    let step = fixed / 50;
    for (what, old) in [("row-conditioned", false), ("(row, sign) Dirichlet", true)] {
        let mut rng = StdRng::seed_from_u64(9);
        let mut times: Vec<u64> = (0..200)
            .map(|_| {
                let (mut plus, mut minus) = (vec![0; 16], vec![0; 16]);
                let mut t = 0;
                while t < 4 * fixed {
                    t += step;
                    add_reports(&m, h.p1(), &uniform, step, &mut plus, &mut minus, &mut rng);
                    let log_e = if old {
                        let cells = [plus.as_slice(), minus.as_slice()].concat();
                        dirichlet::log_e_mixture(&cells, &q0, &dirichlet::KAPPA_GRID)
                    } else {
                        let s = Sketch::Signed(
                            SignedSketch::from_tables(plus.clone(), minus.clone()).unwrap(),
                        );
                        gof_e_process(&m, &s, &p0).unwrap().log_e
                    };
                    if log_e >= (1.0 / ALPHA).ln() {
                        return t;
                    }
                }
                4 * fixed
            })
            .collect();
        times.sort_unstable();
        let median = times[times.len() / 2];
        eprintln!(
            "{what}: median {median} ({:.2}× the fixed n {fixed})",
            median as f64 / fixed as f64
        );
    }
}

/// z-scores `(p̂_x − p_x)/s.e._x` of `datasets` datasets with rows weighted `rows`:
/// returns (largest |mean z| in s.e. of the mean, mean over x of var z, smallest and
/// largest var z over x).
fn estimate_z(
    m: &Mechanism,
    rows: &[f64],
    n: u64,
    datasets: usize,
    seed: u64,
) -> (f64, f64, f64, f64) {
    let p = skewed(m.domain());
    let mut rng = StdRng::seed_from_u64(seed);
    let d = p.len();
    let (mut sum, mut sum_sq) = (vec![0.0; d], vec![0.0; d]);
    for _ in 0..datasets {
        let e = m.estimate(&dataset(m, &p, rows, n, &mut rng)).unwrap();
        for x in 0..d {
            let z = (e.estimate[x] - p[x]) / e.std_error[x];
            sum[x] += z;
            sum_sq[x] += z * z;
        }
    }
    let k = datasets as f64;
    let mean_z = (0..d)
        .map(|x| (sum[x] / k).abs() * k.sqrt())
        .fold(0.0, f64::max);
    let vars: Vec<f64> = (0..d)
        .map(|x| sum_sq[x] / k - (sum[x] / k).powi(2))
        .collect();
    let lo = vars.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = vars.iter().copied().fold(0.0, f64::max);
    (mean_z, vars.iter().sum::<f64>() / d as f64, lo, hi)
}

/// The estimates condition on the rows too: with rows 4–7 thinned by 20% (Hadamard) or
/// rising 1→3 (cohort), each category's estimate is unbiased (mean z within 4 s.e. of
/// 0) and its standard error right (var z: its mean over the categories within ±10% of 1,
/// each within 0.6–1.5, the spread of 64 variances of 200 draws), over 1,000 datasets of
/// 10⁵ reports (200 at d = 64). Before, the plain `θ/(2η)` was biased under thinned rows.
#[test]
fn estimates_are_unbiased_with_unequal_rows() {
    for (name, m, rows) in [
        ("hadamard d=8", hadamard(8), thinned_rows(8)),
        ("cohort d=4 C=16", cohort(4, 16), rising_rows(16)),
        // Past EXACT_STRATA_WORK: the mean-variance standard errors.
        ("cohort d=64 C=4096", cohort(64, 4096), rising_rows(4096)),
    ] {
        let datasets = if m.domain() > 8 { 200 } else { 1000 };
        let (mean_z, var_z, lo, hi) = estimate_z(&m, &rows, 100_000, datasets, 41);
        eprintln!(
            "| {name} | max |mean z|·√k {mean_z:.2} | var z mean {var_z:.3}, range {lo:.3}–{hi:.3} |"
        );
        assert!(mean_z < 4.0, "{name}: mean z {mean_z} s.e. from 0");
        assert!((var_z - 1.0).abs() < 0.1, "{name}: mean var z {var_z}");
        assert!(lo > 0.6 && hi < 1.5, "{name}: var z {lo}–{hi}");
    }
}
