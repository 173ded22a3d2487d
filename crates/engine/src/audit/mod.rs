//! Privacy audit: the exact law of each randomizer's output from the implementation's own
//! parameters, its worst-case privacy loss, and an empirical lower bound on ε from sampling
//! the real randomizer.
//!
//! Continuous reports (Gauss, Laplace) are audited through a fixed binning of coordinate 0,
//! whose exact bin probabilities come from the noise CDF: post-processing cannot raise the
//! privacy loss, so the binned loss must also stay within ε.

pub mod device;

use rand::Rng;
use statrs::distribution::{Beta, ContinuousCDF, Normal};

use ldpstream_config::MechanismConfig;

use crate::error::EngineError;
use crate::mechanism::subset_index::{choose, rank, unrank};
use crate::mechanism::{sign_keep, sign_lie, subset_default_k, Hadamard, Mechanism, NoiseKind};

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

/// Largest output law, in entries `outputs × d`, an audit enumerates. The exact loss reads
/// every entry once (no table is kept: memory is O(outputs + d)), so this bounds its time;
/// 2^24 entries take well under a second, and admit grr and raw up to d = 4096.
pub const MAX_AUDIT_LAW_ENTRIES: u64 = 1 << 24;

/// The default confidence of the audit's lower bound, simultaneous over every (output,
/// input).
pub const AUDIT_CONFIDENCE: f64 = 0.95;

/// How many outputs the audit's enumeration of `config`'s reports has (bit flip: 2^d;
/// Hadamard: 2K signed rows; noise: the bins of coordinate 0; subset: C(d, k)).
pub fn audit_outputs(config: &MechanismConfig) -> u64 {
    match config {
        // One report of a longitudinal kind is its composed kind's report.
        MechanismConfig::Lgrr { .. }
        | MechanismConfig::Losue { .. }
        | MechanismConfig::Lsue { .. } => audit_outputs(&config.server_channel()),
        MechanismConfig::Grr { domain, .. } | MechanismConfig::Raw { domain } => u64::from(*domain),
        MechanismConfig::Bitflip { domain, .. } | MechanismConfig::Oue { domain, .. } => {
            1u64.checked_shl(*domain).unwrap_or(u64::MAX)
        }
        MechanismConfig::Gauss { .. } | MechanismConfig::Laplace { .. } => {
            NOISE_BIN_EDGES.len() as u64 + 1
        }
        MechanismConfig::Hadamard { domain, .. } => 2 * u64::from(domain.next_power_of_two()),
        MechanismConfig::Cohort { cohorts, .. } => 2 * u64::from(*cohorts),
        MechanismConfig::Olh { .. } => config
            .olh_shape()
            .map_or(0, |(g, s)| u64::from(g) * u64::from(s)),
        MechanismConfig::Matrix { matrix } => matrix.len() as u64,
        MechanismConfig::Subset { epsilon, domain, k } => choose(
            u64::from(*domain),
            u64::from(k.unwrap_or_else(|| subset_default_k(*epsilon, *domain))),
        ),
    }
}

/// Refuses, before any mechanism is built or sampled, a configuration whose output law is
/// too large to audit: the error names the bound.
pub fn check_audit_size(config: &MechanismConfig) -> Result<(), EngineError> {
    check_entries(
        config.kind(),
        u64::from(config.domain()),
        audit_outputs(config),
        matches!(
            *config.server_channel(),
            MechanismConfig::Bitflip { .. } | MechanismConfig::Oue { .. }
        ),
    )
}

fn check_entries(
    mechanism: &'static str,
    domain: u64,
    outputs: u64,
    bitflip: bool,
) -> Result<(), EngineError> {
    let entries = outputs.saturating_mul(domain);
    if bitflip && domain > u64::from(MAX_BITFLIP_AUDIT_DOMAIN) {
        return Err(EngineError::AuditTooLarge {
            mechanism,
            domain,
            entries,
            limit: format!(
                "an exact bit-flip audit enumerates all 2^d reports, so d is at most \
                 {MAX_BITFLIP_AUDIT_DOMAIN}"
            ),
        });
    }
    if entries > MAX_AUDIT_LAW_ENTRIES {
        return Err(EngineError::AuditTooLarge {
            mechanism,
            domain,
            entries,
            limit: format!(
                "the audit reads outputs × d law entries, at most {MAX_AUDIT_LAW_ENTRIES} \
                 (2^24); for grr and raw that is d <= 4096"
            ),
        });
    }
    Ok(())
}

