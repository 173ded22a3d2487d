//! Seeded Monte Carlo checks that every identity test's type I error is its nominal α:
//! 2000 null datasets of n = 5000 reports each, privatized by the real randomizers and
//! folded by the real kernels; the rejection rate at α = 0.05 must lie in [0.035, 0.065].

use crate::mechanism::{simulate_sketch, Mechanism};
use crate::sketch::Sketch;
use crate::stats::{run_gof, GofParams};
use ldpstream_config::{Calibration, MechanismConfig, TestMethod};
use rand::rngs::StdRng;
use rand::SeedableRng;

const RUNS: u32 = 2000;
const N: usize = 5000;
const ALPHA: f64 = 0.05;

/// Draws n true values from `p`, privatizes and folds them.
fn dataset(m: &Mechanism, p: &[f64], n: usize, rng: &mut StdRng) -> Sketch {
    simulate_sketch(m, p, n, rng).unwrap()
}

fn rejection_rate(
    config: MechanismConfig,
    method: TestMethod,
    p0: &[f64],
    calibration: Calibration,
    mc_samples: u32,
    seed: u64,
) -> f64 {
    let m = Mechanism::from_config(&config).unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut rejections = 0;
    for run in 0..RUNS {
        let sketch = dataset(&m, p0, N, &mut rng);
        let params = GofParams {
            method,
            p0,
            alpha: ALPHA,
            calibration,
            mc_samples,
            seed: seed ^ u64::from(run),
            distance: None,
        };
        if run_gof(&m, &sketch, &params).unwrap().reject {
            rejections += 1;
        }
    }
    f64::from(rejections) / f64::from(RUNS)
}

fn assert_size(what: &str, rate: f64) {
    eprintln!("{what}: rejection rate {rate} at alpha {ALPHA}");
    assert!(
        (0.035..=0.065).contains(&rate),
        "{what}: type I error {rate}"
    );
}

const P4: [f64; 4] = [0.4, 0.3, 0.2, 0.1];

#[test]
fn local_bitflip_gof_size() {
    let p0 = [0.3, 0.2, 0.2, 0.1, 0.1, 0.1];
    let rate = rejection_rate(
        MechanismConfig::Bitflip {
            epsilon: 1.0,
            domain: 6,
        },
        TestMethod::LocalBitFlipGOF,
        &p0,
        Calibration::Asymptotic,
        0,
        1,
    );
    assert_size("LocalBitFlipGOF", rate);
}

#[test]
fn local_noise_gof_gauss_size() {
    let rate = rejection_rate(
        MechanismConfig::Gauss {
            rho: 0.5,
            domain: 4,
            max_abs: None,
        },
        TestMethod::LocalNoiseGOF,
        &P4,
        Calibration::Asymptotic,
        0,
        2,
    );
    assert_size("LocalNoiseGOF (gauss)", rate);
}

#[test]
fn local_noise_gof_laplace_size() {
    // The critical value is always simulated for Laplace noise (m = 199 > 1/α).
    let rate = rejection_rate(
        MechanismConfig::Laplace {
            epsilon: 1.0,
            domain: 4,
            max_abs: None,
        },
        TestMethod::LocalNoiseGOF,
        &P4,
        Calibration::Asymptotic,
        199,
        3,
    );
    assert_size("LocalNoiseGOF (laplace, Monte Carlo critical value)", rate);
}

#[test]
fn sheffet_chi2_hadamard_size() {
    let p0 = [0.3, 0.2, 0.2, 0.1, 0.1, 0.1];
    let rate = rejection_rate(
        MechanismConfig::Hadamard {
            epsilon: 1.0,
            domain: 6,
        },
        TestMethod::SheffetChi2,
        &p0,
        Calibration::Asymptotic,
        0,
        4,
    );
    assert_size("SheffetChi2 (hadamard)", rate);
}

#[test]
fn sheffet_chi2_cohort_size() {
    let config = MechanismConfig::Cohort {
        epsilon: 1.0,
        domain: 4,
        cohorts: 16,
        seed: 5,
    };
    let rate = rejection_rate(
        config,
        TestMethod::SheffetChi2,
        &P4,
        Calibration::Asymptotic,
        0,
        5,
    );
    assert_size("SheffetChi2 (cohort)", rate);
}

#[test]
fn channel_and_pearson_size() {
    let g = vec![
        vec![0.6, 0.3, 0.2],
        vec![0.3, 0.4, 0.3],
        vec![0.1, 0.3, 0.5],
    ];
    let rate = rejection_rate(
        MechanismConfig::Matrix { matrix: g },
        TestMethod::ChannelGOF,
        &[0.5, 0.3, 0.2],
        Calibration::Asymptotic,
        0,
        6,
    );
    assert_size("ChannelGOF", rate);
    let rate = rejection_rate(
        MechanismConfig::Raw { domain: 4 },
        TestMethod::PearsonGOF,
        &P4,
        Calibration::Asymptotic,
        0,
        7,
    );
    assert_size("PearsonGOF", rate);
}

