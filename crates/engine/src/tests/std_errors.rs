//! The reported standard errors against the empirical spread of the estimates: for every
//! mechanism, 1000 datasets of n = 2000 reports drawn and privatized by the real
//! randomizers. No formula is shared with the engine, so a wrong variance formula (or a
//! debiasing that is off by a constant) shows.

use crate::mechanism::{simulate_sketch, Mechanism};
use ldpstream_config::MechanismConfig;
use rand::rngs::StdRng;
use rand::SeedableRng;

const P: [f64; 4] = [0.4, 0.3, 0.2, 0.1];
const RUNS: usize = 1000;
const N: usize = 2000;

/// Per category: the standard deviation of the estimates over the runs, the mean of the
/// reported standard errors, and the mean estimate.
fn spread(config: &MechanismConfig, seed: u64) -> Vec<(f64, f64, f64)> {
    let m = Mechanism::from_config(config).unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut estimates = vec![Vec::with_capacity(RUNS); P.len()];
    let mut reported = vec![0.0; P.len()];
    for _ in 0..RUNS {
        let sketch = simulate_sketch(&m, &P, N, &mut rng).unwrap();
        let e = m.estimate(&sketch).unwrap();
        for j in 0..P.len() {
            estimates[j].push(e.estimate[j]);
            reported[j] += e.std_error[j] / RUNS as f64;
        }
    }
    estimates
        .iter()
        .zip(reported)
        .map(|(xs, se)| {
            let mean = xs.iter().sum::<f64>() / RUNS as f64;
            let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (RUNS - 1) as f64;
            (var.sqrt(), se, mean)
        })
        .collect()
}

/// The sample SD of 1000 near-normal estimates has a relative standard error of
/// 1/√(2·999) ≈ 2.2%: the mean reported standard error must be within 8% (3.5 of those),
/// and the mean estimate within 4 standard errors of the mean of p.
#[test]
fn reported_standard_errors_match_the_empirical_spread() {
    let configs = [
        MechanismConfig::Grr {
            epsilon: 1.0,
            domain: 4,
        },
        MechanismConfig::Bitflip {
            epsilon: 1.0,
            domain: 4,
        },
        MechanismConfig::Gauss {
            rho: 0.5,
            domain: 4,
            max_abs: None,
        },
        MechanismConfig::Laplace {
            epsilon: 1.0,
            domain: 4,
            max_abs: None,
        },
        MechanismConfig::Hadamard {
            epsilon: 1.0,
            domain: 4,
        },
        MechanismConfig::Cohort {
            epsilon: 1.0,
            domain: 4,
            cohorts: 32,
            seed: 3,
        },
        MechanismConfig::Matrix {
            matrix: vec![
                vec![0.5, 0.2, 0.2, 0.1],
                vec![0.2, 0.5, 0.2, 0.1],
                vec![0.2, 0.2, 0.5, 0.1],
                vec![0.1, 0.1, 0.1, 0.7],
            ],
        },
        MechanismConfig::Raw { domain: 4 },
    ];
    for (i, config) in configs.iter().enumerate() {
        for (j, (sd, se, mean)) in spread(config, 100 + i as u64).into_iter().enumerate() {
            let ratio = se / sd;
            assert!(
                (0.92..=1.08).contains(&ratio),
                "{config:?}[{j}]: reported se {se}, empirical sd {sd}"
            );
            assert!(
                (mean - P[j]).abs() <= 4.0 * sd / (RUNS as f64).sqrt(),
                "{config:?}[{j}]: mean estimate {mean}"
            );
        }
    }
}
