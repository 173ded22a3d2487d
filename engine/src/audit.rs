//! Privacy audit: the exact law of each randomizer's output from the implementation's own
//! parameters, its worst-case privacy loss, and an empirical lower bound on ε from sampling
//! the real randomizer.
//!
//! Continuous reports (Gauss, Laplace) are audited through a fixed binning of coordinate 0,
//! whose exact bin probabilities come from the noise CDF: post-processing cannot raise the
//! privacy loss, so the binned loss must also stay within ε.

use rand::Rng;
use statrs::distribution::{Beta, ContinuousCDF, Normal};

use crate::error::EngineError;
use crate::mechanism::{Hadamard, Mechanism, NoiseKind};

/// Bit-flip audits enumerate all 2^d reports; beyond this d they are refused.
pub const MAX_BITFLIP_AUDIT_DOMAIN: u32 = 12;

/// Bin edges on coordinate 0 of a noise report (open-ended first and last bins).
pub const NOISE_BIN_EDGES: [f64; 9] = [-3.0, -2.0, -1.0, -0.25, 0.5, 1.25, 2.0, 3.0, 4.0];

/// `law[s][x] = P(output s | input x)` over an enumeration of the outputs.
#[derive(Debug, Clone, PartialEq)]
pub struct TransitionMatrix {
    pub law: Vec<Vec<f64>>,
}

impl TransitionMatrix {
    pub fn outputs(&self) -> usize {
        self.law.len()
    }

    /// `max_{s,x,x'} ln P(s|x)/P(s|x')` (infinite if some output is possible for one input
    /// and impossible for another).
    pub fn privacy_loss(&self) -> f64 {
        self.law
            .iter()
            .map(|row| {
                let hi = row.iter().cloned().fold(0.0, f64::max);
                let lo = row.iter().cloned().fold(f64::INFINITY, f64::min);
                if hi == 0.0 {
                    0.0
                } else {
                    (hi / lo).ln()
                }
            })
            .fold(0.0, f64::max)
    }
}

fn bin_of(v: f64) -> usize {
    NOISE_BIN_EDGES.iter().take_while(|&&e| v >= e).count()
}

fn noise_cdf(kind: NoiseKind, z: f64) -> Result<f64, EngineError> {
    Ok(match kind {
        NoiseKind::Gauss { rho } => Normal::new(0.0, (1.0 / rho).sqrt())
            .map_err(|e| EngineError::invalid("rho", rho, "a positive number").with_detail(e))?
            .cdf(z),
        NoiseKind::Laplace { epsilon } => {
            let b = 2.0 / epsilon;
            if z < 0.0 {
                0.5 * (z / b).exp()
            } else {
                1.0 - 0.5 * (-z / b).exp()
            }
        }
    })
}