#[test]
fn monte_carlo_calibration_size() {
    // Any test can be calibrated by simulating null sketches; its MC p-value must be
    // valid too. Small n, where the asymptotic law is at its weakest.
    let m = Mechanism::from_config(&MechanismConfig::Bitflip {
        epsilon: 1.0,
        domain: 4,
    })
    .unwrap();
    let mut rng = StdRng::seed_from_u64(8);
    let mut rejections = 0;
    for run in 0..RUNS {
        let sketch = dataset(&m, &P4, 300, &mut rng);
        let params = GofParams {
            method: TestMethod::LocalBitFlipGOF,
            p0: &P4,
            alpha: ALPHA,
            calibration: Calibration::MonteCarlo,
            mc_samples: 99,
            seed: u64::from(run),
            distance: None,
        };
        let r = run_gof(&m, &sketch, &params).unwrap();
        if r.mc_p_value.unwrap() <= ALPHA {
            rejections += 1;
        }
    }
    assert_size(
        "Monte Carlo p-value (LocalBitFlipGOF, n = 300)",
        f64::from(rejections) / f64::from(RUNS),
    );
}

/// `calibration = "monte_carlo"` must change the decision itself. GenRR at ε = 4 with
/// d = 20, a geometric null p0_j ∝ 0.6^j and n = 30 reports (smallest expected report count
/// 0.41): there the χ² law is wrong and the asymptotic test rejects about 7.9% of null
/// datasets (numpy, 20 000 runs), while the Monte Carlo test (m = 199) rejects about 5%.
/// `reject` is counted, not the MC p-value, and the asymptotic p-value kept beside it must
/// still show the asymptotic test's excess.
#[test]
fn monte_carlo_calibration_decides() {
    let d = 20usize;
    let weights: Vec<f64> = (0..d).map(|j| 0.6f64.powi(j as i32)).collect();
    let total: f64 = weights.iter().sum();
    let p0: Vec<f64> = weights.iter().map(|w| w / total).collect();
    let m = Mechanism::from_config(&MechanismConfig::Grr {
        epsilon: 4.0,
        domain: d as u32,
    })
    .unwrap();
    let mut rng = StdRng::seed_from_u64(12);
    let (mut mc_rejects, mut asymptotic_rejects) = (0u32, 0u32);
    for run in 0..RUNS {
        let sketch = dataset(&m, &p0, 30, &mut rng);
        let params = GofParams {
            method: TestMethod::LocalExpGOF,
            p0: &p0,
            alpha: ALPHA,
            calibration: Calibration::MonteCarlo,
            mc_samples: 199,
            seed: 1000 + u64::from(run),
            distance: None,
        };
        let r = run_gof(&m, &sketch, &params).unwrap();
        assert_eq!(r.p_value, r.mc_p_value);
        mc_rejects += u32::from(r.reject);
        asymptotic_rejects += u32::from(r.asymptotic_p_value.unwrap() < ALPHA);
    }
    let asymptotic = f64::from(asymptotic_rejects) / f64::from(RUNS);
    assert!(asymptotic > 0.065, "asymptotic size {asymptotic}");
    assert_size(
        "reject under Monte Carlo calibration (LocalExpGOF, n = 30)",
        f64::from(mc_rejects) / f64::from(RUNS),
    );
}

/// SheffetTV is a decision rule, not a level-α test: with enough reports for its distance
/// (Thm 11) it almost never rejects the null and almost always rejects a far alternative.
#[test]
fn sheffet_tv_separates_null_from_far() {
    let m = Mechanism::from_config(&MechanismConfig::Hadamard {
        epsilon: 1.0,
        domain: 4,
    })
    .unwrap();
    let mut rng = StdRng::seed_from_u64(9);
    let far = [0.1, 0.2, 0.3, 0.4];
    let (mut null_rejects, mut far_rejects) = (0, 0);
    for _ in 0..1000 {
        for (p, counter) in [(&P4, &mut null_rejects), (&far, &mut far_rejects)] {
            let sketch = dataset(&m, p, 20_000, &mut rng);
            let params = GofParams {
                method: TestMethod::SheffetTV,
                p0: &P4,
                alpha: ALPHA,
                calibration: Calibration::Asymptotic,
                mc_samples: 0,
                seed: 0,
                distance: Some(0.2),
            };
            if run_gof(&m, &sketch, &params).unwrap().reject {
                *counter += 1;
            }
        }
    }
    assert!(null_rejects <= 50, "null rejected {null_rejects}/1000");
    assert!(
        far_rejects >= 950,
        "far alternative rejected only {far_rejects}/1000"
    );
}

/// Sheffet's experiment 1 (seed 000 §4.2): under the null with T = 10, n = 1000,
/// ε = 0.25, the mean of P(θ) over 2000 runs is within 3% of T.
#[test]
fn sheffet_experiment_1_mean_statistic() {
    let d = 10;
    let m = Mechanism::from_config(&MechanismConfig::Hadamard {
        epsilon: 0.25,
        domain: d,
    })
    .unwrap();
    let p0 = vec![0.1; d as usize];
    let mut rng = StdRng::seed_from_u64(10);
    let mut total = 0.0;
    for _ in 0..2000 {
        let sketch = dataset(&m, &p0, 1000, &mut rng);
        total += crate::stats::gof_statistic(&m, TestMethod::SheffetChi2, &sketch, &p0)
            .unwrap()
            .statistic;
    }
    let mean = total / 2000.0;
    assert!((mean - 10.0).abs() <= 0.3, "mean P(θ) = {mean}");
}
