//! Local randomizers: the client side that privatizes a value before it leaves the device,
//! and the algebra the engine needs to debias what arrives.
//!
//! Every randomizer takes its generator from the caller (`randomize_with`,
//! [`privatize_batch`]). Real reports draw from [`client_rng`], a generator freshly seeded
//! from the OS on every call (safe across `fork`); a caller that needs reproducible
//! simulation passes its own seeded generator, never for real users' data.

mod bitflip;
mod channel;
mod client_rng;
mod cohort;
mod discrete_noise;
mod fingerprint;
mod grr;
mod hadamard;
mod ibu;
mod likelihood;
pub mod longitudinal;
mod noise;
mod olh;
mod olh_solver;
mod olh_whitener;
mod privatize;
mod row_strata;
mod subset;
pub(crate) mod subset_index;

pub use bitflip::BitFlip;
pub use channel::Channel;
pub use client_rng::client_rng;
pub use cohort::Cohort;
pub use discrete_noise::{bernoulli_exp, discrete_gaussian, discrete_laplace};
pub use grr::Grr;
pub use hadamard::{fwht, Hadamard};
pub use ibu::{PlainEstimate, SnapshotEstimates};
pub use longitudinal::{Longitudinal, Response};
pub use noise::{sample_laplace, Noise, NoiseKind};
pub use olh::{olh_bucket, olh_pool, Olh};
pub use olh_solver::{PoolSolver, OLH_EXACT_VARIANCE_WORK};
pub use olh_whitener::SupportWhitener;
pub use privatize::{privatize_batch, simulate_sketch};
pub use subset::{default_k as subset_default_k, Subset};

use rand::Rng;

use ldpstream_config::{Domain, Epsilon, MechanismConfig};
use serde::{Deserialize, Serialize};

use crate::error::EngineError;
use crate::sketch::{BitSketch, CountSketch, PoolSketch, SignedSketch, Sketch, SumSketch};

/// A debiased frequency estimate with its per-category standard error.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Estimate {
    pub estimate: Vec<f64>,
    pub std_error: Vec<f64>,
}

impl Estimate {
    /// Applies an affine debiasing map to observed frequencies `counts/n`.
    pub(crate) fn from_frequencies(
        counts: &[u64],
        n: u64,
        debias: impl Fn(f64) -> f64,
        std_error: impl Fn(f64, f64) -> f64,
    ) -> Self {
        if n == 0 {
            return Estimate::default();
        }
        let nf = n as f64;
        let (estimate, std_error) = counts
            .iter()
            .map(|&c| {
                let q = c as f64 / nf;
                (debias(q), std_error(q, nf))
            })
            .unzip();
        Estimate {
            estimate,
            std_error,
        }
    }
}

/// The privacy a mechanism gives each report, as stated in output records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Privacy {
    /// The mechanism kind, e.g. `"grr"`.
    pub kind: String,
    /// ε of ε-LDP; null for Gaussian noise (see `rho`) and for raw reports (no local privacy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epsilon: Option<f64>,
    /// ρ of ρ-zCDP, for Gaussian noise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rho: Option<f64>,
    /// The longitudinal kinds: ε∞ of the memoized response, spent once per distinct value
    /// a device holds (`epsilon` is then ε1, one report's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epsilon_perm: Option<f64>,
    /// The longitudinal kinds: the period (ms) a device reports each metric at most once in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_ms: Option<u64>,
}

/// A stream's mechanism, built once from its config.
#[derive(Debug, Clone, PartialEq)]
pub enum Mechanism {
    Grr(Grr),
    BitFlip(BitFlip),
    Noise(Noise),
    Hadamard(Hadamard),
    Cohort(Box<Cohort>),
    Channel(Box<Channel>),
    /// k-subset selection; its sketch is the d item counts plus n (a [`BitSketch`]).
    Subset(Subset),
    /// Optimized local hashing with a fixed seed pool.
    Olh(Box<Olh>),
    /// No local randomizer: the curator sees true categories.
    Raw {
        domain: u32,
    },
    /// A memoized two-round randomizer (`lgrr`, `losue`, `lsue`). Its reports follow its
    /// composed channel, which every sketch, estimate and test reads through
    /// [`Mechanism::channel`]; only its kind, privacy and fingerprint are its own.
    Longitudinal(Box<Longitudinal>),
}

