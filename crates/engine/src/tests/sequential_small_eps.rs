//! Issue 31 defect 1: the independence and two-sample e-processes at small ε. Their
//! plug-in marginals (independence) and pooled law (two-sample) are estimated from
//! reports that carry almost no signal at small ε, so the Gaussian mixture is valid only
//! once the reports carry enough information, not once n ≥ 1000. Seeded Monte Carlo:
//! G null groups × 40 looks of 1,000 reports each, 3 × 4 tables (independence) and d = 12
//! (two-sample), at ε ∈ {1e-9, 0.03, 0.25, 1}; P(ever e ≥ 1/α) must be at most α + 2 SE.
//!
//! `cargo test -p ldpstream-engine --test sequential_small_eps -- --nocapture` prints the
//! table; `benches/sequential_small_eps.sh` runs it with 500 groups.

use crate::eprocess::{independence_e_process, two_sample_e_process, SequentialState};
use crate::mechanism::{BitFlip, Grr, Mechanism};
use crate::sketch::{BitSketch, CountSketch, Sketch};
use crate::stats::sample_multinomial;
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Binomial, Distribution};

const ALPHA: f64 = 0.05;
const LOOKS: usize = 40;
const STEP: u64 = 1000;
const EPSILONS: [f64; 4] = [1e-9, 0.03, 0.25, 1.0];

/// Groups per case: `LDPSTREAM_SEQ_GROUPS` (the bench script sets 500), else 100 (CI).
fn groups() -> usize {
    std::env::var("LDPSTREAM_SEQ_GROUPS")
        .ok()
        .and_then(|g| g.parse().ok())
        .unwrap_or(100)
}

fn outer(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter()
        .flat_map(|x| b.iter().map(move |y| x * y))
        .collect()
}

fn null_law() -> Vec<f64> {
    outer(&[0.2, 0.3, 0.5], &[0.1, 0.2, 0.3, 0.4])
}

fn binomial(rng: &mut StdRng, n: u64, p: f64) -> u64 {
    if n == 0 {
        return 0;
    }
    Binomial::new(n, p).unwrap().sample(rng)
}

/// Reports of one look: a GenRR count table, or a bit-flip bit-count vector.
#[derive(Clone, Copy)]
enum Kind {
    Grr,
    BitFlip,
}

fn mechanism(kind: Kind, eps: f64) -> Mechanism {
    match kind {
        Kind::Grr => Mechanism::Grr(Grr::new(eps, 12).unwrap()),
        Kind::BitFlip => Mechanism::BitFlip(BitFlip::new(eps, 12).unwrap()),
    }
}

/// Adds `STEP` reports of true types drawn from `p` to `counts`.
fn advance(m: &Mechanism, p: &[f64], counts: &mut [u64], rng: &mut StdRng) {
    match m {
        Mechanism::Grr(g) => {
            let inc = sample_multinomial(rng, STEP, &g.report_law(p)).unwrap();
            counts.iter_mut().zip(inc).for_each(|(a, b)| *a += b);
        }
        Mechanism::BitFlip(b) => {
            let types = sample_multinomial(rng, STEP, p).unwrap();
            for (j, &mj) in types.iter().enumerate() {
                counts[j] +=
                    binomial(rng, mj, b.keep_probability()) + binomial(rng, STEP - mj, b.flip());
            }
        }
        _ => unreachable!(),
    }
}

fn sketch(m: &Mechanism, counts: &[u64], n: u64) -> Sketch {
    match m {
        Mechanism::Grr(_) => Sketch::Counts(CountSketch::from_counts(counts.to_vec())),
        _ => Sketch::Bits(BitSketch::from_counts(counts.to_vec(), n).unwrap()),
    }
}

/// P(ever e ≥ 1/α) over `groups()` null groups of `LOOKS` looks.
fn ever_rejects(kind: Kind, eps: f64, two_sample: bool, seed: u64) -> f64 {
    let m = mechanism(kind, eps);
    let p = null_law();
    let mut rng = StdRng::seed_from_u64(seed);
    let g = groups();
    let mut rejected = 0usize;
    for _ in 0..g {
        let (mut a, mut b) = (vec![0u64; 12], vec![0u64; 12]);
        let mut state = SequentialState::default();
        for look in 1..=LOOKS as u64 {
            advance(&m, &p, &mut a, &mut rng);
            let e = if two_sample {
                advance(&m, &p, &mut b, &mut rng);
                let n = look * STEP;
                two_sample_e_process(&m, &sketch(&m, &a, n), &sketch(&m, &b, n))
            } else {
                independence_e_process(&m, &sketch(&m, &a, look * STEP), 3, 4)
            };
            state.observe(e.unwrap().e_value(), ALPHA);
            if state.rejected {
                break;
            }
        }
        rejected += usize::from(state.rejected);
    }
    rejected as f64 / g as f64
}

fn check(name: &str, kind: Kind, two_sample: bool, seed: u64) {
    let g = groups() as f64;
    let bound = ALPHA + 2.0 * (ALPHA * (1.0 - ALPHA) / g).sqrt();
    let mut failures = Vec::new();
    for (i, eps) in EPSILONS.into_iter().enumerate() {
        let rate = ever_rejects(kind, eps, two_sample, seed + i as u64);
        eprintln!("| {name} | ε = {eps:e} | {rate:.4} | bound {bound:.4} |");
        if rate > bound {
            failures.push(format!("ε = {eps:e}: {rate}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{name}: P(ever reject) > {bound}: {failures:?}"
    );
}

#[test]
fn independence_grr_small_epsilon_holds_its_level() {
    check("independence grr 3×4", Kind::Grr, false, 100);
}

#[test]
fn independence_bitflip_small_epsilon_holds_its_level() {
    check("independence bitflip 3×4", Kind::BitFlip, false, 200);
}

#[test]
fn two_sample_grr_small_epsilon_holds_its_level() {
    check("two_sample grr d=12", Kind::Grr, true, 300);
}

#[test]
fn two_sample_bitflip_small_epsilon_holds_its_level() {
    check("two_sample bitflip d=12", Kind::BitFlip, true, 400);
}
