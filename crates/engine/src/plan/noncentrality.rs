//! The noncentrality each mechanism's identity test has under an alternative.
//!
//! Under `p1 = p0 + Δ/√n` every test statistic of docs/STATISTICS.md §3 tends to a noncentral
//! `χ²_ν(λ)`. Writing `Δ = √n (p1 − p0)` for a fixed alternative makes λ linear in n, so
//! each mechanism reduces to a per-report noncentrality times n.

use crate::error::EngineError;
use crate::mechanism::Subset;
use crate::stats::subset_pinv_form;

use super::alternative::Hypotheses;

/// A mechanism and the identity test run on its reports, with its privacy parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PlanMechanism {
    /// Generalized randomized response, tested by LocalExpGOF (seed 002 Alg. 3).
    Grr { epsilon: f64 },
    /// Bit flip (unary encoding), tested by LocalBitFlipGOF (seed 002 eq. 7).
    BitFlip { epsilon: f64 },
    /// Optimized unary encoding, tested by the generalized LocalBitFlipGOF
    /// (docs/STATISTICS.md §3.1).
    Oue { epsilon: f64 },
    /// Gaussian noise on the one-hot vector, tested by LocalNoiseGOF (seed 002 Alg. 1).
    /// `rho` is a zero-concentrated DP parameter, not an ε.
    Gauss { rho: f64 },
    /// The non-symmetric Hadamard mechanism, tested by Sheffet's χ² (seed 000 §4.2).
    Hadamard { epsilon: f64 },
    /// k-subset selection at the default k = ⌈d/(e^ε+1)⌉, tested by SubsetGOF
    /// (docs/STATISTICS.md §3.2).
    Subset { epsilon: f64 },
    /// Optimized local hashing at the default g = round(e^ε)+1, tested by OlhSupportGOF
    /// (docs/STATISTICS.md §3.3), planned as with fresh per-user hashes.
    Olh { epsilon: f64 },
}

impl PlanMechanism {
    /// The seven mechanisms at one ε. Gaussian noise gets `ρ = ε²/2`, the zCDP level that
    /// ε-DP implies: a weaker guarantee than ε-LDP, so its power flatters it.
    pub fn all(epsilon: f64) -> [PlanMechanism; 7] {
        [
            PlanMechanism::Grr { epsilon },
            PlanMechanism::BitFlip { epsilon },
            PlanMechanism::Oue { epsilon },
            PlanMechanism::Gauss {
                rho: epsilon * epsilon / 2.0,
            },
            PlanMechanism::Hadamard { epsilon },
            PlanMechanism::Subset { epsilon },
            PlanMechanism::Olh { epsilon },
        ]
    }

