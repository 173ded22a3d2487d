use rand::distr::Open01;
use rand::Rng;
use rand_distr::Distribution;

use super::discrete_noise::{discrete_gaussian, discrete_laplace};
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
///
/// Z is drawn exactly on the grid 2^−`grid_exp`·ℤ, from the discrete Gaussian or discrete
/// Laplace (docs/STATISTICS.md §3.1), never as a rounded float: every report is then a
/// multiple of the grid step that f32 holds exactly, so neither its low-order bits nor the
/// set of reachable values depends on the true category.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Noise {
    kind: NoiseKind,
    domain: u32,
    /// The grid step is 2^−grid_exp.
    grid_exp: u32,
    /// The noise's scale in grid steps: σ of the discrete Gaussian, t of the discrete
    /// Laplace; rounded up, so the noise is never smaller than the configured ρ or ε asks.
    grid_scale: u64,
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
                if !(rho.is_finite() && rho >= ldpstream_config::MIN_RHO) {
                    return Err(EngineError::invalid(
                        "rho",
                        rho,
                        "at least 1e-11 (the noise's grid must stay exact in f32)",
                    ));
                }
            }
            NoiseKind::Laplace { epsilon } => {
                super::check_epsilon(epsilon)?;
                if epsilon < ldpstream_config::MIN_LAPLACE_EPSILON {
                    return Err(EngineError::invalid(
                        "epsilon",
                        epsilon,
                        "at least 1e-5 for Laplace noise (its grid must stay exact in f32)",
                    ));
                }
            }
        }
        super::check_domain(domain)?;
        let scale = match kind {
            NoiseKind::Gauss { rho } => 1.0 / rho.sqrt(),
            NoiseKind::Laplace { epsilon } => 2.0 / epsilon,
        };
        let max_abs = 1.0
            + match kind {
                NoiseKind::Gauss { .. } => GAUSS_DEFAULT_SIGMAS * scale,
                NoiseKind::Laplace { .. } => LAPLACE_DEFAULT_SCALES * scale,
            };
        let grid_exp = grid_exponent(max_abs).ok_or_else(|| {
            EngineError::invalid(
                "noise scale",
                scale,
                "small enough that 1 + its default max_abs multiple stays below 2^24, \
                 where f32 reports stop being exact",
            )
        })?;
        // The 1e-12 margin keeps the rounding of `scale` itself from making the noise a
        // hair smaller than the guarantee promises.
        let grid_scale = (scale * f64::from(1u32 << grid_exp) * (1.0 + 1e-12)).ceil() as u64;
        Ok(Noise {
            kind,
            domain,
            grid_exp,
            grid_scale: grid_scale.max(1),
            max_abs,
        })
    }

    /// The grid step of the noise: every coordinate of a report is a multiple of it.
    pub fn grid_step(&self) -> f64 {
        1.0 / f64::from(1u32 << self.grid_exp)
    }

    /// The noise's scale in grid steps (σ or t; see [`Noise`]).
    pub fn grid_scale(&self) -> u64 {
        self.grid_scale
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

    /// Noise variance per coordinate per report, exactly for the grid (STATISTICS.md §3.1):
    /// γ²s² for the discrete Gaussian (≥ 1/ρ; the discrete distribution's deficit below s²
    /// is below 10⁻¹⁰⁰⁰ at the s ≥ 10⁴ every valid ρ gives) and γ²/(2 sinh²(1/(2t))) for the
    /// discrete Laplace (≈ 8/ε² − γ²/6).
    pub fn variance(&self) -> f64 {
        let step = self.grid_step();
        let scale = self.grid_scale as f64;
        match self.kind {
            NoiseKind::Gauss { .. } => (step * scale).powi(2),
            NoiseKind::Laplace { .. } => step * step / (2.0 * (0.5 / scale).sinh().powi(2)),
        }
    }

    /// Privatizes `x` with the thread's generator (tests only: rand 0.9 does not reseed it
    /// on fork; real reports draw from [`super::client_rng`]).
    #[cfg(test)]
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

    /// One draw of the per-coordinate noise, exactly on the grid. The integer is below 2⁵³
    /// in magnitude with overwhelming probability, so scaling it by a power of two is exact.
    pub fn sample_noise<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        let steps = match self.kind {
            NoiseKind::Gauss { .. } => discrete_gaussian(rng, self.grid_scale),
            NoiseKind::Laplace { .. } => discrete_laplace(rng, self.grid_scale),
        };
        steps as f64 * self.grid_step()
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

/// The grid exponent k for noise whose reports stay within ±`max_abs`: the largest k ≤ 24
/// with `max_abs`·2^k ≤ 2^24, so that every accepted coordinate, a multiple of 2^−k, is
/// exactly an f32. None when `max_abs` > 2^24 (no grid that contains 1 would do).
fn grid_exponent(max_abs: f64) -> Option<u32> {
    let mut bound = 1.0_f64;
    for k in (0..=24u32).rev() {
        // bound = 2^(24−k): the largest magnitude an f32 holds exactly on the grid 2^−k.
        if max_abs <= bound {
            return Some(k);
        }
        bound *= 2.0;
    }
    None
}

/// One draw of continuous Lap(scale) by the inverse CDF, for the central-model curator
/// (the local mechanisms use the exact discrete sampler). The uniform is drawn from the open interval
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
    }

    /// Reports are multiples of the grid step and exact in f32, the variance is the grid
    /// law's (within 2/s of the nominal 1/ρ or 8/ε²), and the privacy is never weaker.
    #[test]
    fn noise_is_on_an_exact_f32_grid() {
        use rand::rngs::StdRng;
        use rand::SeedableRng;
        let mut rng = StdRng::seed_from_u64(11);
        let cases = [
            (NoiseKind::Gauss { rho: 0.5 }, 2.0),
            (
                NoiseKind::Gauss {
                    rho: ldpstream_config::MIN_RHO,
                },
                1e11,
            ),
            (
                NoiseKind::Gauss {
                    rho: ldpstream_config::MAX_RHO,
                },
                1.0 / 245_000.0,
            ),
            (NoiseKind::Laplace { epsilon: 1.0 }, 8.0),
            (NoiseKind::Laplace { epsilon: 700.0 }, 8.0 / 490_000.0),
            (
                NoiseKind::Laplace {
                    epsilon: ldpstream_config::MIN_LAPLACE_EPSILON,
                },
                8e10,
            ),
        ];
        for (kind, nominal) in cases {
            let noise = Noise::new(kind, 5).unwrap();
            assert!(
                noise.grid_scale() >= 10_000,
                "{kind:?}: {}",
                noise.grid_scale()
            );
            let rel = noise.variance() / nominal - 1.0;
            // At least the nominal variance (the scale is rounded up): the Laplace grid's
            // −γ²/6 is below 1e-9 relative.
            let upper = 2.5 / noise.grid_scale() as f64;
            assert!((-1e-9..upper).contains(&rel), "{kind:?}: {rel}");
            let step = noise.grid_step();
            for _ in 0..2_000 {
                let report = noise.randomize_with(2, &mut rng).unwrap();
                for v in report {
                    assert_eq!(v as f32 as f64, v, "{kind:?}: {v} is not an f32");
                    assert_eq!((v / step).fract(), 0.0, "{kind:?}: {v} is off the grid");
                }
            }
        }
        assert!(Noise::new(NoiseKind::Gauss { rho: 9e-12 }, 5).is_err());
        assert!(Noise::new(NoiseKind::Laplace { epsilon: 9e-6 }, 5).is_err());
    }
}
