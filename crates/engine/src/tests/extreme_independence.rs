//! LocalBitFlipIND and LocalNoiseIND at the ends of the privacy parameters the config
//! accepts: from sketches the real randomizers produced under a product law, the statistic
//! is finite, its p-value is in [0, 1], and the decision `evaluate` makes keeps about its
//! level: a table with less than one report's worth of signal about the marginals, or an
//! expected cell of at most 5, is inconclusive (never a rejection).

use crate::mechanism::{simulate_sketch, Mechanism};
use crate::sketch::Sketch;
use crate::stats::{local_bitflip_ind, local_noise_ind, marginal_information};
use ldpstream_config::{MechanismConfig, MAX_EPSILON, MAX_RHO, MIN_EPSILON, MIN_RHO};
use rand::rngs::StdRng;
use rand::SeedableRng;

const RUNS: u32 = 200;
const N: usize = 2000;
/// A 2×2 product law, flattened row-major.
const PRODUCT: [f64; 4] = [0.42, 0.18, 0.28, 0.12];

fn check(what: &str, statistic: f64, p: Option<f64>) -> bool {
    assert!(
        statistic.is_finite() && statistic >= -1e-9,
        "{what}: T = {statistic}"
    );
    let p = p.unwrap_or_else(|| panic!("{what}: no p-value"));
    assert!((0.0..=1.0).contains(&p), "{what}: p = {p}");
    p < 0.05
}

/// The rule `evaluate` applies before a rejection counts (hypothesis.rs, `independence`).
fn decides(m: &Mechanism, n: u64, min_expected: f64) -> bool {
    marginal_information(m, n).is_none_or(|i| i >= 1.0) && min_expected > 5.0
}

fn rho_or_eps_is_ordinary(what: &str) -> bool {
    what.ends_with("= 1") || what.ends_with("= 30") || what.ends_with("= 1000")
}

/// At most 24 rejections in 200 runs at α = 0.05 (mean 10, sd 3.1).
fn check_size(what: &str, rejections: u32) {
    assert!(rejections <= 24, "{what}: {rejections}/{RUNS} rejected");
}

#[test]
fn local_bitflip_ind_at_extreme_epsilon() {
    let mut rng = StdRng::seed_from_u64(31);
    for eps in [MIN_EPSILON, 1e-3, 1.0, 30.0, 60.0, MAX_EPSILON] {
        let m = Mechanism::from_config(&MechanismConfig::Bitflip {
            epsilon: eps,
            domain: 4,
        })
        .unwrap();
        let Mechanism::BitFlip(bf) = &m else {
            unreachable!()
        };
        let what = format!("LocalBitFlipIND at ε = {eps}");
        let (mut rejections, mut undecided) = (0, 0);
        for _ in 0..RUNS {
            let Sketch::Bits(s) = simulate_sketch(&m, &PRODUCT, N, &mut rng).unwrap() else {
                unreachable!()
            };
            let out = local_bitflip_ind(bf, 2, 2, s.bit_counts(), s.n());
            let decides = decides(&m, s.n(), out.min_expected);
            rejections +=
                u32::from(check(&what, out.decision.statistic, out.decision.p_value) && decides);
            undecided += u32::from(!decides);
        }
        check_size(&what, rejections);
        // Where the test has information it decides: inconclusive only at the tiny end.
        if rho_or_eps_is_ordinary(&what) {
            assert_eq!(undecided, 0, "{what}: {undecided} inconclusive");
        }
    }
}

#[test]
fn local_noise_ind_at_extreme_rho() {
    let mut rng = StdRng::seed_from_u64(32);
    for rho in [MIN_RHO, 1e-3, 1.0, 1e3, MAX_RHO] {
        let m = Mechanism::from_config(&MechanismConfig::Gauss {
            rho,
            domain: 4,
            max_abs: None,
        })
        .unwrap();
        let Mechanism::Noise(noise) = &m else {
            unreachable!()
        };
        let what = format!("LocalNoiseIND at ρ = {rho}");
        let (mut rejections, mut undecided) = (0, 0);
        for _ in 0..RUNS {
            let Sketch::Sums(s) = simulate_sketch(&m, &PRODUCT, N, &mut rng).unwrap() else {
                unreachable!()
            };
            let out = local_noise_ind(noise, 2, 2, &s.sums_f64(), s.n());
            let decides = decides(&m, s.n(), out.min_expected);
            rejections +=
                u32::from(check(&what, out.decision.statistic, out.decision.p_value) && decides);
            undecided += u32::from(!decides);
        }
        check_size(&what, rejections);
        // Where the test has information it decides: inconclusive only at the tiny end.
        if rho_or_eps_is_ordinary(&what) {
            assert_eq!(undecided, 0, "{what}: {undecided} inconclusive");
        }
    }
}
