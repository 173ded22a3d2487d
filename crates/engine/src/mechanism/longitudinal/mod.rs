//! The longitudinal (memoized) randomizers `lgrr`, `losue` and `lsue` (Arcolezi et al.
//! 2022; RAPPOR's permanent and instantaneous responses): a device draws a first response
//! of each value it holds once, at ε∞ = `epsilon_perm`, keeps it (the memo), and every
//! report randomizes the memo again. The second round is chosen so that one report is
//! exactly the one-shot mechanism at ε1 = `epsilon_1` (docs/STATISTICS.md §1.9): that
//! composed channel is what the server sees, so every estimate and test of `grr`, `oue`
//! and `bitflip` applies unchanged, and this type only adds its own kind, privacy and
//! fingerprint.
//!
//! The device side (the memo and the one-report-per-period rule) is [`device`]; its
//! storage is the [`memo`] store.

pub mod device;
pub mod memo;
pub mod population;

use ldpstream_config::{LongitudinalKind, LongitudinalParams, MechanismConfig};
use rand::Rng;

use super::{BitFlip, Grr, Mechanism};
use crate::error::EngineError;

/// A randomized response of a categorical value: a category (lgrr) or the packed unary
/// bits, bit j at bit `j % 8` of byte `j / 8` (losue, lsue). The memo and a report have
/// the same form.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Response {
    Category(u32),
    Bits(Vec<u8>),
}

/// A longitudinal mechanism: its parameters, its two rounds, and the composed channel.
#[derive(Debug, Clone, PartialEq)]
pub struct Longitudinal {
    params: LongitudinalParams,
    /// Round 1, the memo: `grr`, `oue` or `bitflip` at ε∞, drawn exactly as those kinds
    /// draw a one-shot report (the same words give the same bytes).
    first: Mechanism,
    /// Round 2's one probability: lgrr's lie (report another category than the memo's),
    /// or the unary kinds' flip of every memo bit.
    second: f64,
    /// One report's law: `grr`, `oue` or `bitflip` at ε1.
    composed: Mechanism,
}

impl Longitudinal {
    /// Checks both ε (the config's range each, ε1 < ε∞ strictly), d and the period.
    pub fn new(params: LongitudinalParams) -> Result<Self, EngineError> {
        let LongitudinalParams {
            kind,
            epsilon_perm,
            epsilon_1,
            domain,
            period,
        } = params;
        super::check_epsilon(epsilon_perm)?;
        super::check_epsilon(epsilon_1)?;
        super::check_domain(domain)?;
        if epsilon_1 >= epsilon_perm {
            return Err(EngineError::invalid(
                "epsilon_1",
                epsilon_1,
                "less than epsilon_perm: one report must be more private than the memo",
            ));
        }
        if period < ldpstream_config::MIN_PERIOD {
            return Err(EngineError::invalid(
                "period",
                period.millis(),
                "at least 1000 ms",
            ));
        }
        let (first, composed) = match kind {
            LongitudinalKind::Lgrr => (
                Mechanism::Grr(Grr::new(epsilon_perm, domain)?),
                Mechanism::Grr(Grr::new(epsilon_1, domain)?),
            ),
            LongitudinalKind::Losue => (
                Mechanism::BitFlip(BitFlip::optimized(epsilon_perm, domain)?),
                Mechanism::BitFlip(BitFlip::optimized(epsilon_1, domain)?),
            ),
            LongitudinalKind::Lsue => (
                Mechanism::BitFlip(BitFlip::new(epsilon_perm, domain)?),
                Mechanism::BitFlip(BitFlip::new(epsilon_1, domain)?),
            ),
        };
        let second = second_round_probability(kind, epsilon_perm, epsilon_1, domain);
        // b > a makes every factor positive and the ratio below (d−1)/d, or 1/2 for the
        // unary kinds: a failure here is a bug, not a user's value.
        if !(second.is_finite() && second > 0.0 && second < 1.0) {
            return Err(EngineError::invalid(
                "epsilon_1",
                epsilon_1,
                "a value whose second-round probability is in (0, 1)",
            ));
        }
        Ok(Longitudinal {
            params,
            first,
            second,
            composed,
        })
    }

    /// From a config table; None for the one-shot kinds.
    pub fn from_config(config: &MechanismConfig) -> Option<Result<Self, EngineError>> {
        config.longitudinal().map(Longitudinal::new)
    }

    pub fn params(&self) -> LongitudinalParams {
        self.params
    }