impl Mechanism {
    pub fn from_config(config: &MechanismConfig) -> Result<Self, EngineError> {
        Ok(match config {
            MechanismConfig::Grr { epsilon, domain } => {
                Mechanism::Grr(Grr::new(*epsilon, *domain)?)
            }
            MechanismConfig::Bitflip { epsilon, domain } => {
                Mechanism::BitFlip(BitFlip::new(*epsilon, *domain)?)
            }
            MechanismConfig::Oue { epsilon, domain } => {
                Mechanism::BitFlip(BitFlip::optimized(*epsilon, *domain)?)
            }
            MechanismConfig::Gauss {
                rho,
                domain,
                max_abs,
            } => Mechanism::Noise(
                Noise::new(NoiseKind::Gauss { rho: *rho }, *domain)?.with_max_abs(*max_abs)?,
            ),
            MechanismConfig::Laplace {
                epsilon,
                domain,
                max_abs,
            } => Mechanism::Noise(
                Noise::new(NoiseKind::Laplace { epsilon: *epsilon }, *domain)?
                    .with_max_abs(*max_abs)?,
            ),
            MechanismConfig::Hadamard { epsilon, domain } => {
                Mechanism::Hadamard(Hadamard::new(*epsilon, *domain)?)
            }
            MechanismConfig::Cohort {
                epsilon,
                domain,
                cohorts,
                seed,
            } => Mechanism::Cohort(Box::new(Cohort::new(*epsilon, *domain, *cohorts, *seed)?)),
            MechanismConfig::Subset { epsilon, domain, k } => {
                Mechanism::Subset(Subset::new(*epsilon, *domain, *k)?)
            }
            MechanismConfig::Matrix { matrix } => {
                Mechanism::Channel(Box::new(Channel::new(matrix)?))
            }
            MechanismConfig::Olh {
                epsilon,
                domain,
                pool_seed,
                ..
            } => {
                // olh_shape fills the defaults the config documents.
                let (g, pool_size) = config.olh_shape().unwrap_or((0, 0));
                Mechanism::Olh(Box::new(Olh::new(
                    *epsilon, *domain, g, pool_size, *pool_seed,
                )?))
            }
            MechanismConfig::Raw { domain } => {
                check_domain(*domain)?;
                Mechanism::Raw { domain: *domain }
            }
            MechanismConfig::Lgrr { .. }
            | MechanismConfig::Losue { .. }
            | MechanismConfig::Lsue { .. } => match Longitudinal::from_config(config) {
                Some(l) => Mechanism::Longitudinal(Box::new(l?)),
                None => return Err(EngineError::Corrupt("not a longitudinal table".into())),
            },
        })
    }

    /// The channel a report follows, which the statistics use: the composed one of a
    /// longitudinal mechanism, else the mechanism itself. Every statistics entry point
    /// reads the mechanism through this (the test `every_statistics_path_sees_the_composed_channel`
    /// guards it).
    pub fn channel(&self) -> &Mechanism {
        match self {
            Mechanism::Longitudinal(l) => l.composed(),
            other => other,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Mechanism::Grr(_) => "grr",
            Mechanism::BitFlip(m) => m.kind(),
            Mechanism::Noise(n) => match n.kind() {
                NoiseKind::Gauss { .. } => "gauss",
                NoiseKind::Laplace { .. } => "laplace",
            },
            Mechanism::Hadamard(_) => "hadamard",
            Mechanism::Cohort(_) => "cohort",
            Mechanism::Channel(_) => "matrix",
            Mechanism::Subset(_) => "subset",
            Mechanism::Olh(_) => "olh",
            Mechanism::Raw { .. } => "raw",
            Mechanism::Longitudinal(l) => l.kind(),
        }
    }

    /// d, the number of true categories.
    pub fn domain(&self) -> usize {
        (match self {
            Mechanism::Grr(m) => m.domain(),
            Mechanism::BitFlip(m) => m.domain(),
            Mechanism::Noise(m) => m.domain(),
            Mechanism::Hadamard(m) => m.domain(),
            Mechanism::Cohort(m) => m.domain(),
            Mechanism::Channel(m) => m.domain(),
            Mechanism::Subset(m) => m.domain(),
            Mechanism::Olh(m) => m.domain(),
            Mechanism::Raw { domain } => *domain,
            Mechanism::Longitudinal(l) => l.domain(),
        }) as usize
    }

    /// Builds now what the mechanism computes once per config and keeps (OLH's pool
    /// factor: seconds at d = 4,096), so that a service's first snapshot round does not pay
    /// for it. Err says why the pool gives no unbiased estimate (its records say it too).
    pub fn prepare(&self) -> Result<(), String> {
        match self {
            Mechanism::Olh(m) => m.prepare(),
            _ => Ok(()),
        }
    }