/// One output's law over the inputs: probabilities, or their logarithms where the
/// probabilities themselves underflow.
enum Row {
    Law(Vec<f64>),
    LogLaw(Vec<f64>),
}

fn row_of(mechanism: &Mechanism, s: usize, edges: &[f64]) -> Result<Row, EngineError> {
    let d = mechanism.domain();
    Ok(match mechanism {
        // One report's law is the composed channel's.
        Mechanism::Longitudinal(l) => return row_of(l.composed(), s, edges),
        Mechanism::Grr(m) => {
            let (rho, gamma) = (m.rho(), m.gamma());
            Row::Law(
                (0..d)
                    .map(|x| rho + if s == x { gamma } else { 0.0 })
                    .collect(),
            )
        }
        Mechanism::Raw { .. } => Row::Law((0..d).map(|x| if s == x { 1.0 } else { 0.0 }).collect()),
        Mechanism::Channel(m) => Row::Law((0..d).map(|x| m.entry(s, x)).collect()),
        Mechanism::BitFlip(m) => {
            // ln P(reported bit | true bit), for true one / zero and reported one / zero.
            let (keep, drop) = (m.keep_probability().ln(), m.drop_probability().ln());
            let (flip, stay) = (m.flip().ln(), m.stay_probability().ln());
            Row::LogLaw(
                (0..d)
                    .map(|x| {
                        (0..d)
                            .map(|j| match ((s >> j) & 1 == 1, j == x) {
                                (true, true) => keep,
                                (false, true) => drop,
                                (true, false) => flip,
                                (false, false) => stay,
                            })
                            .sum()
                    })
                    .collect(),
            )
        }
        Mechanism::Hadamard(m) => {
            let k = m.rows() as usize;
            let (keep, lie) = (sign_keep(m.epsilon()), sign_lie(m.epsilon()));
            let (j, sign) = (s / 2, if s.is_multiple_of(2) { 1 } else { -1 });
            Row::Law(
                (0..d)
                    .map(|x| {
                        let truth = Hadamard::entry(j as u32, x as u32);
                        (if truth == sign { keep } else { lie }) / k as f64
                    })
                    .collect(),
            )
        }
        Mechanism::Cohort(m) => {
            let c = m.cohorts() as usize;
            let (keep, lie) = (sign_keep(m.epsilon()), sign_lie(m.epsilon()));
            let (ci, sign) = (s / 2, if s.is_multiple_of(2) { 1 } else { -1 });
            Row::Law(
                (0..d)
                    .map(|x| {
                        let truth = m.sign(ci as u32, x as u32);
                        (if truth == sign { keep } else { lie }) / c as f64
                    })
                    .collect(),
            )
        }
        Mechanism::Subset(m) => {
            // P(S | x) = p/C(d−1, k−1) if x ∈ S, else (1−p)/C(d−1, k): every subset that
            // holds x is equally likely, as is every one that does not.
            let (dk, k) = ((d - 1) as u64, u64::from(m.k()));
            let held = m.keep_probability().ln() - (choose(dk, k - 1) as f64).ln();
            let missed = m.miss_probability().ln() - (choose(dk, k) as f64).ln();
            let mut members = Vec::new();
            unrank(s as u64, m.k(), &mut members);
            Row::LogLaw(
                (0..d as u32)
                    .map(|x| {
                        if members.binary_search(&x).is_ok() {
                            held
                        } else {
                            missed
                        }
                    })
                    .collect(),
            )
        }
        Mechanism::Olh(m) => {
            // Output s = i·g + y: pool index i (probability 1/S), then GenRR over buckets.
            let g = m.g() as usize;
            let (i, y) = ((s / g) as u32, (s % g) as u32);
            let (q, keep) = (m.q(), m.q() + m.p_minus_q());
            let share = 1.0 / f64::from(m.pool_size());
            Row::Law(
                (0..d)
                    .map(|x| share * if m.bucket(i, x as u32) == y { keep } else { q })
                    .collect(),
            )
        }
        Mechanism::Noise(m) => Row::LogLaw(
            (0..d)
                .map(|x| {
                    let shift = if x == 0 { 1.0 } else { 0.0 };
                    noise_bin_log_probability(m.kind(), edges[s] - shift, edges[s + 1] - shift)
                })
                .collect::<Result<Vec<f64>, EngineError>>()?,
        ),
    })
}

