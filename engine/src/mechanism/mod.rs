//! Local randomizers: the client side that privatizes a value before it leaves the device,
//! and the algebra the engine needs to debias what arrives.
//!
//! Every randomizer draws from a cryptographically secure generator by default
//! (`rand::rng()`, a ChaCha12 generator seeded and periodically reseeded from the OS). A
//! caller that needs reproducible simulation passes its own seeded generator to the
//! `randomize_with` methods; never do that for real users' data.

mod batch;
mod bitflip;
mod channel;
mod cohort;
mod grr;
mod hadamard;
mod likelihood;
mod noise;

pub use batch::{privatize_batch, simulate_sketch};
pub use bitflip::BitFlip;
pub use channel::Channel;
pub use cohort::Cohort;
pub use grr::Grr;
pub use hadamard::{fwht, Hadamard};
pub use noise::{Noise, NoiseKind};

use ldpstream_config::MechanismConfig;
use serde::{Deserialize, Serialize};

use crate::error::EngineError;
use crate::sketch::{BitSketch, CountSketch, SignedSketch, Sketch, SumSketch};

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
    /// No local randomizer: the curator sees true categories.
    Raw {
        domain: u32,
    },
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
            MechanismConfig::Gauss { rho, domain } => {
                Mechanism::Noise(Noise::new(NoiseKind::Gauss { rho: *rho }, *domain)?)
            }
            MechanismConfig::Laplace { epsilon, domain } => Mechanism::Noise(Noise::new(
                NoiseKind::Laplace { epsilon: *epsilon },
                *domain,
            )?),
            MechanismConfig::Hadamard { epsilon, domain } => {
                Mechanism::Hadamard(Hadamard::new(*epsilon, *domain)?)
            }
            MechanismConfig::Cohort {
                epsilon,
                domain,
                cohorts,
                seed,
            } => Mechanism::Cohort(Box::new(Cohort::new(*epsilon, *domain, *cohorts, *seed)?)),
            MechanismConfig::Matrix { matrix } => {
                Mechanism::Channel(Box::new(Channel::new(matrix)?))
            }
            MechanismConfig::Raw { domain } => {
                check_domain(*domain)?;
                Mechanism::Raw { domain: *domain }
            }
        })
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Mechanism::Grr(_) => "grr",
            Mechanism::BitFlip(_) => "bitflip",
            Mechanism::Noise(n) => match n.kind() {
                NoiseKind::Gauss { .. } => "gauss",
                NoiseKind::Laplace { .. } => "laplace",
            },
            Mechanism::Hadamard(_) => "hadamard",
            Mechanism::Cohort(_) => "cohort",
            Mechanism::Channel(_) => "matrix",
            Mechanism::Raw { .. } => "raw",
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
            Mechanism::Raw { domain } => *domain,
        }) as usize
    }

    /// An empty sketch of the right kind and shape.
    pub fn new_sketch(&self) -> Sketch {
        match self {
            Mechanism::Grr(m) => Sketch::Counts(CountSketch::new(m.domain() as usize)),
            Mechanism::Raw { domain } => Sketch::Counts(CountSketch::new(*domain as usize)),
            Mechanism::Channel(m) => Sketch::Counts(CountSketch::new(m.signals())),
            Mechanism::BitFlip(m) => Sketch::Bits(BitSketch::new(m.domain() as usize)),
            Mechanism::Noise(m) => Sketch::Sums(SumSketch::new(m.domain() as usize)),
            Mechanism::Hadamard(m) => Sketch::Signed(SignedSketch::new(m.rows() as usize)),
            Mechanism::Cohort(m) => Sketch::Signed(SignedSketch::new(m.cohorts() as usize)),
        }
    }

    pub fn privacy(&self) -> Privacy {
        let (epsilon, rho) = match self {
            Mechanism::Grr(m) => (Some(m.epsilon()), None),
            Mechanism::BitFlip(m) => (Some(m.epsilon()), None),
            Mechanism::Noise(m) => match m.kind() {
                NoiseKind::Gauss { rho } => (None, Some(rho)),
                NoiseKind::Laplace { epsilon } => (Some(epsilon), None),
            },
            Mechanism::Hadamard(m) => (Some(m.epsilon()), None),
            Mechanism::Cohort(m) => (Some(m.epsilon()), None),
            Mechanism::Channel(m) => (Some(m.epsilon()).filter(|e| e.is_finite()), None),
            Mechanism::Raw { .. } => (None, None),
        };
        Privacy {
            kind: self.kind().to_string(),
            epsilon,
            rho,
        }
    }

    /// The unbiased frequency estimate and its standard errors from a sketch snapshot.
    pub fn estimate(&self, sketch: &Sketch) -> Result<Estimate, EngineError> {
        Ok(match (self, sketch) {
            (Mechanism::Grr(m), Sketch::Counts(s)) => m.estimate(s.counts(), s.n()),
            (Mechanism::Raw { .. }, Sketch::Counts(s)) => Estimate::from_frequencies(
                s.counts(),
                s.n(),
                |q| q,
                |q, nf| (q * (1.0 - q) / nf).sqrt(),
            ),
            (Mechanism::Channel(m), Sketch::Counts(s)) => m.estimate(s.counts(), s.n()),
            (Mechanism::BitFlip(m), Sketch::Bits(s)) => m.estimate(s.bit_counts(), s.n()),
            (Mechanism::Noise(m), Sketch::Sums(s)) => m.estimate(&s.sums_f64(), s.n()),
            (Mechanism::Hadamard(m), Sketch::Signed(s)) => m.estimate(&s.signed(), s.n()),
            (Mechanism::Cohort(m), Sketch::Signed(s)) => m.estimate(&s.signed(), s.n()),
            _ => return Err(self.sketch_mismatch(sketch)),
        })
    }

    pub(crate) fn sketch_mismatch(&self, sketch: &Sketch) -> EngineError {
        EngineError::Corrupt(format!(
            "a {} mechanism cannot read this sketch ({} cells)",
            self.kind(),
            sketch.cells()
        ))
    }
}

pub(crate) fn check_epsilon(epsilon: f64) -> Result<(), EngineError> {
    if epsilon.is_finite() && epsilon > 0.0 {
        Ok(())
    } else {
        Err(EngineError::invalid(
            "epsilon",
            epsilon,
            "a finite number > 0",
        ))
    }
}

pub(crate) fn check_domain(domain: u32) -> Result<(), EngineError> {
    if domain >= 2 {
        Ok(())
    } else {
        Err(EngineError::invalid("domain", domain, "an integer >= 2"))
    }
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

/// `η = (e^ε−1)/(2(e^ε+1))` = `sign_keep − ½`.
pub(crate) fn sign_eta(epsilon: f64) -> f64 {
    sign_keep(epsilon) - 0.5
}
