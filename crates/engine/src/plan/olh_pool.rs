//! Power of OlhSupportGOF for one fixed seed pool (docs/STATISTICS.md §3.3, "Planning a
//! fixed pool").
//!
//! The planner's OLH row assumes fresh hashes, and one pool's collisions move the test's
//! power at that n by up to ±0.1 (0.69 to 0.78 measured at a planned 0.8). For a given
//! pool the support counts are, given the row totals n/S, asymptotically normal with
//! exactly computable means and covariance, so the statistic `T = Σ_v (C_v − E_v)²/V_v`
//! is a quadratic form `Σ_k λ_k (Z_k + b_k)²` in normal variables, under the null
//! (b = 0) and under the alternative. Its tail is taken from the first four cumulants by
//! Liu, Tang & Zhang (2009), "A new chi-square approximation to the distribution of
//! non-negative definite quadratic forms in non-central normal variables", Comput.
//! Statist. Data Anal. 53: the null's (1 − α) point is the Monte Carlo test's critical
//! value, and the alternative's tail beyond it is the power.

use nalgebra::{DMatrix, DVector};

use super::alternative::Hypotheses;
use super::ncx2::{chi2_isf, ncx2_sf};
use super::power::smallest_n;
use crate::error::EngineError;
use crate::mechanism::Olh;

/// The most `pool_size × d²` steps (the support counts' covariance) one plan may cost;
/// with the d³ products that is a few seconds at d = 1024, S = 1024.
pub const MAX_POOL_PLAN_WORK: u64 = 1 << 30;

/// The pool's quadratic form, per report: `tr(A^k)` of the standardized covariance under
/// the alternative and the null, and `δᵀA^{k−1}δ` of the standardized mean shift.
#[derive(Debug, Clone)]
pub struct OlhPoolPower {
    alternative_traces: [f64; 4],
    shift: [f64; 4],
    /// `T`'s (1 − α) point under the null.
    critical: f64,
}

impl OlhPoolPower {
    pub fn new(m: &Olh, h: &Hypotheses, alpha: f64) -> Result<Self, EngineError> {
        if !(alpha > 0.0 && alpha < 1.0) {
            return Err(EngineError::invalid("alpha", alpha, "a number in (0, 1)"));
        }
        let d = h.domain();
        if d != m.domain() as usize {
            return Err(EngineError::invalid(
                "alternative length",
                d,
                "the mechanism's domain",
            ));
        }
        let work = u64::from(m.pool_size()).saturating_mul((d as u64).saturating_pow(2));
        if work > MAX_POOL_PLAN_WORK {
            return Err(EngineError::invalid(
                "pool_size × domain²",
                work,
                "at most 2^30 for a fixed-pool plan (the fresh-hash row applies above it)",
            ));
        }
        let (null_mean, null_cov) = support_moments(m, h.p0());
        let (alt_mean, alt_cov) = support_moments(m, h.p1());
        let scale: Vec<f64> = (0..d)
            .map(|v| {
                let var = null_cov[(v, v)];
                if var > 0.0 {
                    1.0 / var.sqrt()
                } else {
                    0.0
                }
            })
            .collect();
        let scale = DVector::from_vec(scale);
        let standardize =
            |cov: &DMatrix<f64>| DMatrix::from_fn(d, d, |v, w| cov[(v, w)] * scale[v] * scale[w]);
        let (a0, a1) = (standardize(&null_cov), standardize(&alt_cov));
        let delta = (alt_mean - null_mean).component_mul(&scale);
        let null = traces(&a0);
        let critical = quadratic_form_isf(null, alpha);
        let w1 = &a1 * &delta;
        let w2 = &a1 * &w1;
        Ok(OlhPoolPower {
            alternative_traces: traces(&a1),
            shift: [delta.dot(&delta), delta.dot(&w1), w1.dot(&w1), w1.dot(&w2)],
            critical,
        })
    }

    /// The noncentrality `n·δᵀδ`: what the fresh-hash planner's λ estimates.
    pub fn noncentrality(&self, n: u64) -> f64 {
        n as f64 * self.shift[0]
    }

    /// The asymptotic power after `n` reports.
    pub fn power(&self, n: u64) -> f64 {
        let n = n as f64;
        let cumulants: [f64; 4] = std::array::from_fn(|k| {
            self.alternative_traces[k] + (k + 1) as f64 * n * self.shift[k]
        });
        quadratic_form_sf(cumulants, self.critical)
    }

    /// The smallest n whose [`Self::power`] reaches `target`.
    pub fn required_n(&self, target: f64) -> Result<u64, EngineError> {
        let unreachable = |reason| EngineError::PowerUnreachable {
            mechanism: "OLH (this pool)",
            target,
            reason,
        };
        if !(self.shift[0] > 0.0 && self.critical.is_finite()) {
            return Err(unreachable(
                "the alternative is invisible to this pool (noncentrality 0)",
            ));
        }
        smallest_n(|n| self.power(n) >= target)
            .ok_or_else(|| unreachable("it would need more than 2^53 reports"))
    }
}