fn output_count(mechanism: &Mechanism) -> usize {
    let d = mechanism.domain();
    match mechanism {
        Mechanism::Longitudinal(l) => output_count(l.composed()),
        Mechanism::Grr(_) | Mechanism::Raw { .. } => d,
        Mechanism::Channel(m) => m.signals(),
        Mechanism::BitFlip(_) => 1usize << d,
        Mechanism::Hadamard(m) => 2 * m.rows() as usize,
        Mechanism::Cohort(m) => 2 * m.cohorts() as usize,
        Mechanism::Olh(m) => (m.pool_size() * m.g()) as usize,
        Mechanism::Noise(_) => NOISE_BIN_EDGES.len() + 1,
        Mechanism::Subset(m) => choose(d as u64, u64::from(m.k())) as usize,
    }
}

fn noise_edges() -> Vec<f64> {
    let mut edges = vec![f64::NEG_INFINITY];
    edges.extend(NOISE_BIN_EDGES);
    edges.push(f64::INFINITY);
    edges
}

fn check_built(mechanism: &Mechanism) -> Result<(), EngineError> {
    let bitflip = matches!(mechanism.channel(), Mechanism::BitFlip(_));
    let domain = mechanism.domain() as u64;
    // Not `output_count`, whose `1 << d` for bit flip would overflow at large d.
    let outputs = if bitflip {
        1u64.checked_shl(domain as u32).unwrap_or(u64::MAX)
    } else {
        output_count(mechanism) as u64
    };
    check_entries(mechanism.kind(), domain, outputs, bitflip)
}

/// The exact output law of `mechanism`, from its own parameters, as a table (for tests and
/// small domains; [`exact_privacy_loss`] needs no table).
pub fn transition_matrix(mechanism: &Mechanism) -> Result<TransitionMatrix, EngineError> {
    check_built(mechanism)?;
    let edges = noise_edges();
    let (mut law, mut log_law) = (Vec::new(), Vec::new());
    for s in 0..output_count(mechanism) {
        match row_of(mechanism, s, &edges)? {
            Row::Law(row) => {
                log_law.push(row.iter().map(|p| p.ln()).collect());
                law.push(row);
            }
            Row::LogLaw(row) => {
                law.push(row.iter().map(|l| l.exp()).collect());
                log_law.push(row);
            }
        }
    }
    Ok(TransitionMatrix { law, log_law })
}

/// `max_{s,x,x'} ln P(s|x)/P(s|x')` of the exact law, one output row at a time: O(d) memory.
pub fn exact_privacy_loss(mechanism: &Mechanism) -> Result<f64, EngineError> {
    check_built(mechanism)?;
    let edges = noise_edges();
    let mut loss = 0.0f64;
    for s in 0..output_count(mechanism) {
        let logs = match row_of(mechanism, s, &edges)? {
            Row::Law(row) => row.iter().map(|p| p.ln()).collect(),
            Row::LogLaw(row) => row,
        };
        let hi = logs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let lo = logs.iter().cloned().fold(f64::INFINITY, f64::min);
        if hi > f64::NEG_INFINITY {
            loss = loss.max(hi - lo);
        }
    }
    Ok(loss)
}

