use nalgebra::DMatrix;
use rand::Rng;

use super::row_strata::RowMeans;
use super::Estimate;
use crate::error::EngineError;
use crate::sketch::SignedSketch;

/// Largest `cohorts × domain²` for which the engine forms the d×d Gram matrix of the
/// family; beyond it the exact debiasing costs too much per snapshot.
pub const MAX_GRAM_WORK: f64 = 4.0e9;

/// Largest `cohorts × domain²` for which a snapshot computes the stratified estimate's
/// standard errors exactly (about a millisecond of d×d products per group and snapshot);
/// beyond it they use the mean of the cohorts' variances.
pub const EXACT_STRATA_WORK: f64 = 1.0e6;

/// Seeded random subsets (Sheffet §4): user i draws a cohort `c ∈ [C]` and reports
/// `y = f_c(x)` with probability `e^ε/(1+e^ε)`, else `−f_c(x)`. Cohort c maps type x to
/// `f_c(x) = +1` when the lowest bit of `splitmix64(seed ⊕ splitmix64(c·2³² + x))` is 0,
/// else −1: a public, documented hash, so any party can rebuild the family from the seed.
#[derive(Debug, Clone, PartialEq)]
pub struct Cohort {
    epsilon: f64,
    domain: u32,
    cohorts: u32,
    seed: u64,
    /// `A = FᵀF/C`: `E[θ] = 2η A p` for this finite family.
    gram: DMatrix<f64>,
    /// `A⁻¹`, so that the bias of the finite family can be undone exactly.
    gram_inverse: DMatrix<f64>,
}