    pub fn name(&self) -> &'static str {
        match self {
            PlanMechanism::Grr { .. } => "GenRR",
            PlanMechanism::BitFlip { .. } => "bit flip",
            PlanMechanism::Oue { .. } => "OUE",
            PlanMechanism::Gauss { .. } => "Gaussian noise",
            PlanMechanism::Hadamard { .. } => "Hadamard",
            PlanMechanism::Subset { .. } => "k-subset",
            PlanMechanism::Olh { .. } => "OLH",
        }
    }

    pub fn test_name(&self) -> &'static str {
        match self {
            PlanMechanism::Grr { .. } => "LocalExpGOF",
            PlanMechanism::BitFlip { .. } | PlanMechanism::Oue { .. } => "LocalBitFlipGOF",
            PlanMechanism::Gauss { .. } => "LocalNoiseGOF",
            PlanMechanism::Hadamard { .. } => "Sheffet chi2",
            PlanMechanism::Subset { .. } => "SubsetGOF",
            PlanMechanism::Olh { .. } => "OlhSupportGOF",
        }
    }

    /// Degrees of freedom ν of the test on a domain of `d` categories: `d − 1`, except
    /// Sheffet's statistic and OLH's support statistic, which do not project out the
    /// all-ones direction.
    pub fn df(&self, d: usize) -> u32 {
        let d = u32::try_from(d).unwrap_or(u32::MAX);
        match self {
            PlanMechanism::Hadamard { .. } | PlanMechanism::Olh { .. } => d,
            _ => d.saturating_sub(1),
        }
    }

    fn check(&self) -> Result<(), EngineError> {
        let (name, value) = match *self {
            PlanMechanism::Gauss { rho } => ("rho", rho),
            PlanMechanism::Grr { epsilon }
            | PlanMechanism::BitFlip { epsilon }
            | PlanMechanism::Oue { epsilon }
            | PlanMechanism::Subset { epsilon }
            | PlanMechanism::Olh { epsilon }
            | PlanMechanism::Hadamard { epsilon } => ("epsilon", epsilon),
        };
        if value.is_finite() && value > 0.0 {
            Ok(())
        } else {
            Err(EngineError::invalid(name, value, "a finite number > 0"))
        }
    }

    /// λ per report: the noncentrality at n = 1.
    pub(crate) fn unit_noncentrality(&self, h: &Hypotheses) -> Result<f64, EngineError> {
        self.check()?;
        let (p0, p1) = (h.p0(), h.p1());
        let delta: Vec<f64> = p1.iter().zip(p0).map(|(a, b)| a - b).collect();
        // Every formula is written in e^{−ε} or tanh so that a large ε saturates (GenRR
        // and bit flip become Pearson's χ² on the raw counts) instead of overflowing.
        let lambda = match *self {
            PlanMechanism::Grr { epsilon } => {
                let t = (-epsilon).exp();
                let d = p0.len() as f64;
                let norm = 1.0 + (d - 1.0) * t;
                let gamma = -(-epsilon).exp_m1() / norm;
                let chi2: f64 = delta
                    .iter()
                    .zip(p0)
                    .map(|(dj, &pj)| dj * dj / ((pj + (1.0 - pj) * t) / norm))
                    .sum();
                gamma * gamma * chi2
            }
            PlanMechanism::BitFlip { epsilon } => {
                // α_ε = tanh(ε/4) and b = e^{ε/2}/(e^{ε/2}+1)² = 1/(4 cosh²(ε/4)).
                let a = (epsilon / 4.0).tanh();
                let cosh = (epsilon / 4.0).cosh();
                let b = 1.0 / (4.0 * cosh * cosh);
                // Σ(p0) = Diag(α² p0 + b) − α² p0 p0ᵀ (docs/STATISTICS.md §1.2).
                a * a * quad_form_inverse(p0, a * a, b, &delta)
            }
            PlanMechanism::Oue { epsilon } => {
                // α = tanh(ε/2)/2, q(1−q) = 1/(4 cosh²(ε/2)), Σ(p0) = Diag(q(1−q) + 2α²p0)
                // − α² p0p0ᵀ (docs/STATISTICS.md §1.6).
                let a = 0.5 * (epsilon / 2.0).tanh();
                let cosh = (epsilon / 2.0).cosh();
                let b = 1.0 / (4.0 * cosh * cosh);
                a * a * oue_quad_form(p0, a * a, b, &delta)
            }
            PlanMechanism::Gauss { rho } => quad_form_inverse(p0, 1.0, 1.0 / rho, &delta),
            PlanMechanism::Subset { epsilon } => {
                // The item counts' mean moves by αΔ; SubsetGOF weighs it by Σ(p0)⁺.
                let d = u32::try_from(p0.len()).unwrap_or(u32::MAX);
                let m = Subset::new(epsilon, d, None)?;
                m.alpha() * m.alpha() * subset_pinv_form(&m, p0, &delta)
            }
            PlanMechanism::Hadamard { epsilon } => {
                // 2η = tanh(ε/2).
                let two_eta = (epsilon / 2.0).tanh();
                delta
                    .iter()
                    .zip(p0)
                    .map(|(dj, &pj)| {
                        let shifted = two_eta * dj;
                        shifted * shifted / ((1.0 - two_eta * pj) * (1.0 + two_eta * pj))
                    })
                    .sum()
            }
            PlanMechanism::Olh { epsilon } => {
                // A report's indicator [y = h(v)] has mean f_v = 1/g + (p − 1/g) p_v with
                // fresh hashes; p − 1/g = γ (g−1)/g, γ = (1−e^{−ε})/(1+(g−1)e^{−ε}).
                let g = f64::from(ldpstream_config::olh_default_g(epsilon));
                let t = (-epsilon).exp();
                let a = -(-epsilon).exp_m1() / (1.0 + (g - 1.0) * t) * (g - 1.0) / g;
                delta
                    .iter()
                    .zip(p0)
                    .map(|(dj, &pj)| {
                        let f = 1.0 / g + a * pj;
                        a * a * dj * dj / (f * (1.0 - f))
                    })
                    .sum()
            }
        };
        if !lambda.is_finite() {
            return Err(EngineError::invalid(
                "noncentrality",
                lambda,
                "a finite number; the null is too close to a point mass for this epsilon",
            ));
        }
        Ok(lambda)
    }

    /// λ per report of the sequential test's statistic, where it is not the fixed-n one's:
    /// OLH's whitened support statistic (docs/STATISTICS.md §10.1), with fresh hashes.
    /// Given its hash, a report's support vector has covariance whose mean over hashes
    /// (fully independent buckets) is `Σ̄ = D − κ p0p0ᵀ`, `κ = (p − q)²(1 − 1/g)`,
    /// `D_v = f_v(1 − f_v) − (p − q)²(1/g)(1 − 1/g)(|p0|² − p0_v²) + κ p0_v²`, and the drift
    /// is `(p − q)(1 − 1/g)Δ`, orthogonal to the sum-to-one direction u ∝ 1; so λ is
    /// `(p − q)²(1 − 1/g)² ΔᵀΣ̄⁻¹Δ`, by Sherman–Morrison in O(d).
    pub(crate) fn sequential_unit_noncentrality(&self, h: &Hypotheses) -> Result<f64, EngineError> {
        let PlanMechanism::Olh { epsilon } = *self else {
            return self.unit_noncentrality(h);
        };
        self.check()?;
        let (p0, p1) = (h.p0(), h.p1());
        let g = f64::from(ldpstream_config::olh_default_g(epsilon));
        let t = (-epsilon).exp();
        // p − q = (1 − e^{−ε})/(1 + (g − 1)e^{−ε}).
        let gap = -(-epsilon).exp_m1() / (1.0 + (g - 1.0) * t);
        let shift = gap * (1.0 - 1.0 / g);
        let kappa = gap * gap * (1.0 - 1.0 / g);
        let spread = gap * gap * (1.0 / g) * (1.0 - 1.0 / g);
        let norm: f64 = p0.iter().map(|p| p * p).sum();
        let diag: Vec<f64> = p0
            .iter()
            .map(|&pv| {
                let f = 1.0 / g + shift * pv;
                f * (1.0 - f) - spread * (norm - pv * pv) + kappa * pv * pv
            })
            .collect();
        let (mut dd, mut pd, mut pp) = (0.0, 0.0, 0.0);
        for ((&a, &b), &dv) in p1.iter().zip(p0).zip(&diag) {
            let delta = a - b;
            dd += delta * delta / dv;
            pd += b * delta / dv;
            pp += b * b / dv;
        }
        let lambda = shift * shift * (dd + kappa * pd * pd / (1.0 - kappa * pp));
        if !(lambda.is_finite() && lambda >= 0.0) {
            return Err(EngineError::invalid(
                "noncentrality",
                lambda,
                "a finite number; the null is too close to a point mass for this epsilon",
            ));
        }
        Ok(lambda)
    }
}