/// Draws one report of `x` from the real randomizer and returns its index in the
/// enumeration of [`transition_matrix`].
pub fn sample_output<R: Rng + ?Sized>(
    mechanism: &Mechanism,
    x: u32,
    rng: &mut R,
) -> Result<usize, EngineError> {
    Ok(match mechanism {
        // A device's first report of x: both rounds.
        Mechanism::Longitudinal(l) => match l.fresh_report(x, rng)? {
            crate::mechanism::Response::Category(c) => c as usize,
            crate::mechanism::Response::Bits(b) => packed_index(&b),
        },
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
        Mechanism::BitFlip(m) => packed_index(&m.randomize_with(x, rng)?),
        Mechanism::Hadamard(m) => {
            let (j, y) = m.randomize_with(x, rng)?;
            2 * j as usize + usize::from(y < 0)
        }
        Mechanism::Cohort(m) => {
            let (c, y) = m.randomize_with(x, rng)?;
            2 * c as usize + usize::from(y < 0)
        }
        Mechanism::Olh(m) => {
            let (i, y) = m.randomize_with(x, rng)?;
            (i * m.g() + y) as usize
        }
        Mechanism::Noise(m) => bin_of(m.randomize_with(x, rng)?[0]),
        Mechanism::Subset(m) => rank(&m.randomize_with(x, rng)?) as usize,
    })
}

/// A packed unary report's index in the audit's enumeration: byte i at bits 8i..8i+7.
pub(crate) fn packed_index(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .enumerate()
        .map(|(i, &b)| (b as usize) << (8 * i))
        .sum()
}

/// What an audit found.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditReport {
    /// The ε the mechanism states (None for Gauss, which states ρ, and for raw).
    pub claimed_epsilon: Option<f64>,
    /// The exact worst-case loss of the (binned) output law.
    pub exact_loss: f64,
    /// The largest `ln(lower(P(s|x)) / upper(P(s|x')))` over all (s, x, x'), with
    /// one-sided Clopper–Pearson bounds at level `(1 − confidence)/(2 · proportions)` each:
    /// by the union bound every bound holds at once with probability at least `confidence`,
    /// so with that confidence the true loss is at least this much. (The maximum of many
    /// separate 95% bounds is not a 95% bound: it reported violations for correct
    /// randomizers in several seeds out of 40.)
    pub empirical_lower_bound: f64,
    /// The (output, x, x') attaining the bound.
    pub worst: (usize, usize, usize),
    pub samples_per_input: u64,
    /// The number of proportions `P(s|x)` the union bound covers: outputs × d.
    pub proportions: u64,
    /// The simultaneous confidence of `empirical_lower_bound`.
    pub confidence: f64,
}

/// One-sided Clopper–Pearson bounds on a binomial proportion, each at tail probability
/// `tail`: `lower` is the `tail` quantile of Beta(k, n−k+1), `upper` the `1 − tail`
/// quantile of Beta(k+1, n−k).
fn clopper_pearson(k: u64, n: u64, tail: f64) -> Result<(f64, f64), EngineError> {
    let (kf, nf) = (k as f64, n as f64);
    let beta = |p: f64, q: f64| {
        Beta::new(p, q)
            .map_err(|e| EngineError::invalid("beta", p, "positive shape").with_detail(e))
    };
    let lower = if k == 0 {
        0.0
    } else {
        beta(kf, nf - kf + 1.0)?.inverse_cdf(tail)
    };
    let upper = if k == n {
        1.0
    } else {
        beta(kf + 1.0, nf - kf)?.inverse_cdf(1.0 - tail)
    };
    Ok((lower, upper))
}

/// Samples `samples` reports for every input from the real randomizer and bounds the
/// privacy loss from below, with simultaneous `confidence` ([`AUDIT_CONFIDENCE`] unless a
/// caller needs fewer false alarms).
pub fn audit<R: Rng + ?Sized>(
    mechanism: &Mechanism,
    samples: u64,
    confidence: f64,
    rng: &mut R,
) -> Result<AuditReport, EngineError> {
    audit_sampler(mechanism, samples, confidence, rng, |x, rng| {
        sample_output(mechanism, x, rng)
    })
}