    /// An empty sketch of the right kind and shape.
    pub fn new_sketch(&self) -> Sketch {
        match self {
            Mechanism::Grr(m) => Sketch::Counts(CountSketch::new(m.domain() as usize)),
            Mechanism::Raw { domain } => Sketch::Counts(CountSketch::new(*domain as usize)),
            Mechanism::Channel(m) => Sketch::Counts(CountSketch::new(m.signals())),
            Mechanism::BitFlip(m) => Sketch::Bits(BitSketch::new(m.domain() as usize)),
            Mechanism::Subset(m) => Sketch::Bits(BitSketch::new(m.domain() as usize)),
            Mechanism::Noise(m) => Sketch::Sums(SumSketch::new(m.domain() as usize)),
            Mechanism::Hadamard(m) => Sketch::Signed(SignedSketch::new(m.rows() as usize)),
            Mechanism::Cohort(m) => Sketch::Signed(SignedSketch::new(m.cohorts() as usize)),
            Mechanism::Olh(m) => {
                Sketch::Pool(PoolSketch::new(m.pool_size() as usize, m.g() as usize))
            }
            Mechanism::Longitudinal(l) => l.composed().new_sketch(),
        }
    }

    pub fn privacy(&self) -> Privacy {
        if let Mechanism::Longitudinal(l) = self {
            return Privacy {
                kind: l.kind().to_string(),
                epsilon: Some(l.epsilon_1()),
                rho: None,
                epsilon_perm: Some(l.epsilon_perm()),
                period_ms: Some(l.period_ms()),
            };
        }
        let (epsilon, rho) = match self {
            Mechanism::Grr(m) => (Some(m.epsilon()), None),
            Mechanism::BitFlip(m) => (Some(m.epsilon()), None),
            Mechanism::Noise(m) => match m.kind() {
                NoiseKind::Gauss { rho } => (None, Some(rho)),
                NoiseKind::Laplace { epsilon } => (Some(epsilon), None),
            },
            Mechanism::Hadamard(m) => (Some(m.epsilon()), None),
            Mechanism::Cohort(m) => (Some(m.epsilon()), None),
            Mechanism::Olh(m) => (Some(m.epsilon()), None),
            Mechanism::Channel(m) => (Some(m.epsilon()).filter(|e| e.is_finite()), None),
            Mechanism::Subset(m) => (Some(m.epsilon()), None),
            Mechanism::Raw { .. } | Mechanism::Longitudinal(_) => (None, None),
        };
        Privacy {
            kind: self.kind().to_string(),
            epsilon,
            rho,
            epsilon_perm: None,
            period_ms: None,
        }
    }

    /// The unbiased frequency estimate and its standard errors from a sketch snapshot.
    pub fn estimate(&self, sketch: &Sketch) -> Result<Estimate, EngineError> {
        if let Mechanism::Longitudinal(l) = self {
            return l.composed().estimate(sketch);
        }
        Ok(match (self, sketch) {
            (Mechanism::Grr(m), Sketch::Counts(s)) => m.estimate(&s.counts(), s.n()),
            (Mechanism::Raw { .. }, Sketch::Counts(s)) => Estimate::from_frequencies(
                &s.counts(),
                s.n(),
                |q| q,
                |q, nf| (q * (1.0 - q) / nf).sqrt(),
            ),
            (Mechanism::Channel(m), Sketch::Counts(s)) => m.estimate(&s.counts(), s.n()),
            (Mechanism::BitFlip(m), Sketch::Bits(s)) => m.estimate(s.bit_counts(), s.n()),
            (Mechanism::Subset(m), Sketch::Bits(s)) => m.estimate(s.bit_counts(), s.n()),
            (Mechanism::Noise(m), Sketch::Sums(s)) => m.estimate(&s.sums_f64(), s.n()),
            (Mechanism::Hadamard(m), Sketch::Signed(s)) => m.estimate_by_rows(s),
            (Mechanism::Cohort(m), Sketch::Signed(s)) => m.estimate_by_rows(s),
            (Mechanism::Olh(m), Sketch::Pool(s)) => m.estimate(s.table(), s.n()),
            _ => return Err(self.sketch_mismatch(sketch)),
        })
    }