    pub fn kind(&self) -> &'static str {
        self.params.kind.name()
    }

    pub fn domain(&self) -> u32 {
        self.params.domain
    }

    pub fn epsilon_perm(&self) -> f64 {
        self.params.epsilon_perm
    }

    pub fn epsilon_1(&self) -> f64 {
        self.params.epsilon_1
    }

    pub fn period_ms(&self) -> u64 {
        self.params.period.millis()
    }

    /// The composed channel: what one report follows and what the server's statistics use.
    pub fn composed(&self) -> &Mechanism {
        &self.composed
    }

    /// Round 1's one-shot mechanism at ε∞.
    pub fn first_round(&self) -> &Mechanism {
        &self.first
    }

    /// The probability round 2 draws against (the clients must compute the same double):
    /// lgrr `(d−1)(b−a)/((1−a)(1+(d−1)b))`, losue `(b−a)/((1+b)(1−a))` with a = e^{−ε∞},
    /// b = e^{−ε1}, lsue the same at ε/2.
    pub fn second_probability(&self) -> f64 {
        self.second
    }

    /// The probability round 1 draws against: grr's lie, or the unary kinds' flip of a zero
    /// bit (oue also drops the true bit with 1/2).
    pub fn first_probability(&self) -> f64 {
        match &self.first {
            Mechanism::Grr(m) => m.lie_probability(),
            Mechanism::BitFlip(m) => m.flip(),
            _ => f64::NAN,
        }
    }

    /// Round 1: the memo of `x`, drawn exactly as the one-shot kind at ε∞ draws a report.
    pub fn memoize<R: Rng + ?Sized>(&self, x: u32, rng: &mut R) -> Result<Response, EngineError> {
        match &self.first {
            Mechanism::Grr(m) => m.randomize_with(x, rng).map(Response::Category),
            Mechanism::BitFlip(m) => m.randomize_with(x, rng).map(Response::Bits),
            other => Err(EngineError::Corrupt(format!(
                "a longitudinal first round cannot be {}",
                other.kind()
            ))),
        }
    }

    /// Round 2: one report from the memo. lgrr: Bernoulli(lie); on a lie y = uniform(d−1),
    /// reported y + (y ≥ memo). losue, lsue: every bit flipped with the one probability.
    pub fn report_from<R: Rng + ?Sized>(
        &self,
        memo: &Response,
        rng: &mut R,
    ) -> Result<Response, EngineError> {
        let d = self.params.domain;
        match (self.params.kind, memo) {
            (LongitudinalKind::Lgrr, Response::Category(b)) => {
                super::check_input(*b, d)?;
                if !super::bernoulli_exact(rng, self.second) {
                    return Ok(Response::Category(*b));
                }
                let y = rng.random_range(0..d - 1);
                Ok(Response::Category(if y >= *b { y + 1 } else { y }))
            }
            (LongitudinalKind::Losue | LongitudinalKind::Lsue, Response::Bits(bits))
                if bits.len() == (d as usize).div_ceil(8) =>
            {
                let mut out = bits.clone();
                for j in 0..d as usize {
                    if super::bernoulli_exact(rng, self.second) {
                        out[j / 8] ^= 1 << (j % 8);
                    }
                }
                Ok(Response::Bits(out))
            }
            _ => Err(EngineError::Corrupt(format!(
                "a {} memo must be {}",
                self.kind(),
                if self.params.kind == LongitudinalKind::Lgrr {
                    "a category".to_string()
                } else {
                    format!("{} packed bytes", (d as usize).div_ceil(8))
                }
            ))),
        }
    }

    /// Both rounds for a device's first report of `x`, with the memo thrown away: the
    /// composed channel's law, which is what a batch of distinct devices' reports
    /// follows (`privatize_batch`, the simulator's one-report devices). A device that
    /// reports again must keep its memo: [`device::Device`].
    pub fn fresh_report<R: Rng + ?Sized>(
        &self,
        x: u32,
        rng: &mut R,
    ) -> Result<Response, EngineError> {
        let memo = self.memoize(x, rng)?;
        self.report_from(&memo, rng)
    }
}

