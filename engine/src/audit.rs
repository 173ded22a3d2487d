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
use crate::mechanism::{sign_keep, sign_lie, Hadamard, Mechanism, NoiseKind};

/// Bit-flip audits enumerate all 2^d reports; beyond this d they are refused.
pub const MAX_BITFLIP_AUDIT_DOMAIN: u32 = 12;

/// Bin edges on coordinate 0 of a noise report (open-ended first and last bins).
pub const NOISE_BIN_EDGES: [f64; 9] = [-3.0, -2.0, -1.0, -0.25, 0.5, 1.25, 2.0, 3.0, 4.0];

/// `law[s][x] = P(output s | input x)` over an enumeration of the outputs, and the same
/// law as logarithms (bit-flip outputs at large ε have probabilities below the smallest
/// double, whose ratios are still finite).
#[derive(Debug, Clone, PartialEq)]
pub struct TransitionMatrix {
    pub law: Vec<Vec<f64>>,
    pub log_law: Vec<Vec<f64>>,
}

impl TransitionMatrix {
    fn from_law(law: Vec<Vec<f64>>) -> Self {
        let log_law = law
            .iter()
            .map(|row| row.iter().map(|p| p.ln()).collect())
            .collect();
        TransitionMatrix { law, log_law }
    }

    fn from_log_law(log_law: Vec<Vec<f64>>) -> Self {
        let law = log_law
            .iter()
            .map(|row| row.iter().map(|l| l.exp()).collect())
            .collect();
        TransitionMatrix { law, log_law }
    }

    pub fn outputs(&self) -> usize {
        self.law.len()
    }

    /// `max_{s,x,x'} ln P(s|x)/P(s|x')` (infinite if some output is possible for one input
    /// and impossible for another), from the logarithms.
    pub fn privacy_loss(&self) -> f64 {
        self.log_law
            .iter()
            .map(|row| {
                let hi = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let lo = row.iter().cloned().fold(f64::INFINITY, f64::min);
                if hi == f64::NEG_INFINITY {
                    0.0
                } else {
                    hi - lo
                }
            })
            .fold(0.0, f64::max)
    }
}

fn bin_of(v: f64) -> usize {
    NOISE_BIN_EDGES.iter().take_while(|&&e| v >= e).count()
}