    /// Refuses a sketch this mechanism does not produce: another kind, or another number of
    /// cells (a d = 3 sketch read into a d = 10 stream gave a 3-entry estimate).
    pub fn check_sketch(&self, sketch: &Sketch) -> Result<(), EngineError> {
        if let Mechanism::Longitudinal(l) = self {
            return l.composed().check_sketch(sketch);
        }
        // OLH's empty table can be 128 MiB: compare its shape without building one.
        if let (Mechanism::Olh(m), Sketch::Pool(s)) = (self, sketch) {
            return if s.pool_size() == m.pool_size() as usize && s.g() == m.g() as usize {
                Ok(())
            } else {
                Err(self.sketch_mismatch(sketch))
            };
        }
        let own = self.new_sketch();
        if std::mem::discriminant(&own) == std::mem::discriminant(sketch)
            && own.cells() == sketch.cells()
        {
            Ok(())
        } else {
            Err(self.sketch_mismatch(sketch))
        }
    }

    pub(crate) fn sketch_mismatch(&self, sketch: &Sketch) -> EngineError {
        EngineError::Corrupt(format!(
            "a {} mechanism cannot read this sketch ({} cells)",
            self.kind(),
            sketch.cells()
        ))
    }
}

// The ranges are the config's ([`Epsilon`], [`Domain`]): a value the config validated
// passes, and one from elsewhere (plan, audit, tests build mechanisms directly) meets the
// same rule rather than a copy of it.
pub(crate) fn check_epsilon(epsilon: f64) -> Result<Epsilon, EngineError> {
    Epsilon::new(epsilon).ok_or_else(|| {
        EngineError::invalid(
            "epsilon",
            epsilon,
            "a number from 1e-9 to 700 (see ldpstream_config::MAX_EPSILON for why)",
        )
    })
}

pub(crate) fn check_domain(domain: u32) -> Result<Domain, EngineError> {
    Domain::new(domain).ok_or_else(|| {
        EngineError::invalid("domain", domain, "an integer from 2 to 2^24 (MAX_DOMAIN)")
    })
}

pub(crate) fn check_input(x: u32, domain: u32) -> Result<(), EngineError> {
    if x < domain {
        Ok(())
    } else {
        Err(EngineError::InputOutOfDomain {
            value: u64::from(x),
            domain: u64::from(domain),
        })
    }
}

/// Probability that a ±1 mechanism reports the true sign, `e^ε/(1+e^ε)`.
pub(crate) fn sign_keep(epsilon: f64) -> f64 {
    1.0 / (1.0 + (-epsilon).exp())
}

/// `e^{−x}` correctly rounded (CORE-MATH), for the probabilities the randomizers draw
/// against: the same double on every platform and in every client, so that the same random
/// words give the same report (conformance/README.md). `f64::exp` is the platform libm's:
/// glibc 2.36 rounds about 1 input in 1000 the other way (e^{−7.340955895268801}).
pub(crate) fn exp_neg(x: f64) -> f64 {
    core_math::exp(-x)
}

/// Probability that a ±1 mechanism reports the wrong sign, `1/(1+e^ε)`, computed as
/// `e^{−ε}/(1+e^{−ε})` so that it neither overflows nor rounds to 0 for large ε.
pub(crate) fn sign_lie(epsilon: f64) -> f64 {
    let decay = exp_neg(epsilon);
    decay / (1.0 + decay)
}

/// `η = (e^ε−1)/(2(e^ε+1)) = tanh(ε/2)/2`, without the cancellation of `sign_keep − ½`
/// at small ε.
pub(crate) fn sign_eta(epsilon: f64) -> f64 {
    0.5 * (0.5 * epsilon).tanh()
}