/// The noncentrality λ of `mechanism`'s identity test after `n` reports, when the data
/// follow `h.p1()` and the test's null is `h.p0()`:
///
/// * GenRR: `n γ² Σ_j (p1_j − p0_j)² / p̌0_j`, `γ = (e^ε−1)/(e^ε+d−1)`,
///   `p̌0 = (e^ε p0 + 1 − p0)/(e^ε+d−1)`;
/// * bit flip: `n α_ε² Δᵀ Σ(p0)⁻¹ Δ`, `Δ = p1 − p0`, `Σ(p) = α_ε²(Diag(p) − ppᵀ) + bI`;
/// * OUE: the same with `α = tanh(ε/2)/2` and `Σ(p) = Diag(q(1−q) + 2α²p) − α²ppᵀ`;
/// * Gaussian noise: `n Δᵀ (Diag(p0) − p0p0ᵀ + I/ρ)⁻¹ Δ`;
/// * Hadamard: `n Σ_x 4η² (p1 − p0)² / (1 − 4η² p0²)`, `η = (e^ε−1)/(2(e^ε+1))`, because
///   `E θ = 2η p1` and Sheffet's statistic weights `(θ − 2η p0)` by `1/(1 − 4η² p0²)`.
///   This assumes rows drawn uniformly (n/K reports each), as the mechanism's randomizer
///   draws them; the row-conditioned test (docs/STATISTICS.md §1.4.1) then has the same λ
///   to O(η²), and with unbalanced rows it keeps its level with a smaller λ;
/// * k-subset: `n α² Δᵀ Σ(p0)⁺ Δ`, Σ the item-count covariance of docs/STATISTICS.md §1.7.
/// * OLH: `n a² Σ_v Δ_v² / (f_v(1 − f_v))`, `a = p − 1/g`, `f_v = 1/g + a p0_v`: the support
///   counts' mean shift over their variance, as if the counts were independent (their
///   correlations are O(p0/g); docs/STATISTICS.md §3.3), against χ²_d.
///
/// Both matrix inverses are diagonal plus rank one and are applied in O(d).
pub fn noncentrality(mechanism: PlanMechanism, h: &Hypotheses, n: u64) -> Result<f64, EngineError> {
    Ok(n as f64 * mechanism.unit_noncentrality(h)?)
}