/// The support counts' mean and covariance per report under type law `p`, given equal
/// row totals: `μ_v = (1/S) Σ_i P_i(h_i v)` and
/// `Σ_vw = (1/S) Σ_i (P_i(h_i v)·[h_i v = h_i w] − P_i(h_i v) P_i(h_i w))`.
fn support_moments(m: &Olh, p: &[f64]) -> (DVector<f64>, DMatrix<f64>) {
    let (d, g, rows) = (m.domain() as usize, m.g() as usize, m.pool_size() as usize);
    let laws = m.row_laws(p);
    let mut at = DMatrix::<f64>::zeros(rows, d);
    let mut cov = DMatrix::<f64>::zeros(d, d);
    let mut buckets: Vec<Vec<usize>> = vec![Vec::new(); g];
    for (i, law) in laws.chunks_exact(g).enumerate() {
        buckets.iter_mut().for_each(Vec::clear);
        for v in 0..d {
            let y = m.bucket(i as u32, v as u32) as usize;
            at[(i, v)] = law[y];
            buckets[y].push(v);
        }
        for (bucket, &py) in buckets.iter().zip(law) {
            for &v in bucket {
                for &w in bucket {
                    cov[(v, w)] += py;
                }
            }
        }
    }
    let s = rows as f64;
    cov -= at.transpose() * &at;
    cov /= s;
    let mean = DVector::from_iterator(d, at.column_iter().map(|c| c.sum() / s));
    (mean, cov)
}

/// `tr(A), tr(A²), tr(A³), tr(A⁴)` of a symmetric matrix.
fn traces(a: &DMatrix<f64>) -> [f64; 4] {
    let a2 = a * a;
    [
        a.trace(),
        a.norm_squared(),
        a.component_mul(&a2).sum(),
        a2.norm_squared(),
    ]
}

/// Liu–Tang–Zhang's matching noncentral χ²: degrees of freedom l, noncentrality δ, and
/// the scale `a` (σ_X = √2·a), from the cumulant sums `c_k = Σ λ^k (1 + k b²)`.
fn ltz_parameters(c: [f64; 4]) -> (f64, f64, f64) {
    let s1 = c[2] / c[1].powf(1.5);
    let s2 = c[3] / (c[1] * c[1]);
    if s1 * s1 > s2 {
        let a = 1.0 / (s1 - (s1 * s1 - s2).sqrt());
        let delta = s1 * a.powi(3) - a * a;
        (a * a - 2.0 * delta, delta, a)
    } else {
        (1.0 / (s1 * s1), 0.0, 1.0 / s1)
    }
}

/// `P(Q > t)` for the quadratic form with cumulant sums `c`.
fn quadratic_form_sf(c: [f64; 4], t: f64) -> f64 {
    let (l, delta, a) = ltz_parameters(c);
    let standardized = (t - c[0]) / (2.0 * c[1]).sqrt();
    ncx2_sf(
        l,
        delta,
        standardized * std::f64::consts::SQRT_2 * a + l + delta,
    )
}

/// The (1 − α) point of a central quadratic form (b = 0, so δ = 0 in the matching law).
fn quadratic_form_isf(c: [f64; 4], alpha: f64) -> f64 {
    let (l, delta, a) = ltz_parameters(c);
    let x = chi2_isf(l, alpha);
    c[0] + (2.0 * c[1]).sqrt() * (x - l - delta) / (std::f64::consts::SQRT_2 * a)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With one eigenvalue per term the approximation is exact: `Σ_k (Z_k + b_k)²` over
    /// ν terms is `χ²_ν(Σ b²)`, so the cumulant sums `c_k = ν + kλ` must give back
    /// scipy's `ncx2.sf(30, 5, 12)` and `chi2.isf(0.05, 5)`.
    #[test]
    fn an_identity_form_is_the_noncentral_chi_square() {
        let (nu, lambda) = (5.0, 12.0);
        let c = [
            nu + lambda,
            nu + 2.0 * lambda,
            nu + 3.0 * lambda,
            nu + 4.0 * lambda,
        ];
        let sf = quadratic_form_sf(c, 30.0);
        // scipy.stats.ncx2.sf(30, 5, 12) = 0.05996940154394863
        assert!((sf - 0.05996940154394863).abs() < 1e-9, "{sf}");
        let isf = quadratic_form_isf([nu; 4], 0.05);
        // scipy.stats.chi2.isf(0.05, 5) = 11.070497693516355
        assert!((isf - 11.070497693516355).abs() < 1e-8, "{isf}");
    }

    /// Unequal weights: `Q = 2 Z_1² + Z_2²` has `P(Q > 6)` = 0.13575623731069109
    /// (`scipy.integrate.quad(lambda x: chi2.pdf(x, 1) * chi2.sf(6 - 2 * x, 1), 0, 3)[0]
    /// + chi2.sf(3, 1)`, scipy 1.x); the four-cumulant approximation is within 0.005.
    #[test]
    fn a_weighted_form_is_close_to_its_exact_tail() {
        let c = [3.0, 5.0, 9.0, 17.0];
        let sf = quadratic_form_sf(c, 6.0);
        assert!((sf - 0.13575623731069109).abs() < 0.005, "{sf}");
    }
}