pub(crate) fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Cohort {
    pub fn new(epsilon: f64, domain: u32, cohorts: u32, seed: u64) -> Result<Self, EngineError> {
        super::check_epsilon(epsilon)?;
        super::check_domain(domain)?;
        if cohorts < domain {
            return Err(EngineError::invalid(
                "cohorts",
                cohorts,
                "at least the domain size, so that the family identifies the distribution",
            ));
        }
        let (c, d) = (cohorts as usize, domain as usize);
        if c as f64 * (d as f64) * (d as f64) > MAX_GRAM_WORK {
            return Err(EngineError::invalid(
                "cohorts",
                cohorts,
                "cohorts × domain² at most 4e9 (use hadamard for large domains)",
            ));
        }
        let mut f = DMatrix::<f64>::zeros(c, d);
        for ci in 0..c {
            for x in 0..d {
                f[(ci, x)] = f64::from(Self::sign_of(seed, ci as u32, x as u32));
            }
        }
        let gram = f.transpose() * &f / c as f64;
        let gram_inverse = gram.clone().try_inverse().ok_or_else(|| {
            EngineError::invalid(
                "seed",
                seed,
                "a seed whose cohort family has full rank (add cohorts or change the seed)",
            )
        })?;
        Ok(Cohort {
            epsilon,
            domain,
            cohorts,
            seed,
            gram,
            gram_inverse,
        })
    }

    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    pub fn domain(&self) -> u32 {
        self.domain
    }

    pub fn cohorts(&self) -> u32 {
        self.cohorts
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn eta(&self) -> f64 {
        super::sign_eta(self.epsilon)
    }

    /// `1 − 2η`, the sign's lie probability times two, without the cancellation that
    /// makes `1 − 2η` exactly 0 in f64 from ε ≈ 37.
    pub fn one_minus_two_eta(&self) -> f64 {
        2.0 * super::sign_lie(self.epsilon)
    }

    fn sign_of(seed: u64, cohort: u32, x: u32) -> i8 {
        let h = splitmix64(seed ^ splitmix64((u64::from(cohort) << 32) | u64::from(x)));
        if h & 1 == 0 {
            1
        } else {
            -1
        }
    }

    /// `f_c(x)`.
    pub fn sign(&self, cohort: u32, x: u32) -> i8 {
        Self::sign_of(self.seed, cohort, x)
    }

    /// Privatizes `x` with the thread's generator (tests only: rand 0.9 does not reseed it
    /// on fork; real reports draw from [`super::client_rng`]): (cohort, ±1).
    #[cfg(test)]
    pub fn randomize(&self, x: u32) -> Result<(u32, i8), EngineError> {
        self.randomize_with(x, &mut rand::rng())
    }

    /// Privatizes `x` with a caller-supplied generator (seeded only for simulation).
    pub fn randomize_with<R: Rng + ?Sized>(
        &self,
        x: u32,
        rng: &mut R,
    ) -> Result<(u32, i8), EngineError> {
        super::check_input(x, self.domain)?;
        let c = rng.random_range(0..self.cohorts);
        let truth = self.sign(c, x);
        // Exact, so that the lie stays possible (and the report ε-LDP) at large ε.
        let keep = !super::bernoulli_exact(rng, super::sign_lie(self.epsilon));
        Ok((c, if keep { truth } else { -truth }))
    }

    /// `θ = (1/n) Σ_c signed[c] f_c(·)`: O(C·d).
    pub fn theta(&self, signed: &[f64], n: u64) -> Vec<f64> {
        let nf = (n as f64).max(1.0);
        (0..self.domain)
            .map(|x| {
                signed
                    .iter()
                    .enumerate()
                    .map(|(c, s)| s * f64::from(self.sign(c as u32, x)))
                    .sum::<f64>()
                    / nf
            })
            .collect()
    }

    /// `A⁻¹θ/(2η)`; with `Cov(θ) = (A − μμᵀ)/n`, `μ = 2ηAp`, the standard error of
    /// coordinate x is `sqrt((A⁻¹)_xx − 4η²p_x²)/(2η√n)`.
    pub fn estimate(&self, signed: &[f64], n: u64) -> Estimate {
        if n == 0 {
            return Estimate::default();
        }
        let theta = nalgebra::DVector::from_vec(self.theta(signed, n));
        let two_eta = 2.0 * self.eta();
        let p = &self.gram_inverse * theta / two_eta;
        let nf = n as f64;
        let std_error = (0..self.domain as usize)
            .map(|x| {
                let v = self.gram_inverse[(x, x)] - two_eta * two_eta * p[x] * p[x];
                (v.max(0.0) / nf).sqrt() / two_eta
            })
            .collect();
        Estimate {
            estimate: p.iter().copied().collect(),
            std_error,
        }
    }

    /// The estimate from each cohort's own sign mean (`super::row_strata`), unbiased however
    /// the cohorts were drawn: `p̂ = A⁻¹θ_s/(2η)`, `θ_s = (1/C) Fᵀm`. Its covariance is
    /// `A⁻¹ Fᵀdiag(v)F A⁻¹/(2ηC)²`; its diagonal costs C·d², so it is computed exactly
    /// up to [`EXACT_STRATA_WORK`] and beyond that with v replaced by its mean, which is
    /// exact when the cohorts are balanced (`Fᵀ v̄ F = v̄·C·A`). Falls back to
    /// [`Cohort::estimate`] while a cohort has no report.
    pub fn estimate_by_rows(&self, sketch: &SignedSketch) -> Estimate {
        let rows = RowMeans::of(sketch.plus(), sketch.minus())
            .filter(|r| r.means.len() == self.cohorts as usize);
        let Some(rows) = rows else {
            return self.estimate(&sketch.signed(), sketch.n());
        };
        let c = f64::from(self.cohorts);
        let two_eta = 2.0 * self.eta();
        let theta = nalgebra::DVector::from_vec(self.theta(&rows.means, self.cohorts.into()));
        let p = &self.gram_inverse * theta / two_eta;
        let d = self.domain as usize;
        let work = c * (d as f64) * (d as f64);
        let variance: Vec<f64> = if work <= EXACT_STRATA_WORK {
            self.stratified_variances(&rows.variances)
        } else {
            let mean_v = rows.variances.iter().sum::<f64>() / c;
            (0..d)
                .map(|x| mean_v * self.gram_inverse[(x, x)] / c)
                .collect()
        };
        Estimate {
            estimate: p.iter().copied().collect(),
            std_error: variance
                .iter()
                .map(|v| v.max(0.0).sqrt() / two_eta)
                .collect(),
        }
    }

    /// `diag(A⁻¹ Fᵀdiag(v)F A⁻¹)/C²`: `Σ_c v_c (A⁻¹f_c)_x² / C²`, one d×d product per cohort.
    fn stratified_variances(&self, v: &[f64]) -> Vec<f64> {
        let d = self.domain as usize;
        let c = f64::from(self.cohorts);
        let mut out = vec![0.0; d];
        let mut f = nalgebra::DVector::<f64>::zeros(d);
        for (ci, &vc) in v.iter().enumerate() {
            for x in 0..d {
                f[x] = f64::from(self.sign(ci as u32, x as u32));
            }
            let g = &self.gram_inverse * &f;
            out.iter_mut()
                .zip(g.iter())
                .for_each(|(o, gx)| *o += vc * gx * gx);
        }
        out.iter_mut().for_each(|o| *o /= c * c);
        out
    }

    /// `A = FᵀF/C`, the Gram matrix of the family.
    pub fn gram(&self) -> &DMatrix<f64> {
        &self.gram
    }

    /// `A⁻¹`.
    pub fn gram_inverse(&self) -> &DMatrix<f64> {
        &self.gram_inverse
    }

    /// `A p`: the mean of θ/(2η) under true distribution p.
    pub fn gram_times(&self, p: &[f64]) -> Vec<f64> {
        (&self.gram * nalgebra::DVector::from_column_slice(p))
            .iter()
            .copied()
            .collect()
    }
}
