use rand::distr::Open01;
use rand::Rng;
use rand_distr::{Distribution, StandardNormal};

use super::Estimate;
use crate::error::EngineError;

/// Which noise the devices add to the one-hot vector.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NoiseKind {
    /// N(0, 1/ρ) per coordinate: ρ-zCDP (L2 sensitivity √2).
    Gauss { rho: f64 },
    /// Lap(2/ε) per coordinate: ε-LDP (L1 sensitivity 2).
    Laplace { epsilon: f64 },
}

/// Local noise addition (seed 002 §5.1): report `e_x + Z`, Z i.i.d. per coordinate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Noise {
    kind: NoiseKind,
    domain: u32,
    /// Largest |coordinate| a report may have; a report beyond it is rejected whole, so
    /// that one client cannot move a coordinate sum by more than this.
    max_abs: f64,
}

/// Standard deviations of Gaussian noise in the default `max_abs`: an honest coordinate
/// lies beyond 1 + 40σ with probability about 1e-349.
pub const GAUSS_DEFAULT_SIGMAS: f64 = 40.0;
/// Laplace scales in the default `max_abs`: an honest coordinate lies beyond 1 + 60·b
/// with probability e^-60 ≈ 1e-26.
pub const LAPLACE_DEFAULT_SCALES: f64 = 60.0;

impl Noise {
    pub fn new(kind: NoiseKind, domain: u32) -> Result<Self, EngineError> {
        match kind {
            NoiseKind::Gauss { rho } => {
                if !(rho.is_finite() && rho > 0.0) {
                    return Err(EngineError::invalid("rho", rho, "a finite number > 0"));
                }
            }
            NoiseKind::Laplace { epsilon } => {
                super::check_epsilon(epsilon)?;
                if epsilon < ldpstream_config::MIN_LAPLACE_EPSILON {
                    return Err(EngineError::invalid(
                        "epsilon",
                        epsilon,
                        "at least 1e-7 for Laplace noise (it must fit a sum sketch's ±2^31)",
                    ));
                }
            }
        }
        super::check_domain(domain)?;
        let max_abs = 1.0
            + match kind {
                NoiseKind::Gauss { rho } => GAUSS_DEFAULT_SIGMAS / rho.sqrt(),
                NoiseKind::Laplace { epsilon } => LAPLACE_DEFAULT_SCALES * 2.0 / epsilon,
            };
        Ok(Noise {
            kind,
            domain,
            max_abs,
        })
    }

    /// Replaces the default bound on |coordinate| (see [`Noise::max_abs`]) when `max_abs`
    /// is given.
    pub fn with_max_abs(self, max_abs: Option<f64>) -> Result<Self, EngineError> {
        match max_abs {
            None => Ok(self),
            Some(v) if v.is_finite() && v > 0.0 => Ok(Noise { max_abs: v, ..self }),
            Some(v) => Err(EngineError::invalid("max_abs", v, "a finite number > 0")),
        }
    }

    /// The largest |coordinate| a folded report may have.
    pub fn max_abs(&self) -> f64 {
        self.max_abs
    }

    pub fn kind(&self) -> NoiseKind {
        self.kind
    }

    pub fn domain(&self) -> u32 {
        self.domain
    }

    /// Noise variance per coordinate per report: `1/ρ` or `8/ε²` (= 2·(2/ε)²).
    pub fn variance(&self) -> f64 {
        match self.kind {
            NoiseKind::Gauss { rho } => 1.0 / rho,
            NoiseKind::Laplace { epsilon } => 8.0 / (epsilon * epsilon),
        }
    }

    /// Privatizes `x` with the thread's CSPRNG.
    pub fn randomize(&self, x: u32) -> Result<Vec<f64>, EngineError> {
        self.randomize_with(x, &mut rand::rng())
    }

    /// Privatizes `x` with a caller-supplied generator (seeded only for simulation).
    pub fn randomize_with<R: Rng + ?Sized>(
        &self,
        x: u32,
        rng: &mut R,
    ) -> Result<Vec<f64>, EngineError> {
        super::check_input(x, self.domain)?;
        let mut out = vec![0.0; self.domain as usize];
        self.randomize_into(x, rng, &mut out);
        Ok(out)
    }

    pub(crate) fn randomize_into<R: Rng + ?Sized>(&self, x: u32, rng: &mut R, out: &mut [f64]) {
        for z in out.iter_mut() {
            *z = self.sample_noise(rng);
        }
        out[x as usize] += 1.0;
    }

    /// One draw of the per-coordinate noise.
    pub fn sample_noise<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        match self.kind {
            NoiseKind::Gauss { rho } => {
                let z: f64 = StandardNormal.sample(rng);
                z / rho.sqrt()
            }
            NoiseKind::Laplace { epsilon } => sample_laplace(rng, 2.0 / epsilon),
        }
    }

    /// `p̂ = Ĥ/n`, with standard error `sqrt((p(1−p) + σ²)/n)` (p clipped into [0, 1]).
    pub fn estimate(&self, sums: &[f64], n: u64) -> Estimate {
        if n == 0 {
            return Estimate::default();
        }
        let nf = n as f64;
        let var = self.variance();
        let (estimate, std_error) = sums
            .iter()
            .map(|&s| {
                let p = s / nf;
                let pc = p.clamp(0.0, 1.0);
                (p, ((pc * (1.0 - pc) + var) / nf).sqrt())
            })
            .unzip();
        Estimate {
            estimate,
            std_error,
        }
    }
}

/// One draw of Lap(scale) by the inverse CDF. The uniform is drawn from the open interval
/// (0, 1): at u = 0 the logarithm would be −∞ (a 2⁻⁵³ chance per draw from `[0, 1)`).
pub fn sample_laplace<R: Rng + ?Sized>(rng: &mut R, scale: f64) -> f64 {
    let u: f64 = Open01.sample(rng);
    let v = u - 0.5;
    -scale * v.signum() * (1.0 - 2.0 * v.abs()).ln()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngCore;

    /// A generator stuck at its extremes: the lowest and the highest 64-bit words.
    struct Stuck(u64);

    impl RngCore for Stuck {
        fn next_u32(&mut self) -> u32 {
            self.0 as u32
        }
        fn next_u64(&mut self) -> u64 {
            self.0
        }
        fn fill_bytes(&mut self, dst: &mut [u8]) {
            dst.fill(self.0 as u8);
        }
    }

    /// The uniform that `[0, 1)` sampling maps to 0 (all bits zero) and the one it maps
    /// closest to 1 must both give finite noise.
    #[test]
    fn laplace_is_finite_at_the_extreme_uniforms() {
        for word in [0u64, u64::MAX] {
            let z = sample_laplace(&mut Stuck(word), 2.0);
            assert!(z.is_finite(), "word {word:#x}: {z}");
        }
        let noise = Noise::new(NoiseKind::Laplace { epsilon: 1.0 }, 3).unwrap();
        assert!(noise.sample_noise(&mut Stuck(0)).is_finite());
    }
}