/// A Bernoulli(p) draw that is exact for the double `p`: the uniform U is generated 64
/// bits at a time and compared with the binary expansion of p until they differ, so
/// `P(U < p) = p` exactly, however small p is. (`random::<f64>() < p` resolves only
/// 2⁻⁵³, so for p below that it never fires, and `random_bool` resolves 2⁻⁶⁴.) Costs one
/// 64-bit word almost always.
pub fn bernoulli_exact<R: Rng + ?Sized>(rng: &mut R, p: f64) -> bool {
    if p.is_nan() || p <= 0.0 {
        return false;
    }
    if p >= 1.0 {
        return true;
    }
    // p = m·2^(−shift), m < 2⁵³ an integer.
    let bits = p.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i64;
    let fraction = bits & ((1u64 << 52) - 1);
    let (m, shift) = if exponent == 0 {
        (fraction, 1074i64)
    } else {
        (fraction | (1u64 << 52), 1075 - exponent)
    };
    let mut chunk_end = 64i64;
    loop {
        // Bits (chunk_end − 64, chunk_end] of p's expansion: ⌊p·2^chunk_end⌋ mod 2⁶⁴.
        let up = chunk_end - shift;
        let chunk = if up >= 64 {
            0
        } else if up >= 0 {
            ((u128::from(m) << up) & u128::from(u64::MAX)) as u64
        } else if up > -64 {
            m >> (-up)
        } else {
            0
        };
        let word = rng.next_u64();
        if word != chunk {
            return word < chunk;
        }
        if up >= 64 {
            // Every later bit of p is 0: U ≥ p unless all of U's later bits are 0 too,
            // an event of probability 0.
            return false;
        }
        chunk_end += 64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngCore, SeedableRng};

    /// Replays a fixed list of 64-bit words, then zeros.
    struct Script(Vec<u64>);

    impl RngCore for Script {
        fn next_u32(&mut self) -> u32 {
            self.next_u64() as u32
        }
        fn next_u64(&mut self) -> u64 {
            if self.0.is_empty() {
                0
            } else {
                self.0.remove(0)
            }
        }
        fn fill_bytes(&mut self, dst: &mut [u8]) {
            for b in dst {
                *b = self.next_u64() as u8;
            }
        }
    }

    /// The draw compares U = 0.w1 w2 … (64-bit words) with p bit for bit.
    #[test]
    fn bernoulli_compares_with_the_binary_expansion() {
        // p = ½: the first word decides, at its top bit.
        assert!(bernoulli_exact(&mut Script(vec![(1 << 63) - 1]), 0.5));
        assert!(!bernoulli_exact(&mut Script(vec![1 << 63]), 0.5));
        // p = 3·2⁻⁶⁶ = 0.000…0011 (bits 65, 66): U < p iff w1 = 0 and w2 < 3·2⁶².
        let p = 3.0 * 2f64.powi(-66);
        assert!(bernoulli_exact(&mut Script(vec![0, (3 << 62) - 1]), p));
        assert!(!bernoulli_exact(&mut Script(vec![0, 3 << 62]), p));
        assert!(!bernoulli_exact(&mut Script(vec![1, 0]), p));
        // e^{-60}/(1+e^{-60}) ≈ 8.8e-27 ≈ 2⁻⁸⁷: reachable, with U = 0 (all-zero words).
        assert!(bernoulli_exact(&mut Script(vec![]), sign_lie(60.0)));
        assert!(bernoulli_exact(&mut Script(vec![]), f64::from_bits(1)));
        assert!(!bernoulli_exact(&mut Script(vec![0, 1]), f64::from_bits(1)));
        assert!(!bernoulli_exact(&mut Script(vec![]), 0.0));
        assert!(bernoulli_exact(&mut Script(vec![u64::MAX]), 1.0));
    }

    /// Frequencies of 10⁶ draws within 5 standard errors of p.
    #[test]
    fn bernoulli_frequencies_match_p() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for p in [0.3, 0.01, 1.0 / 3.0, 0.999] {
            let n = 1_000_000;
            let hits = (0..n).filter(|_| bernoulli_exact(&mut rng, p)).count();
            let se = (p * (1.0 - p) / n as f64).sqrt();
            assert!(
                (hits as f64 / n as f64 - p).abs() < 5.0 * se,
                "p {p}: {hits}"
            );
        }
    }

    /// The stable forms agree with the textbook ones where those are accurate, and stay
    /// accurate where those cancel or overflow.
    #[test]
    fn sign_probabilities_are_stable() {
        for eps in [0.1, 1.0, 5.0] {
            let e = f64::exp(eps);
            assert!((sign_eta(eps) - (e - 1.0) / (2.0 * (e + 1.0))).abs() < 1e-15);
            assert!((sign_lie(eps) - 1.0 / (1.0 + e)).abs() < 1e-15);
        }
        // η ≈ ε/4 at small ε, to full relative precision (sign_keep − ½ would keep none).
        assert!((sign_eta(1e-12) / 2.5e-13 - 1.0).abs() < 1e-12);
        // The lie probability at ε = 700 is e^{-700}(1 − e^{-700}) to 1e-14, not 0.
        assert!((sign_lie(700.0) / (-700f64).exp() - 1.0).abs() < 1e-14);
    }

    /// Correctly rounded where glibc's exp is not: e^{−7.340955895268801} is
    /// 0x3f453f6daa7c37b1 (5.4172e-20 above; 0x…b0 is 5.4249e-20 below).
    #[test]
    fn exp_neg_is_correctly_rounded() {
        assert_eq!(exp_neg(7.340955895268801).to_bits(), 0x3f45_3f6d_aa7c_37b1);
        assert_eq!(exp_neg(10.0).to_bits(), 0x3f07_cd79_b564_7c9b);
        assert_eq!(exp_neg(0.0), 1.0);
    }
}