/// The exact output law of `mechanism`, from its own parameters.
pub fn transition_matrix(mechanism: &Mechanism) -> Result<TransitionMatrix, EngineError> {
    let d = mechanism.domain();
    let law = match mechanism {
        Mechanism::Grr(m) => {
            let (rho, gamma) = (m.rho(), m.gamma());
            (0..d)
                .map(|s| {
                    (0..d)
                        .map(|x| rho + if s == x { gamma } else { 0.0 })
                        .collect()
                })
                .collect()
        }
        Mechanism::Raw { .. } => (0..d)
            .map(|s| (0..d).map(|x| if s == x { 1.0 } else { 0.0 }).collect())
            .collect(),
        Mechanism::Channel(m) => (0..m.signals())
            .map(|s| (0..d).map(|x| m.entry(s, x)).collect())
            .collect(),
        Mechanism::BitFlip(m) => {
            if m.domain() > MAX_BITFLIP_AUDIT_DOMAIN {
                return Err(EngineError::invalid(
                    "domain",
                    m.domain(),
                    "at most 12 for an exact bit-flip audit (2^d outputs)",
                ));
            }
            let keep = m.keep_probability();
            (0..1usize << d)
                .map(|z| {
                    (0..d)
                        .map(|x| {
                            (0..d)
                                .map(|j| {
                                    let bit = (z >> j) & 1 == 1;
                                    if bit == (j == x) {
                                        keep
                                    } else {
                                        1.0 - keep
                                    }
                                })
                                .product()
                        })
                        .collect()
                })
                .collect()
        }
        Mechanism::Hadamard(m) => {
            let k = m.rows() as usize;
            let keep = 1.0 / (1.0 + (-m.epsilon()).exp());
            (0..2 * k)
                .map(|s| {
                    let (j, sign) = (s / 2, if s % 2 == 0 { 1 } else { -1 });
                    (0..d)
                        .map(|x| {
                            let truth = Hadamard::entry(j as u32, x as u32);
                            (if truth == sign { keep } else { 1.0 - keep }) / k as f64
                        })
                        .collect()
                })
                .collect()
        }
        Mechanism::Cohort(m) => {
            let c = m.cohorts() as usize;
            let keep = 1.0 / (1.0 + (-m.epsilon()).exp());
            (0..2 * c)
                .map(|s| {
                    let (ci, sign) = (s / 2, if s % 2 == 0 { 1 } else { -1 });
                    (0..d)
                        .map(|x| {
                            let truth = m.sign(ci as u32, x as u32);
                            (if truth == sign { keep } else { 1.0 - keep }) / c as f64
                        })
                        .collect()
                })
                .collect()
        }
        Mechanism::Noise(m) => {
            let mut edges = vec![f64::NEG_INFINITY];
            edges.extend(NOISE_BIN_EDGES);
            edges.push(f64::INFINITY);
            edges
                .windows(2)
                .map(|w| {
                    (0..d)
                        .map(|x| {
                            let shift = if x == 0 { 1.0 } else { 0.0 };
                            Ok(noise_cdf(m.kind(), w[1] - shift)?
                                - noise_cdf(m.kind(), w[0] - shift)?)
                        })
                        .collect::<Result<Vec<f64>, EngineError>>()
                })
                .collect::<Result<Vec<_>, _>>()?
        }
    };
    Ok(TransitionMatrix { law })
}

/// Draws one report of `x` from the real randomizer and returns its index in the
/// enumeration of [`transition_matrix`].
pub fn sample_output<R: Rng + ?Sized>(
    mechanism: &Mechanism,
    x: u32,
    rng: &mut R,
) -> Result<usize, EngineError> {
    Ok(match mechanism {
        Mechanism::Grr(m) => m.randomize_with(x, rng)? as usize,
        Mechanism::Raw { domain } => {
            if x >= *domain {
                return Err(EngineError::InputOutOfDomain {
                    value: u64::from(x),
                    domain: u64::from(*domain),
                });
            }
            x as usize
        }
        Mechanism::Channel(m) => m.randomize_with(x, rng)? as usize,
        Mechanism::BitFlip(m) => m
            .randomize_with(x, rng)?
            .iter()
            .enumerate()
            .map(|(i, &b)| (b as usize) << (8 * i))
            .sum(),
        Mechanism::Hadamard(m) => {
            let (j, y) = m.randomize_with(x, rng)?;
            2 * j as usize + usize::from(y < 0)
        }
        Mechanism::Cohort(m) => {
            let (c, y) = m.randomize_with(x, rng)?;
            2 * c as usize + usize::from(y < 0)
        }
        Mechanism::Noise(m) => bin_of(m.randomize_with(x, rng)?[0]),
    })
}