/// `vᵀ (Diag(2c p + s) − c ppᵀ)⁻¹ v`, OUE's Σ(p) with `c = α²`, `s = q(1−q)`, by
/// Sherman–Morrison; its denominator `1 − c Σ p_j²/(2c p_j + s)` is at least 1/2, so the
/// textbook form is stable at every ε.
fn oue_quad_form(p: &[f64], c: f64, s: f64, v: &[f64]) -> f64 {
    let (mut vdv, mut pdv, mut pdp) = (0.0, 0.0, 0.0);
    for (&pj, &vj) in p.iter().zip(v) {
        let dj = 2.0 * c * pj + s;
        vdv += vj * vj / dj;
        pdv += pj * vj / dj;
        pdp += pj * pj / dj;
    }
    vdv + c * pdv * pdv / (1.0 - c * pdp)
}

/// `vᵀ (Diag(c p + s) − c ppᵀ)⁻¹ v`; see [`solve_sigma`].
fn quad_form_inverse(p: &[f64], c: f64, s: f64, v: &[f64]) -> f64 {
    solve_sigma(p, c, s, v)
        .iter()
        .zip(v)
        .map(|(x, y)| x * y)
        .sum()
}

/// `(D − c ppᵀ)⁻¹ v` with `D = Diag(c p + s)`, `c > 0`, `s ≥ 0`, for a distribution `p`
/// (all entries > 0, `Σ p = 1`) and `Σ v = 0`, in O(d).
///
/// Sherman–Morrison gives `D⁻¹v + c D⁻¹p (pᵀD⁻¹v) / (1 − c pᵀD⁻¹p)`. Since `c p_j = D_j − s`,
/// `Σ p = 1` and `Σ v = 0`, both `pᵀD⁻¹v = −(s/c) Σ v_j/D_j` and
/// `1 − c pᵀD⁻¹p = s Σ p_j/D_j`, so
/// `(D − c ppᵀ)⁻¹ v = D⁻¹(v − k p)` with `k = (Σ_j v_j/D_j) / (Σ_j p_j/D_j)`.
/// The textbook form subtracts two nearly equal numbers when `s ≪ c` (bit flip at large ε)
/// and divides 0 by 0 at `s = 0`; this one has neither, and at `s = 0` returns the
/// solution `Δ/(cp) + const·1` that the test's projection Π makes equivalent.
fn solve_sigma(p: &[f64], c: f64, s: f64, v: &[f64]) -> Vec<f64> {
    let diag: Vec<f64> = p.iter().map(|&pj| c * pj + s).collect();
    let v_over_d: f64 = v.iter().zip(&diag).map(|(vj, dj)| vj / dj).sum();
    let p_over_d: f64 = p.iter().zip(&diag).map(|(pj, dj)| pj / dj).sum();
    let k = v_over_d / p_over_d;
    v.iter()
        .zip(p)
        .zip(&diag)
        .map(|((vj, pj), dj)| (vj - k * pj) / dj)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::{DMatrix, DVector};
    use rand::{Rng, SeedableRng};

    fn assert_rel(found: f64, expected: f64, rel: f64, what: &str) {
        assert!(
            (found - expected).abs() <= rel * expected.abs(),
            "{what}: found {found:e}, expected {expected:e}"
        );
    }

    /// d = 5, ε = 0.8, n = 1234, p0 = [.3,.25,.2,.15,.1], p1 = [.25,.3,.15,.2,.1];
    /// numpy, with D = p1 - p0, E = exp(eps), dense solves throughout:
    ///   grr:   g = (E-1)/(E+d-1); q0 = (E*p0+1-p0)/(E+d-1); n*g**2*sum(D**2/q0)
    ///   bit:   a = (exp(eps/2)-1)/(exp(eps/2)+1); b = exp(eps/2)/(exp(eps/2)+1)**2
    ///          S = a**2*(diag(p0)-outer(p0,p0)) + b*eye(d); n*a**2*D@solve(S, D)
    ///   oue:   p = 1/2; q = 1/(E+1); a = p-q; S[j][k] = the bit covariance entry by entry
    ///          (E[Z_j Z_k] = sum_x p0[x] P(1|x,j) P(1|x,k) minus the means' product);
    ///          n*a**2*D@solve(S, D) (pure-Python Gauss–Jordan, same value)
    ///   gauss: rho = eps**2/2; M = diag(p0)-outer(p0,p0)+eye(d)/rho; n*D@solve(M, D)
    ///   hadamard: eta = (E-1)/(2*(E+1)); n*sum(4*eta**2*D**2/(1-4*eta**2*p0**2))
    #[test]
    fn noncentrality_matches_numpy() {
        let h = Hypotheses::new(
            vec![0.3, 0.25, 0.2, 0.15, 0.1],
            vec![0.25, 0.3, 0.15, 0.2, 0.1],
        )
        .unwrap();
        let expected = [
            2.3403770788557674,
            1.9313150471053144,
            1.9363337567400833,
            3.687175300064434,
            1.7953725399228264,
        ];
        for (m, want) in PlanMechanism::all(0.8).into_iter().zip(expected) {
            assert_rel(noncentrality(m, &h, 1234).unwrap(), want, 1e-9, m.name());
        }
    }

    #[test]
    fn degrees_of_freedom() {
        let [grr, bit, oue, gauss, had, subset, olh] = PlanMechanism::all(1.0);
        assert_eq!(olh.df(7), 7);
        assert_eq!(
            (
                grr.df(7),
                bit.df(7),
                oue.df(7),
                gauss.df(7),
                had.df(7),
                subset.df(7)
            ),
            (6, 6, 6, 6, 7, 6)
        );
    }

    #[test]
    fn rejects_bad_privacy_parameters() {
        let h = Hypotheses::new(vec![0.5, 0.5], vec![0.6, 0.4]).unwrap();
        for m in [
            PlanMechanism::Grr { epsilon: 0.0 },
            PlanMechanism::BitFlip { epsilon: f64::NAN },
            PlanMechanism::Oue { epsilon: -1.0 },
            PlanMechanism::Olh { epsilon: 0.0 },
            PlanMechanism::Gauss { rho: -1.0 },
            PlanMechanism::Hadamard {
                epsilon: f64::INFINITY,
            },
            PlanMechanism::Subset { epsilon: 0.0 },
        ] {
            assert!(noncentrality(m, &h, 10).is_err(), "{m:?}");
        }
    }

    /// k-subset's λ against a dense pseudo-inverse of the item covariance built entry by
    /// entry from the report law: `E[Y_iY_j] = (p_i + p_j) s + (1 − p_i − p_j) r` for
    /// i ≠ j, `E[Y_i²] = E[Y_i] = q + α p_i`.
    #[test]
    fn subset_noncentrality_matches_a_dense_pseudo_inverse() {
        let p0 = vec![0.3, 0.25, 0.2, 0.15, 0.1];
        let p1 = vec![0.25, 0.3, 0.15, 0.2, 0.1];
        let h = Hypotheses::new(p0.clone(), p1.clone()).unwrap();
        for eps in [0.5, 0.8, 3.0] {
            let m = Subset::new(eps, 5, None).unwrap();
            let (q, a) = (m.q(), m.alpha());
            let (s, r) = (m.pair_with_truth(), m.pair_without_truth());
            let mean: Vec<f64> = p0.iter().map(|p| q + a * p).collect();
            let sigma = DMatrix::from_fn(5, 5, |i, j| {
                let joint = if i == j {
                    mean[i]
                } else {
                    (p0[i] + p0[j]) * s + (1.0 - p0[i] - p0[j]) * r
                };
                joint - mean[i] * mean[j]
            });
            let shift = DVector::from_iterator(5, p1.iter().zip(&p0).map(|(x, y)| a * (x - y)));
            let pinv = sigma.pseudo_inverse(1e-12).unwrap();
            let want = 1234.0 * (shift.transpose() * pinv * &shift)[(0, 0)];
            let got = noncentrality(PlanMechanism::Subset { epsilon: eps }, &h, 1234).unwrap();
            assert_rel(got, want, 1e-9, "k-subset");
        }
    }

    /// The O(d) solve against nalgebra's dense LU on the two matrices the planner uses.
    #[test]
    fn sherman_morrison_matches_dense_inverse() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(64);
        for d in (2..=64).step_by(3) {
            let raw: Vec<f64> = (0..d).map(|_| rng.random_range(0.01..1.0)).collect();
            let total: f64 = raw.iter().sum();
            let p: Vec<f64> = raw.iter().map(|x| x / total).collect();
            // A difference of two distributions sums to 0.
            let raw: Vec<f64> = (0..d).map(|_| rng.random_range(-1.0..1.0)).collect();
            let mean = raw.iter().sum::<f64>() / d as f64;
            let v: Vec<f64> = raw.iter().map(|x| x - mean).collect();
            let eps: f64 = rng.random_range(0.1..4.0);
            let (a, cosh) = ((eps / 4.0).tanh(), (eps / 4.0).cosh());
            // (c, s): bit flip's Σ(p) and the Gaussian M with ρ = ε²/2.
            for (c, s) in [(a * a, 1.0 / (4.0 * cosh * cosh)), (1.0, 2.0 / (eps * eps))] {
                let pv = DVector::from_column_slice(&p);
                let diag = DVector::from_iterator(d, p.iter().map(|&pj| c * pj + s));
                let dense = DMatrix::from_diagonal(&diag) - c * &pv * pv.transpose();
                let want = dense
                    .lu()
                    .solve(&DVector::from_column_slice(&v))
                    .expect("positive definite");
                let found = solve_sigma(&p, c, s, &v);
                let scale = want.amax();
                for (x, y) in found.iter().zip(want.iter()) {
                    assert!(
                        (x - y).abs() <= 1e-10 * scale,
                        "d = {d}, c = {c}: {x} vs {y}"
                    );
                }
            }
        }
    }

    /// Large ε saturates instead of overflowing: GenRR and bit flip tend to Pearson's
    /// `Σ Δ²/p0`, Hadamard to `Σ Δ²/(1 − p0²)`, OUE to half of Pearson's (its true bit
    /// stays a fair coin: `Σ → α²(2 Diag(p0) − p0p0ᵀ)`, and `p0ᵀ Diag(p0)⁻¹ Δ = 0`).
    #[test]
    fn large_epsilon_saturates() {
        let h = Hypotheses::new(vec![0.4, 0.3, 0.2, 0.1], vec![0.35, 0.3, 0.2, 0.15]).unwrap();
        let pearson: f64 = h
            .p1()
            .iter()
            .zip(h.p0())
            .map(|(a, b)| (a - b) * (a - b) / b)
            .sum();
        for eps in [200.0, 1000.0, f64::MAX] {
            let [grr, bit, oue, _, had, _, olh] = PlanMechanism::all(eps);
            assert!(noncentrality(olh, &h, 1).unwrap().is_finite());
            assert_rel(
                noncentrality(oue, &h, 1).unwrap(),
                pearson / 2.0,
                1e-12,
                "OUE",
            );
            assert_rel(noncentrality(grr, &h, 1).unwrap(), pearson, 1e-12, "GenRR");
            assert_rel(
                noncentrality(bit, &h, 1).unwrap(),
                pearson,
                1e-12,
                "bit flip",
            );
            assert!(noncentrality(had, &h, 1).unwrap().is_finite());
        }
        let gauss = PlanMechanism::Gauss { rho: 1e300 };
        assert_rel(
            noncentrality(gauss, &h, 1).unwrap(),
            pearson,
            1e-12,
            "Gauss",
        );
    }
}
