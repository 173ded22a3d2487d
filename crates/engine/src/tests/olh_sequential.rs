//! OLH's sequential test, the Gaussian mixture on the whitened support statistic given the
//! pool rows (docs/STATISTICS.md §10.1, `eprocess/olh_support.rs`): the statistic and the
//! planner's noncentrality against numpy, the level over many looks by seeded Monte Carlo
//! (report by report: a uniform pool index, then the row's bucket law), and reports to
//! detection at the planner's example against the fixed-n n and `plan --sequential`.
//!
//! CI runs small counts; the `#[ignore]`d runs (benches/oracles.sh) run the full ones.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::common::{olh_mechanism, olh_of};
use crate::eprocess::{crosses, gof_e_process_tuned, Design, SequentialState, Validity};
use crate::mechanism::{Mechanism, Olh};
use crate::plan::{
    required_n, sequential_detection, Alternative, Hypotheses, PlanMechanism, SequentialOptions,
};
use crate::sketch::{PoolSketch, Sketch};
use ldpstream_config::olh_default_g;

const ALPHA: f64 = 0.05;

fn olh(epsilon: f64, domain: u32, g: Option<u32>, pool_size: u32, pool_seed: u64) -> Mechanism {
    olh_mechanism(epsilon, domain, g, Some(pool_size), pool_seed)
}

/// Draws reports of type law `laws` (the rows' bucket laws `P_i`, S × g) into `table`:
/// the pool index from `rows` (cumulative weights; None: uniform), then the bucket.
struct Reporter {
    laws: Vec<f64>,
    g: usize,
    rows: Option<Vec<f64>>,
}

impl Reporter {
    fn new(m: &Olh, truth: &[f64], rows: Option<Vec<f64>>) -> Self {
        Reporter {
            laws: m.row_laws(truth),
            g: m.g() as usize,
            rows,
        }
    }

    fn add(&self, rng: &mut StdRng, count: u64, table: &mut [u64]) {
        let s = self.laws.len() / self.g;
        for _ in 0..count {
            let i = match &self.rows {
                None => rng.random_range(0..s),
                Some(cumulative) => {
                    let u: f64 = rng.random::<f64>() * cumulative[s - 1];
                    cumulative.partition_point(|&c| c <= u).min(s - 1)
                }
            };
            let law = &self.laws[i * self.g..(i + 1) * self.g];
            let mut u: f64 = rng.random();
            let mut y = self.g - 1;
            for (k, &pk) in law.iter().enumerate() {
                if u < pk {
                    y = k;
                    break;
                }
                u -= pk;
            }
            table[i * self.g + y] += 1;
        }
    }
}

fn sketch(g: usize, table: &[u64]) -> Sketch {
    Sketch::Pool(PoolSketch::from_table(g, table.to_vec()).unwrap())
}

/// d = 6, g = 3, S = 8, pool seed 5, ε = 1, p0 = (.3, .2, .15, .15, .1, .1), the table
/// `T[i, y] = 20 + (7i + 5y) mod 11` (n = 605). numpy builds Σ̄ from each row's exact
/// covariance `Σ_y P_i(y) z_y z_yᵀ − m_i m_iᵀ` (not from B − MMᵀ as the engine does):
/// ```python
/// # pool and buckets as docs/STATISTICS.md §1.8; C[v,x] = mean_i [h_i v == h_i x]
/// u = np.linalg.solve(C, np.ones(d)); x = (Cs - E) / np.sqrt(n)
/// T = x @ np.linalg.solve(Sig, x) - (u @ x)**2 / (u @ Sig @ u)
/// ```
/// (the whole script: benches/RESULTS.md, "OLH's sequential test").
#[test]
fn the_whitened_statistic_matches_numpy() {
    let m = olh(1.0, 6, Some(3), 8, 5);
    let p0 = [0.3, 0.2, 0.15, 0.15, 0.1, 0.1];
    let table: Vec<u64> = (0..8u64)
        .flat_map(|i| (0..3u64).map(move |y| 20 + (7 * i + 5 * y) % 11))
        .collect();
    assert_eq!(table.iter().sum::<u64>(), 605);
    let (t, df) = olh_of(&m).sequential_statistic(&table, &p0).unwrap();
    assert_eq!(df, 5);
    assert!((t / 4.954_311_249_814_339 - 1.0).abs() < 1e-10, "{t}");
    // Below n = 1000 the asymptotic mixture holds e = 1; the record says "asymptotic".
    let e = gof_e_process_tuned(&m, &sketch(3, &table), &p0, None).unwrap();
    assert_eq!((e.log_e, e.validity), (0.0, Validity::Asymptotic));
}