/// What an audit found.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditReport {
    /// The ε the mechanism states (None for Gauss, which states ρ, and for raw).
    pub claimed_epsilon: Option<f64>,
    /// The exact worst-case loss of the (binned) output law.
    pub exact_loss: f64,
    /// The largest `ln(lower(P̂(s|x)) / upper(P̂(s|x')))` over all (s, x, x'), with 95%
    /// Clopper–Pearson bounds per proportion: with 95% confidence the true loss is at least
    /// this much.
    pub empirical_lower_bound: f64,
    /// The (output, x, x') attaining the bound.
    pub worst: (usize, usize, usize),
    pub samples_per_input: u64,
    /// Empirical output counts, `counts[x][s]`.
    pub counts: Vec<Vec<u64>>,
}

fn clopper_pearson(k: u64, n: u64, confidence: f64) -> Result<(f64, f64), EngineError> {
    let a = (1.0 - confidence) / 2.0;
    let (kf, nf) = (k as f64, n as f64);
    let beta = |p: f64, q: f64| {
        Beta::new(p, q)
            .map_err(|e| EngineError::invalid("beta", p, "positive shape").with_detail(e))
    };
    let lower = if k == 0 {
        0.0
    } else {
        beta(kf, nf - kf + 1.0)?.inverse_cdf(a)
    };
    let upper = if k == n {
        1.0
    } else {
        beta(kf + 1.0, nf - kf)?.inverse_cdf(1.0 - a)
    };
    Ok((lower, upper))
}