/// Round 2's probability from a = e^{−ε∞}, b = e^{−ε1} (correctly rounded), in the order
/// every client evaluates it (conformance/README.md): only +, −, × and ÷ on the two
/// correctly rounded doubles, so each client gets the same double.
fn second_round_probability(
    kind: LongitudinalKind,
    epsilon_perm: f64,
    epsilon_1: f64,
    domain: u32,
) -> f64 {
    match kind {
        LongitudinalKind::Lgrr => {
            let (a, b) = (super::exp_neg(epsilon_perm), super::exp_neg(epsilon_1));
            let others = f64::from(domain) - 1.0;
            others * (b - a) / ((1.0 - a) * (1.0 + others * b))
        }
        LongitudinalKind::Losue => {
            let (a, b) = (super::exp_neg(epsilon_perm), super::exp_neg(epsilon_1));
            (b - a) / ((1.0 + b) * (1.0 - a))
        }
        LongitudinalKind::Lsue => {
            let (a, b) = (
                super::exp_neg(epsilon_perm / 2.0),
                super::exp_neg(epsilon_1 / 2.0),
            );
            (b - a) / ((1.0 + b) * (1.0 - a))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpstream_config::DEFAULT_PERIOD;
    use rand::SeedableRng;

    fn build(
        kind: LongitudinalKind,
        epsilon_perm: f64,
        epsilon_1: f64,
        domain: u32,
    ) -> Longitudinal {
        Longitudinal::new(LongitudinalParams {
            kind,
            epsilon_perm,
            epsilon_1,
            domain,
            period: DEFAULT_PERIOD,
        })
        .unwrap()
    }

    /// Round 2 against multi-freq-ldpy 0.2.5's formulas (long_freq_est/L_GRR.py at k = 2,
    /// where its construction is the exact one; L_OSUE.py; L_SUE.py's sympy root): the
    /// library's q2 = 1 − p2, from `params.py` of the research notes,
    /// `np.float64(q2)` printed with repr.
    #[test]
    fn second_round_matches_multi_freq_ldpy() {
        let cases = [
            (LongitudinalKind::Lgrr, 1.0, 0.5, 0.23500371220159466),
            (LongitudinalKind::Losue, 1.0, 0.5, 0.23500371220159444),
            (LongitudinalKind::Lsue, 1.0, 0.5, 0.24613408273759796),
            (LongitudinalKind::Lgrr, 2.0, 1.0, 0.19661193324148196),
            (LongitudinalKind::Losue, 2.0, 1.0, 0.19661193324148185),
            (LongitudinalKind::Lsue, 2.0, 1.0, 0.23500371220159422),
            (LongitudinalKind::Lgrr, 4.0, 1.0, 0.26031953503671235),
            (LongitudinalKind::Losue, 4.0, 1.0, 0.26031953503671224),
            (LongitudinalKind::Lsue, 4.0, 1.0, 0.3392065770933156),
        ];
        for (kind, ep, e1, mfl) in cases {
            let q2 = build(kind, ep, e1, 2).second_probability();
            assert!(
                (q2 / mfl - 1.0).abs() < 1e-14,
                "{kind:?} ({ep}, {e1}): {q2} vs {mfl}"
            );
        }
    }

    /// The composed channel is the one-shot mechanism at ε1: P(report = x | x) and
    /// P(report = y ≠ x | x) from the two rounds' own doubles, against `grr`'s; each bit's
    /// P(1 | true 1) and P(1 | true 0) against `oue`'s and `bitflip`'s.
    #[test]
    fn the_composed_channel_is_the_one_shot_mechanism_at_epsilon_1() {
        let pairs = [
            (1.0, 0.5),
            (2.0, 1.0),
            (4.0, 1.0),
            (0.01, 0.001),
            (30.0, 15.0),
            (10.0, 9.9),
        ];
        for (ep, e1) in pairs {
            for d in [2u32, 3, 8, 1000] {
                let l = build(LongitudinalKind::Lgrr, ep, e1, d);
                let (lie1, lie2) = (l.first_probability(), l.second_probability());
                let others = f64::from(d) - 1.0;
                let keep = (1.0 - lie1) * (1.0 - lie2) + lie1 * lie2 / others;
                let other = (1.0 - keep) / others;
                let Mechanism::Grr(g) = l.composed() else {
                    panic!()
                };
                let (rho, gamma) = (g.rho(), g.gamma());
                assert!(
                    (keep / (rho + gamma) - 1.0).abs() < 1e-9,
                    "lgrr d={d} ({ep}, {e1})"
                );
                assert!((other / rho - 1.0).abs() < 1e-9, "lgrr d={d} ({ep}, {e1})");
                // The true single-report ε is ε1 (the paper's construction's is smaller).
                assert!(
                    ((keep / other).ln() / e1 - 1.0).abs() < 1e-7,
                    "d={d} ({ep}, {e1})"
                );
            }
            for kind in [LongitudinalKind::Losue, LongitudinalKind::Lsue] {
                let l = build(kind, ep, e1, 5);
                let (Mechanism::BitFlip(first), Mechanism::BitFlip(composed)) =
                    (l.first_round(), l.composed())
                else {
                    panic!()
                };
                let q2 = l.second_probability();
                let one = first.keep_probability() * (1.0 - q2) + first.drop_probability() * q2;
                let zero = first.flip() * (1.0 - q2) + first.stay_probability() * q2;
                assert!(
                    (one / composed.keep_probability() - 1.0).abs() < 1e-9,
                    "{kind:?}"
                );
                assert!(
                    (zero / composed.flip() - 1.0).abs() < 1e-9,
                    "{kind:?} ({ep}, {e1})"
                );
            }
        }
    }

    /// Round 1 reads the words the one-shot kind at ε∞ reads, and gives its bytes.
    #[test]
    fn round_one_is_the_one_shot_draw() {
        for kind in [
            LongitudinalKind::Lgrr,
            LongitudinalKind::Losue,
            LongitudinalKind::Lsue,
        ] {
            let l = build(kind, 2.0, 1.0, 11);
            for seed in 0..20 {
                let mut a = rand::rngs::StdRng::seed_from_u64(seed);
                let mut b = rand::rngs::StdRng::seed_from_u64(seed);
                let memo = l.memoize(seed as u32 % 11, &mut a).unwrap();
                let one_shot = match l.first_round() {
                    Mechanism::Grr(m) => {
                        Response::Category(m.randomize_with(seed as u32 % 11, &mut b).unwrap())
                    }
                    Mechanism::BitFlip(m) => {
                        Response::Bits(m.randomize_with(seed as u32 % 11, &mut b).unwrap())
                    }
                    _ => panic!(),
                };
                assert_eq!(memo, one_shot);
                assert_eq!(a.random::<u64>(), b.random::<u64>(), "the same words read");
            }
        }
    }

    /// Fresh two-round reports follow the composed law: 200,000 draws of one value, each
    /// cell (category, or bit frequency) within 5 standard errors.
    #[test]
    fn fresh_reports_follow_the_composed_law() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(47);
        let n = 200_000usize;
        for kind in [
            LongitudinalKind::Lgrr,
            LongitudinalKind::Losue,
            LongitudinalKind::Lsue,
        ] {
            let l = build(kind, 2.0, 0.7, 5);
            let mut counts = [0u64; 5];
            for _ in 0..n {
                match l.fresh_report(3, &mut rng).unwrap() {
                    Response::Category(c) => counts[c as usize] += 1,
                    Response::Bits(b) => {
                        for (j, c) in counts.iter_mut().enumerate() {
                            *c += u64::from((b[j / 8] >> (j % 8)) & 1);
                        }
                    }
                }
            }
            let law: Vec<f64> = match l.composed() {
                Mechanism::Grr(g) => g.report_law(&[0.0, 0.0, 0.0, 1.0, 0.0]),
                Mechanism::BitFlip(m) => m.bit_law(&[0.0, 0.0, 0.0, 1.0, 0.0]),
                _ => panic!(),
            };
            for (c, p) in counts.iter().zip(law) {
                let se = (p * (1.0 - p) / n as f64).sqrt();
                assert!(
                    (*c as f64 / n as f64 - p).abs() < 5.0 * se,
                    "{kind:?}: {counts:?}"
                );
            }
        }
    }

    #[test]
    fn refuses_parameters_outside_the_construction() {
        let with = |ep, e1, d| {
            Longitudinal::new(LongitudinalParams {
                kind: LongitudinalKind::Lgrr,
                epsilon_perm: ep,
                epsilon_1: e1,
                domain: d,
                period: DEFAULT_PERIOD,
            })
        };
        assert!(with(1.0, 1.0, 4).is_err());
        assert!(with(1.0, 2.0, 4).is_err());
        assert!(with(701.0, 2.0, 4).is_err());
        assert!(with(2.0, 0.0, 4).is_err());
        assert!(with(2.0, 1.0, 1).is_err());
        assert!(with(700.0, 699.0, 2).is_ok());
        // A memo of the wrong form is refused, not reported from.
        let l = with(2.0, 1.0, 4).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        assert!(l.report_from(&Response::Bits(vec![1]), &mut rng).is_err());
        assert!(l.report_from(&Response::Category(4), &mut rng).is_err());
    }
}