/// The planner's λ per report for the whitened statistic with fresh hashes, against numpy
/// averaging each hash's exact support covariance over all g^d = 64 hash functions
/// (ε = 1, g = 4, d = 3, p0 = (.5, .3, .2), p1 = (.4, .35, .25)):
/// ```python
/// for h in itertools.product(range(g), repeat=d):
///     A = (h[:, None] == np.arange(g)).astype(float); P0 = q + (p - q) * A.T @ p0
///     Sig += A @ np.diag(P0) @ A.T - np.outer(A @ P0, A @ P0); drift += A @ (p - q) * A.T @ (p1 - p0)
/// lam = drift @ np.linalg.solve(Sig, drift) - (u @ drift)**2 / (u @ Sig @ u)   # u = C̄⁻¹1
/// ```
#[test]
fn the_planned_noncentrality_matches_numpy() {
    let h = Hypotheses::new(vec![0.5, 0.3, 0.2], vec![0.4, 0.35, 0.25]).unwrap();
    let lambda = PlanMechanism::Olh { epsilon: 1.0 }
        .sequential_unit_noncentrality(&h)
        .unwrap();
    assert!(
        (lambda / 0.003_296_308_777_705_466 - 1.0).abs() < 1e-12,
        "{lambda}"
    );
}

/// P(ever e ≥ 1/α) over `streams` null streams of `looks` looks of `step` reports each.
fn null_rate(
    m: &Mechanism,
    p0: &[f64],
    rows: Option<Vec<f64>>,
    cases: (usize, usize, u64),
    seed: u64,
) -> f64 {
    let (streams, looks, step) = cases;
    let o = olh_of(m);
    let (g, s) = (o.g() as usize, o.pool_size() as usize);
    let reporter = Reporter::new(o, p0, rows);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut rejects = 0usize;
    for _ in 0..streams {
        let mut table = vec![0u64; s * g];
        let mut seq = SequentialState::default();
        for _ in 0..looks {
            reporter.add(&mut rng, step, &mut table);
            let e = gof_e_process_tuned(m, &sketch(g, &table), p0, None).unwrap();
            assert_eq!(e.validity, Validity::Asymptotic);
            seq.observe(e.e_value(), ALPHA);
            if seq.rejected {
                break;
            }
        }
        rejects += usize::from(seq.rejected);
    }
    rejects as f64 / streams as f64
}

fn assert_level(label: &str, rate: f64, streams: usize) {
    let bound = ALPHA + 2.0 * (ALPHA * (1.0 - ALPHA) / streams as f64).sqrt();
    eprintln!("| {label} | {streams} | {rate:.4} | {bound:.4} |");
    assert!(rate <= bound, "{label}: P(ever reject) {rate} > {bound}");
}

fn skewed(d: usize) -> Vec<f64> {
    let total = (d * (d + 1) / 2) as f64;
    (0..d).map(|j| (d - j) as f64 / total).collect()
}

/// CI size: 400 null streams × 150 looks of 100 reports (to n = 15,000), d = 8, ε = 1,
/// S = 64, a skewed null; and rows drawn unevenly (the pool's first half twice as often),
/// which the conditional mean absorbs.
#[test]
fn the_level_holds_over_150_looks() {
    let m = olh(1.0, 8, None, 64, 3);
    let p0 = skewed(8);
    let streams = 400;
    let rate = null_rate(&m, &p0, None, (streams, 150, 100), 31);
    assert_level("olh d=8 ε=1 S=64, uniform rows", rate, streams);
    let cumulative: Vec<f64> = (0..64)
        .scan(0.0, |sum, i| {
            *sum += if i < 32 { 2.0 } else { 1.0 };
            Some(*sum)
        })
        .collect();
    let rate = null_rate(&m, &p0, Some(cumulative), (streams, 150, 100), 32);
    assert_level(
        "olh d=8 ε=1 S=64, first half of the rows 2× as likely",
        rate,
        streams,
    );
}