/// Samples `samples` reports for every input and bounds the privacy loss from below.
pub fn audit<R: Rng + ?Sized>(
    mechanism: &Mechanism,
    samples: u64,
    rng: &mut R,
) -> Result<AuditReport, EngineError> {
    let matrix = transition_matrix(mechanism)?;
    let d = mechanism.domain();
    let outputs = matrix.outputs();
    let mut counts = vec![vec![0u64; outputs]; d];
    for (x, row) in counts.iter_mut().enumerate() {
        for _ in 0..samples {
            row[sample_output(mechanism, x as u32, rng)?] += 1;
        }
    }
    let bounds: Vec<Vec<(f64, f64)>> = counts
        .iter()
        .map(|row| {
            row.iter()
                .map(|&k| clopper_pearson(k, samples, 0.95))
                .collect()
        })
        .collect::<Result<_, _>>()?;
    let mut best = (f64::NEG_INFINITY, (0, 0, 0));
    for (x, bx) in bounds.iter().enumerate() {
        for (y, by) in bounds.iter().enumerate() {
            if x == y {
                continue;
            }
            for (s, (&(lo, _), &(_, hi))) in bx.iter().zip(by).enumerate() {
                if lo > 0.0 && hi > 0.0 && (lo / hi).ln() > best.0 {
                    best = ((lo / hi).ln(), (s, x, y));
                }
            }
        }
    }
    Ok(AuditReport {
        claimed_epsilon: mechanism.privacy().epsilon,
        exact_loss: matrix.privacy_loss(),
        empirical_lower_bound: best.0.max(0.0),
        worst: best.1,
        samples_per_input: samples,
        counts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::chi2_sf;
    use ldpstream_config::MechanismConfig;
    use rand::SeedableRng;

    fn all_mechanisms() -> Vec<(MechanismConfig, Option<f64>)> {
        vec![
            (
                MechanismConfig::Grr {
                    epsilon: 1.0,
                    domain: 4,
                },
                Some(1.0),
            ),
            (
                MechanismConfig::Bitflip {
                    epsilon: 1.0,
                    domain: 4,
                },
                Some(1.0),
            ),
            (
                MechanismConfig::Laplace {
                    epsilon: 1.0,
                    domain: 4,
                },
                Some(1.0),
            ),
            (
                MechanismConfig::Gauss {
                    rho: 0.5,
                    domain: 4,
                },
                None,
            ),
            (
                MechanismConfig::Hadamard {
                    epsilon: 1.0,
                    domain: 4,
                },
                Some(1.0),
            ),
            (
                MechanismConfig::Cohort {
                    epsilon: 1.0,
                    domain: 4,
                    cohorts: 8,
                    seed: 11,
                },
                Some(1.0),
            ),
            (
                MechanismConfig::Matrix {
                    matrix: vec![
                        vec![0.6, 0.3, 0.2],
                        vec![0.3, 0.4, 0.3],
                        vec![0.1, 0.3, 0.5],
                    ],
                },
                Some((0.5f64 / 0.1).ln()),
            ),
        ]
    }

    /// The exact transition law respects the stated ε for every mechanism (within 1e-12),
    /// and is a distribution for every input.
    #[test]
    fn exact_loss_within_claimed_epsilon() {
        for (config, epsilon) in all_mechanisms() {
            let m = Mechanism::from_config(&config).unwrap();
            let t = transition_matrix(&m).unwrap();
            for x in 0..m.domain() {
                let total: f64 = t.law.iter().map(|row| row[x]).sum();
                assert!(
                    (total - 1.0).abs() < 1e-12,
                    "{config:?}: column {x} sums to {total}"
                );
            }
            match (epsilon, &m) {
                (Some(eps), _) => {
                    assert!(
                        t.privacy_loss() <= eps + 1e-12,
                        "{config:?}: loss {} > ε {eps}",
                        t.privacy_loss()
                    );
                    assert_eq!(m.privacy().epsilon, Some(eps));
                }
                (None, Mechanism::Noise(noise)) => {
                    // Gaussian mechanism: L2 sensitivity √2 and variance σ² give
                    // ρ = Δ²/(2σ²) = 1/σ²; the implementation's σ² must give the stated ρ.
                    let NoiseKind::Gauss { rho } = noise.kind() else {
                        unreachable!()
                    };
                    let implied = 2.0 / (2.0 * noise.variance());
                    assert!(
                        (implied - rho).abs() < 1e-12,
                        "implied ρ {implied} vs {rho}"
                    );
                    assert_eq!(m.privacy().rho, Some(rho));
                }
                _ => unreachable!(),
            }
        }
        // Raw reports are not locally private at all, and say so.
        let raw = Mechanism::from_config(&MechanismConfig::Raw { domain: 3 }).unwrap();
        assert!(transition_matrix(&raw)
            .unwrap()
            .privacy_loss()
            .is_infinite());
        assert_eq!(raw.privacy().epsilon, None);
    }

    /// 10⁶ reports per input from the real randomizer: a χ² test at α = 1e-6 does not
    /// reject that their law is the stated matrix. Catches code that differs from its math.
    #[test]
    fn sampled_law_matches_exact_law() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(99);
        let samples = 1_000_000u64;
        for (config, _) in all_mechanisms() {
            let m = Mechanism::from_config(&config).unwrap();
            let t = transition_matrix(&m).unwrap();
            for x in 0..m.domain() {
                let mut counts = vec![0u64; t.outputs()];
                for _ in 0..samples {
                    counts[sample_output(&m, x as u32, &mut rng).unwrap()] += 1;
                }
                let probs: Vec<f64> = t.law.iter().map(|row| row[x]).collect();
                let out = crate::stats::pearson_gof(&counts, &probs);
                let p = out.p_value.unwrap();
                assert!(p > 1e-6, "{config:?} x={x}: χ² = {} p = {p}", out.statistic);
                assert!(chi2_sf(out.df.unwrap(), out.statistic) > 1e-6);
            }
        }
    }

    #[test]
    fn empirical_bound_is_below_claim_and_near_it() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let m = Mechanism::from_config(&MechanismConfig::Grr {
            epsilon: 1.0,
            domain: 3,
        })
        .unwrap();
        let r = audit(&m, 200_000, &mut rng).unwrap();
        assert!(
            r.empirical_lower_bound <= 1.0 && r.empirical_lower_bound > 0.9,
            "{r:?}"
        );
        assert!((r.exact_loss - 1.0).abs() < 1e-12);
    }
}