/// `ln P(lo ≤ Z < hi)` for one coordinate of the noise, computed without the cancellation
/// of a difference of CDFs near 1 and without underflow: at large ε a Laplace bin a few
/// units from the report has probability below the smallest double, yet a finite ratio.
fn noise_bin_log_probability(kind: NoiseKind, lo: f64, hi: f64) -> Result<f64, EngineError> {
    Ok(match kind {
        NoiseKind::Gauss { rho } => {
            let law = Normal::new(0.0, (1.0 / rho).sqrt()).map_err(|e| {
                EngineError::invalid("rho", rho, "a positive number").with_detail(e)
            })?;
            let p = if lo >= 0.0 {
                law.sf(lo) - law.sf(hi)
            } else {
                law.cdf(hi) - law.cdf(lo)
            };
            p.ln()
        }
        NoiseKind::Laplace { epsilon } => {
            let b = 2.0 / epsilon;
            // 1 − e^{−(hi−lo)/b}: the share of a one-sided exponential tail in the bin.
            let width = (-(-(hi - lo) / b).exp_m1()).ln();
            if lo >= 0.0 {
                0.5f64.ln() - lo / b + width
            } else if hi <= 0.0 {
                0.5f64.ln() + hi / b + width
            } else {
                (1.0 - 0.5 * (lo / b).exp() - 0.5 * (-hi / b).exp()).ln()
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
            let (keep, flip) = (m.keep_probability().ln(), m.flip().ln());
            let log_law = (0..1usize << d)
                .map(|z| {
                    (0..d)
                        .map(|x| {
                            (0..d)
                                .map(|j| {
                                    let bit = (z >> j) & 1 == 1;
                                    if bit == (j == x) {
                                        keep
                                    } else {
                                        flip
                                    }
                                })
                                .sum()
                        })
                        .collect()
                })
                .collect();
            return Ok(TransitionMatrix::from_log_law(log_law));
        }
        Mechanism::Hadamard(m) => {
            let k = m.rows() as usize;
            let (keep, lie) = (sign_keep(m.epsilon()), sign_lie(m.epsilon()));
            (0..2 * k)
                .map(|s| {
                    let (j, sign) = (s / 2, if s % 2 == 0 { 1 } else { -1 });
                    (0..d)
                        .map(|x| {
                            let truth = Hadamard::entry(j as u32, x as u32);
                            (if truth == sign { keep } else { lie }) / k as f64
                        })
                        .collect()
                })
                .collect()
        }
        Mechanism::Cohort(m) => {
            let c = m.cohorts() as usize;
            let (keep, lie) = (sign_keep(m.epsilon()), sign_lie(m.epsilon()));
            (0..2 * c)
                .map(|s| {
                    let (ci, sign) = (s / 2, if s % 2 == 0 { 1 } else { -1 });
                    (0..d)
                        .map(|x| {
                            let truth = m.sign(ci as u32, x as u32);
                            (if truth == sign { keep } else { lie }) / c as f64
                        })
                        .collect()
                })
                .collect()
        }
        Mechanism::Noise(m) => {
            let mut edges = vec![f64::NEG_INFINITY];
            edges.extend(NOISE_BIN_EDGES);
            edges.push(f64::INFINITY);
            let log_law = edges
                .windows(2)
                .map(|w| {
                    (0..d)
                        .map(|x| {
                            let shift = if x == 0 { 1.0 } else { 0.0 };
                            noise_bin_log_probability(m.kind(), w[0] - shift, w[1] - shift)
                        })
                        .collect::<Result<Vec<f64>, EngineError>>()
                })
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(TransitionMatrix::from_log_law(log_law));
        }
    };
    Ok(TransitionMatrix::from_law(law))
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
                    max_abs: None,
                },
                Some(1.0),
            ),
            (
                MechanismConfig::Gauss {
                    rho: 0.5,
                    domain: 4,
                    max_abs: None,
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

    fn at_epsilon(eps: f64) -> Vec<MechanismConfig> {
        vec![
            MechanismConfig::Grr {
                epsilon: eps,
                domain: 4,
            },
            MechanismConfig::Bitflip {
                epsilon: eps,
                domain: 4,
            },
            MechanismConfig::Hadamard {
                epsilon: eps,
                domain: 4,
            },
            MechanismConfig::Cohort {
                epsilon: eps,
                domain: 4,
                cohorts: 8,
                seed: 11,
            },
        ]
    }

    /// The extreme ε the config accepts: the exact law's worst ratio is e^ε itself (not
    /// NaN, not infinite, not rounded away), for every ε-LDP randomizer.
    #[test]
    fn exact_loss_is_epsilon_at_extreme_epsilon() {
        for eps in [1e-9, 1e-3, 30.0, 60.0, ldpstream_config::MAX_EPSILON] {
            for config in at_epsilon(eps) {
                let m = Mechanism::from_config(&config).unwrap();
                let t = transition_matrix(&m).unwrap();
                let loss = t.privacy_loss();
                assert!(
                    (loss - eps).abs() <= 1e-12 * (1.0 + eps),
                    "{config:?}: loss {loss} vs ε {eps}"
                );
                for x in 0..m.domain() {
                    let total: f64 = t.law.iter().map(|row| row[x]).sum();
                    assert!((total - 1.0).abs() < 1e-12, "{config:?}: column {x}");
                }
            }
            let laplace = eps.max(ldpstream_config::MIN_LAPLACE_EPSILON);
            let m = Mechanism::from_config(&MechanismConfig::Laplace {
                epsilon: laplace,
                domain: 4,
                max_abs: None,
            })
            .unwrap();
            let loss = transition_matrix(&m).unwrap().privacy_loss();
            assert!(
                loss <= laplace * (1.0 + 1e-9),
                "laplace ε {laplace}: {loss}"
            );
        }
    }

    /// The real randomizers against their exact law at the extreme ε (200k reports per
    /// input, χ² at α = 1e-6): the lies that remain possible are drawn at their rate.
    #[test]
    fn sampled_law_matches_exact_law_at_extreme_epsilon() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(17);
        for eps in [1e-9, 1e-3, 30.0, 60.0, ldpstream_config::MAX_EPSILON] {
            for config in at_epsilon(eps) {
                let m = Mechanism::from_config(&config).unwrap();
                let t = transition_matrix(&m).unwrap();
                for x in 0..m.domain() {
                    let mut counts = vec![0u64; t.outputs()];
                    for _ in 0..200_000 {
                        counts[sample_output(&m, x as u32, &mut rng).unwrap()] += 1;
                    }
                    let probs: Vec<f64> = t.law.iter().map(|row| row[x]).collect();
                    let p = crate::stats::pearson_gof(&counts, &probs).p_value.unwrap();
                    assert!(p > 1e-6, "{config:?} x={x}: p = {p}");
                }
            }
        }
    }

    /// A generator whose words are all zero: the uniform it stands for is 0, below every
    /// positive probability, so an exact Bernoulli fires however small its p is.
    struct Zeros;

    impl rand::RngCore for Zeros {
        fn next_u32(&mut self) -> u32 {
            0
        }
        fn next_u64(&mut self) -> u64 {
            0
        }
        fn fill_bytes(&mut self, dst: &mut [u8]) {
            dst.fill(0);
        }
    }

    /// At ε = 60 and at the maximum ε the lie (probability ≈ e^{−ε}, far below 2⁻⁵³) must
    /// still be drawable: with U = 0 GRR reports another category and Hadamard and cohort
    /// flip the sign. Comparing a 53-bit uniform with `keep` (which rounds to 1) never lies.
    #[test]
    fn randomizers_can_lie_at_large_epsilon() {
        for eps in [60.0, ldpstream_config::MAX_EPSILON] {
            let [grr, _, hadamard, cohort] = &at_epsilon(eps)[..] else {
                unreachable!()
            };
            let grr = Mechanism::from_config(grr).unwrap();
            let Mechanism::Grr(g) = &grr else {
                unreachable!()
            };
            for x in 0..4 {
                assert_ne!(g.randomize_with(x, &mut Zeros).unwrap(), x, "ε {eps}");
            }
            let Mechanism::Hadamard(h) = Mechanism::from_config(hadamard).unwrap() else {
                unreachable!()
            };
            let (j, y) = h.randomize_with(2, &mut Zeros).unwrap();
            assert_eq!(y, -Hadamard::entry(j, 2), "ε {eps}");
            let Mechanism::Cohort(c) = Mechanism::from_config(cohort).unwrap() else {
                unreachable!()
            };
            let (k, y) = c.randomize_with(1, &mut Zeros).unwrap();
            assert_eq!(y, -c.sign(k, 1), "ε {eps}");
        }
    }
}