/// The issue's sizes (benches/oracles.sh): the default pool (S = 1,024), 2,000 null
/// streams × 500 looks of 100 reports at d = 16 (ε = 1 and 2), and 500 × 200 looks of 500
/// reports at d = 256 (ε = 2).
#[test]
#[ignore = "benches/oracles.sh: the level at the default pool over 500 looks"]
fn the_level_holds_at_the_default_pool() {
    for (epsilon, d, cases) in [
        (1.0, 16u32, (2000, 500, 100)),
        (2.0, 16, (2000, 500, 100)),
        (2.0, 256, (500, 200, 500)),
    ] {
        let m = olh(epsilon, d, None, 1024, 0);
        let p0 = skewed(d as usize);
        let rate = null_rate(&m, &p0, None, cases, 33);
        assert_level(&format!("olh d={d} ε={epsilon} S=1024"), rate, cases.0);
    }
}

/// The planner's example (d = 16, ε = 1, uniform null, `paninski:0.2`).
fn planner_default() -> Hypotheses {
    Alternative::Paninski { distance: 0.2 }
        .against(&[1.0 / 16.0; 16])
        .unwrap()
}

/// Median reports to detection over the fixed-n n for power 0.8 of `streams` alternative
/// streams at the planner's example on the default pool (S = 1,024, seed 0), looked at
/// every fixed-n/50 reports up to 10× the fixed-n n; the mixture tuned to `design_n` =
/// that n when `tuned`.
fn detection(streams: usize, tuned: bool, seed: u64) -> f64 {
    let h = planner_default();
    let epsilon = 1.0;
    let fixed_n = required_n(PlanMechanism::Olh { epsilon }, &h, ALPHA, 0.8).unwrap();
    let m = olh(epsilon, 16, None, 1024, 0);
    let o = olh_of(&m);
    let g = olh_default_g(epsilon) as usize;
    let reporter = Reporter::new(o, h.p1(), None);
    let design = tuned.then_some(Design {
        n: fixed_n,
        alpha: ALPHA,
    });
    let step = fixed_n / 50;
    let mut rng = StdRng::seed_from_u64(seed);
    let mut times: Vec<u64> = (0..streams)
        .map(|_| {
            let mut table = vec![0u64; 1024 * g];
            let mut n = 0;
            loop {
                reporter.add(&mut rng, step, &mut table);
                n += step;
                let e = gof_e_process_tuned(&m, &sketch(g, &table), h.p0(), design).unwrap();
                if crosses(e.e_value(), ALPHA) || n >= 10 * fixed_n {
                    break n;
                }
            }
        })
        .collect();
    times.sort_unstable();
    let median = times[streams / 2] as f64 / fixed_n as f64;
    eprintln!("| olh d=16 ε=1 paninski:0.2 S=1024, design_n {tuned} | {fixed_n} | {median:.3}× |");
    median
}

/// The issue's target: median detection at most 1.5× the fixed-n n (it was about 15× on
/// the S·g cells), and `plan --sequential` predicts it within 10% at the same look
/// spacing (the plan assumes fresh hashes; the measurement is one fixed pool).
#[test]
fn detection_is_within_one_and_a_half_fixed_n() {
    let h = planner_default();
    let mechanism = PlanMechanism::Olh { epsilon: 1.0 };
    let fixed_n = required_n(mechanism, &h, ALPHA, 0.8).unwrap();
    for tuned in [false, true] {
        let measured = detection(300, tuned, 41);
        let options = SequentialOptions {
            look_every: Some(fixed_n / 50),
            design: tuned,
        };
        let planned = sequential_detection(mechanism, &h, ALPHA, 0.8, 1, options).unwrap();
        let predicted = planned.median / fixed_n as f64;
        eprintln!("| olh design_n {tuned} | plan {predicted:.3}× | e-process {measured:.3}× |");
        assert!(
            measured <= 1.5,
            "design {tuned}: median detection {measured}× the fixed-n n"
        );
        assert!(
            (predicted / measured - 1.0).abs() <= 0.10,
            "design {tuned}: plan {predicted} vs measured {measured}"
        );
    }
}

/// The same at the issue's 1,000 streams.
#[test]
#[ignore = "benches/oracles.sh: detection over 1,000 streams"]
fn detection_over_1000_streams() {
    for tuned in [false, true] {
        let ratio = detection(1000, tuned, 42);
        assert!(ratio <= 1.5, "design {tuned}: {ratio}×");
    }
}