/// [`audit`] with the reports drawn by `draw` (an output index of `mechanism`'s
/// enumeration for input x) instead of the mechanism's own randomizer, so that a test can
/// audit a randomizer that does not keep its claim.
///
/// Memory is O(outputs + d): the counts of one input at a time, and per output the input
/// with the most reports of it and the input with the fewest. The lower bound of a ratio
/// `lower(k)/upper(k')` grows with k and falls with k', so those two inputs attain each
/// output's best pair.
pub fn audit_sampler<R: Rng + ?Sized>(
    mechanism: &Mechanism,
    samples: u64,
    confidence: f64,
    rng: &mut R,
    mut draw: impl FnMut(u32, &mut R) -> Result<usize, EngineError>,
) -> Result<AuditReport, EngineError> {
    if samples == 0 {
        return Err(EngineError::invalid("samples", 0, "at least 1"));
    }
    // A confidence of 1 would need bounds at level 0: no lower bound above 0 at all.
    if !(confidence > 0.0 && confidence < 1.0) {
        return Err(EngineError::invalid(
            "confidence",
            confidence,
            "a number strictly between 0 and 1",
        ));
    }
    let exact_loss = exact_privacy_loss(mechanism)?;
    let d = mechanism.domain();
    let outputs = output_count(mechanism);
    let mut counts = vec![0u64; outputs];
    let mut touched = Vec::new();
    // Per output: the most reports from one input and that input; the fewest among the
    // inputs that produced it at least once and that input; and how many of the inputs
    // 0, 1, … in order all produced it (the first that did not has a count of zero).
    let mut most = vec![(0u64, 0u32); outputs];
    let mut fewest = vec![(u64::MAX, 0u32); outputs];
    let mut run = vec![0u32; outputs];
    for x in 0..d as u32 {
        for _ in 0..samples {
            let s = draw(x, rng)?;
            let slot = counts.get_mut(s).ok_or(EngineError::InvalidParameter {
                name: "output",
                value: s.to_string(),
                allowed: "an index of the mechanism's enumeration of outputs",
            })?;
            if *slot == 0 {
                touched.push(s);
            }
            *slot += 1;
        }
        for &s in &touched {
            let k = std::mem::take(&mut counts[s]);
            if k > most[s].0 {
                most[s] = (k, x);
            }
            if k < fewest[s].0 {
                fewest[s] = (k, x);
            }
            if run[s] == x {
                run[s] = x + 1;
            }
        }
        touched.clear();
    }
    let proportions = (outputs as u64).saturating_mul(d as u64);
    let tail = (1.0 - confidence) / (2.0 * proportions as f64);
    let mut lower_of = std::collections::HashMap::new();
    let mut upper_of = std::collections::HashMap::new();
    let mut best = (f64::NEG_INFINITY, (0, 0, 0));
    for (s, ((&(k_hi, x), &fewest), &run)) in most.iter().zip(&fewest).zip(&run).enumerate() {
        if k_hi == 0 {
            continue;
        }
        let (k_lo, y) = if (run as usize) < d { (0, run) } else { fewest };
        if x == y {
            // Every input produced s equally often: no pair of distinct inputs beats 0.
            continue;
        }
        let lo = match lower_of.get(&k_hi) {
            Some(&v) => v,
            None => {
                let v = clopper_pearson(k_hi, samples, tail)?.0;
                lower_of.insert(k_hi, v);
                v
            }
        };
        let hi = match upper_of.get(&k_lo) {
            Some(&v) => v,
            None => {
                let v = clopper_pearson(k_lo, samples, tail)?.1;
                upper_of.insert(k_lo, v);
                v
            }
        };
        if lo > 0.0 && hi > 0.0 && (lo / hi).ln() > best.0 {
            best = ((lo / hi).ln(), (s, x as usize, y as usize));
        }
    }
    Ok(AuditReport {
        claimed_epsilon: mechanism.privacy().epsilon,
        exact_loss,
        empirical_lower_bound: best.0.max(0.0),
        worst: best.1,
        samples_per_input: samples,
        proportions,
        confidence,
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
            // OLH: outputs (pool index, bucket), 4 × 3 of them.
            (
                MechanismConfig::Olh {
                    epsilon: 1.5,
                    domain: 5,
                    g: Some(3),
                    pool_size: Some(4),
                    pool_seed: 2,
                },
                Some(1.5),
            ),
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
                MechanismConfig::Oue {
                    epsilon: 1.0,
                    domain: 4,
                },
                Some(1.0),
            ),
            (
                MechanismConfig::Subset {
                    epsilon: 1.0,
                    domain: 5,
                    k: Some(2),
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
                    // ρ = Δ²/(2σ²) = 1/σ²; the implementation's σ² (the grid's, rounded
                    // up to whole steps) must give at most the stated ρ, and barely less.
                    let NoiseKind::Gauss { rho } = noise.kind() else {
                        unreachable!()
                    };
                    let implied = 2.0 / (2.0 * noise.variance());
                    let slack = 2.5 / noise.grid_scale() as f64;
                    assert!(
                        implied <= rho && implied >= rho * (1.0 - slack),
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
        let r = audit(&m, 200_000, AUDIT_CONFIDENCE, &mut rng).unwrap();
        assert!(
            r.empirical_lower_bound <= 1.0 && r.empirical_lower_bound > 0.9,
            "{r:?}"
        );
        assert!((r.exact_loss - 1.0).abs() < 1e-12);
    }

    /// The one-sided Clopper–Pearson bounds against scipy, at the union-bound tails the
    /// audit uses (16 proportions; 4096 × 4096 proportions).
    #[test]
    fn clopper_pearson_matches_scipy() {
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b;
        // scipy.stats.beta.ppf(0.05/32, 37, 964), beta.ppf(1 - 0.05/32, 38, 963)
        let (lo, hi) = clopper_pearson(37, 1000, 0.05 / 32.0).unwrap();
        assert!(close(lo, 0.021726555237440003), "{lo}");
        assert!(close(hi, 0.05816702963280994), "{hi}");
        // beta.ppf(1 - 0.05/32, 1, 1000)
        let (lo, hi) = clopper_pearson(0, 1000, 0.05 / 32.0).unwrap();
        assert!(lo == 0.0 && close(hi, 0.006440637779985158), "{hi}");
        // t = 0.05/(2·4096²): beta.ppf(t, 5, 999996), beta.ppf(1 - t, 1, 10**6)
        let t = 0.05 / (2.0 * 4096.0 * 4096.0);
        let (lo, _) = clopper_pearson(5, 1_000_000, t).unwrap();
        assert!(close(lo, 4.5054745598258944e-08), "{lo}");
        let (_, hi) = clopper_pearson(0, 1_000_000, t).unwrap();
        assert!(close(hi, 2.0324205233193776e-05), "{hi}");
    }

    /// Issue 19 item 8: correct randomizers must not be reported as violations more often
    /// than 1 − confidence. 200 seeds per mechanism; under the simultaneous bound the rate
    /// is at most 5%, and P(Binomial(200, 0.05) > 18) = 0.0058
    /// (scipy.stats.binom.sf(18, 200, 0.05)). The maximum of per-pair 95% bounds (the old
    /// audit) exceeds this here.
    #[test]
    fn correct_randomizers_are_rarely_reported_as_violations() {
        let seeds = 200u64;
        for (config, epsilon) in all_mechanisms() {
            let Some(eps) = epsilon else { continue };
            let m = Mechanism::from_config(&config).unwrap();
            let violations = (0..seeds)
                .filter(|&seed| {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
                    audit(&m, 20_000, AUDIT_CONFIDENCE, &mut rng)
                        .unwrap()
                        .empirical_lower_bound
                        > eps
                })
                .count();
            eprintln!(
                "{}: {violations} violations in {seeds} seeds",
                config.kind()
            );
            assert!(violations <= 18, "{config:?}: {violations} of {seeds}");
        }
    }

    /// A randomizer that leaks more than it claims (ε = 1.6 behind a claim of 1) is caught:
    /// the lower bound exceeds the claim, for GRR and for bit flip.
    #[test]
    fn a_randomizer_leaking_more_than_claimed_is_caught() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let claim = |config| Mechanism::from_config(&config).unwrap();
        let claimed = claim(MechanismConfig::Grr {
            epsilon: 1.0,
            domain: 4,
        });
        let real = claim(MechanismConfig::Grr {
            epsilon: 1.6,
            domain: 4,
        });
        let r = audit_sampler(&claimed, 200_000, AUDIT_CONFIDENCE, &mut rng, |x, rng| {
            sample_output(&real, x, rng)
        })
        .unwrap();
        assert!(r.empirical_lower_bound > 1.0, "{r:?}");
        let claimed = claim(MechanismConfig::Bitflip {
            epsilon: 1.0,
            domain: 3,
        });
        let real = claim(MechanismConfig::Bitflip {
            epsilon: 1.6,
            domain: 3,
        });
        let r = audit_sampler(&claimed, 200_000, AUDIT_CONFIDENCE, &mut rng, |x, rng| {
            sample_output(&real, x, rng)
        })
        .unwrap();
        assert!(r.empirical_lower_bound > 1.0, "{r:?}");
        let claimed = claim(MechanismConfig::Oue {
            epsilon: 1.0,
            domain: 3,
        });
        let real = claim(MechanismConfig::Oue {
            epsilon: 1.6,
            domain: 3,
        });
        let r = audit_sampler(&claimed, 200_000, AUDIT_CONFIDENCE, &mut rng, |x, rng| {
            sample_output(&real, x, rng)
        })
        .unwrap();
        assert!(r.empirical_lower_bound > 1.0, "{r:?}");
    }

    /// Issue 18: grr at d = 10⁵ took 4 GB and at d = 10⁷ did not finish. Both are refused
    /// up front with an error naming the bound; the largest admitted domain is audited
    /// without a d × d table.
    #[test]
    fn audit_refuses_a_domain_beyond_its_bound() {
        for domain in [100_000u32, 10_000_000, 4097] {
            let config = MechanismConfig::Grr {
                epsilon: 1.0,
                domain,
            };
            let e = check_audit_size(&config).unwrap_err().to_string();
            assert!(e.contains("16777216") && e.contains("4096"), "{e}");
            let m = Mechanism::from_config(&config).unwrap();
            let mut rng = rand::rngs::StdRng::seed_from_u64(1);
            assert!(matches!(
                audit(&m, 1, AUDIT_CONFIDENCE, &mut rng),
                Err(EngineError::AuditTooLarge { .. })
            ));
        }
        let bitflip = MechanismConfig::Bitflip {
            epsilon: 1.0,
            domain: 13,
        };
        let e = check_audit_size(&bitflip).unwrap_err().to_string();
        assert!(e.contains("at most 12"), "{e}");
        let hadamard = MechanismConfig::Hadamard {
            epsilon: 1.0,
            domain: 4096,
        };
        assert!(check_audit_size(&hadamard).is_err());
        let config = MechanismConfig::Grr {
            epsilon: 1.0,
            domain: 4096,
        };
        check_audit_size(&config).unwrap();
        let m = Mechanism::from_config(&config).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(2);
        let r = audit(&m, 200, AUDIT_CONFIDENCE, &mut rng).unwrap();
        assert!((r.exact_loss - 1.0).abs() < 1e-12, "{}", r.exact_loss);
        assert!(r.empirical_lower_bound <= 1.0, "{r:?}");
        assert_eq!(r.proportions, 4096 * 4096);
    }

    /// The streamed exact loss equals the table's, for every mechanism.
    #[test]
    fn streamed_exact_loss_equals_the_tables() {
        for (config, _) in all_mechanisms() {
            let m = Mechanism::from_config(&config).unwrap();
            let table = transition_matrix(&m).unwrap().privacy_loss();
            assert_eq!(exact_privacy_loss(&m).unwrap(), table, "{config:?}");
        }
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
            MechanismConfig::Oue {
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
            MechanismConfig::Subset {
                epsilon: eps,
                domain: 5,
                k: Some(2),
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
            let [grr, _, oue, hadamard, cohort, _] = &at_epsilon(eps)[..] else {
                unreachable!()
            };
            // OUE: every zero bit flips to one (q ≈ e^{−ε}) and the one is dropped.
            let Mechanism::BitFlip(o) = Mechanism::from_config(oue).unwrap() else {
                unreachable!()
            };
            assert_eq!(
                o.randomize_with(2, &mut Zeros).unwrap(),
                vec![0b1011],
                "ε {eps}"
            );
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
