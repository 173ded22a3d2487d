//! Sheffet's χ² for the ±1 families (Hadamard rows, cohorts), conditioned on how many
//! reports each row received (docs/STATISTICS.md, "Conditioning on the rows").
//!
//! Sheffet's θ = Fᵀ·signed/n has mean 2ηp only when every row was drawn with probability
//! 1/J. A client whose row choice is merely non-uniform (a bug, an unbalanced cohort
//! population) shifts θ by Σ_j (n_j/n − 1/J)·2η h_j F_j, and at n = 10⁶ that alone gave
//! p = 4e-26 under a true null. Given the row counts n_j, row j's mean sign
//! m_j = (plus_j − minus_j)/n_j has mean 2η h_j (h = F p0) and variance
//! (1 − 4η²h_j²)/n_j, independently across rows, whatever rule chose the rows (as long
//! as the rule did not see the sign). The statistic is built on those residuals alone.

use nalgebra::{DMatrix, DVector};

use crate::error::EngineError;
use crate::mechanism::{fwht, Cohort, Hadamard, Mechanism};

/// `h = F p0`: for each public row j, the mean of the true sign under p0.
pub fn sign_row_means(mechanism: &Mechanism, p0: &[f64]) -> Vec<f64> {
    match mechanism {
        Mechanism::Hadamard(h) => {
            let mut v = p0.to_vec();
            v.resize(h.rows() as usize, 0.0);
            fwht(&mut v);
            v
        }
        Mechanism::Cohort(c) => (0..c.cohorts())
            .map(|ci| {
                p0.iter()
                    .enumerate()
                    .map(|(x, p)| p * f64::from(c.sign(ci, x as u32)))
                    .sum()
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The null law of one row's sign, computed without cancellation: `(lower, upper)` are
/// `½ ∓ η|h|` doubled, i.e. `1 − 2η|h|` and `1 + 2η|h|`. `1 − 2η|h|` is taken as
/// `(1 − |h|) + |h|(1 − 2η)` from the mechanism's stable `complement = 1 − 2η` (the
/// handling sheffet.rs documents): from ε ≈ 37 on `2η` rounds to 1 and a row whose sign is
/// certain under p0 (|h| = 1) would get an exact 0.
pub fn sign_spread(h: f64, eta: f64, complement: f64) -> (f64, f64) {
    let a = h.abs().min(1.0);
    ((1.0 - a) + a * complement, 1.0 + 2.0 * eta * a)
}

/// The whitened residuals of the rows and how many rows carry information.
#[derive(Debug, Clone, PartialEq)]
pub enum RowResiduals {
    /// `z_j = (m_j − 2ηh_j)·sqrt(n_j/(1 − 4η²h_j²))`, 0 for a row with no reports or no
    /// variance, and the number of rows with both.
    Finite { z: Vec<f64>, informative: usize },
    /// A row whose sign is certain under p0 (variance 0 in f64) reported the other sign:
    /// the null is refuted.
    Refuted,
}

/// The per-row residuals of a signed sketch's `plus`/`minus` tables against `h = F p0`.
pub fn row_residuals(
    plus: &[u64],
    minus: &[u64],
    h: &[f64],
    eta: f64,
    complement: f64,
) -> RowResiduals {
    let mut z = Vec::with_capacity(h.len());
    let mut informative = 0;
    for ((&p, &m), &hj) in plus.iter().zip(minus).zip(h) {
        let n = (p + m) as f64;
        if n == 0.0 {
            z.push(0.0);
            continue;
        }
        let (lower, upper) = sign_spread(hj, eta, complement);
        // m_j − 2ηh_j, with the certain part (1 − 2η|h|) taken from the stable form:
        // for h ≥ 0 it is (1 − 2ηh) − 2·minus/n, else 2·plus/n − (1 − 2η|h|).
        let residual = if hj >= 0.0 {
            lower - 2.0 * m as f64 / n
        } else {
            2.0 * p as f64 / n - lower
        };
        let variance = lower * upper;
        if variance <= 0.0 {
            if residual != 0.0 {
                return RowResiduals::Refuted;
            }
            z.push(0.0);
            continue;
        }
        informative += 1;
        z.push(residual * (n / variance).sqrt());
    }
    RowResiduals::Finite { z, informative }
}

/// `zᵀ Q z` with Q the orthogonal projection onto the family's column space span(F), and
/// its degrees of freedom.
///
/// Given the row counts z is N(0, I) on the informative rows (asymptotically in each
/// n_j), so with every row informative the statistic is χ²_d: Q is fixed, of rank d, and
/// does not depend on the data. The optimal projection would be onto span(W^{1/2}F) with
/// W = diag(n_j/(1 − 4η²h_j²)); it needs a d×d solve per snapshot (C·d² work for cohorts,
/// impossible for Hadamard at d = 2^24), and differs from Q only by how unequal the
/// weights are, so rows near uniform lose nothing. With empty rows Q's restriction to the
/// informative rows has at most min(d, informative) eigenvalues, each ≤ 1, so χ² with
/// that many degrees of freedom is conservative.
pub fn projected_statistic(mechanism: &Mechanism, residuals: &RowResiduals) -> Option<(f64, u32)> {
    let (z, informative) = match residuals {
        RowResiduals::Finite { z, informative } => (z, *informative),
        RowResiduals::Refuted => return Some((f64::INFINITY, 1)),
    };
    let (statistic, d) = match mechanism {
        Mechanism::Hadamard(m) => (hadamard_projection(m, z), m.domain()),
        Mechanism::Cohort(m) => (cohort_projection(m, z), m.domain()),
        _ => return None,
    };
    let df = d.min(u32::try_from(informative).unwrap_or(u32::MAX));
    (df > 0).then_some((statistic, df))
}

/// F = the first d columns of the K×K Hadamard matrix, FᵀF = K·I: `|(Hz)_{0..d}|²/K`,
/// one fast transform.
fn hadamard_projection(m: &Hadamard, z: &[f64]) -> f64 {
    let mut u = z.to_vec();
    u.resize(m.rows() as usize, 0.0);
    fwht(&mut u);
    let k = f64::from(m.rows());
    u.iter()
        .take(m.domain() as usize)
        .map(|x| x * x)
        .sum::<f64>()
        / k
}

/// FᵀF = C·A (A the family's Gram matrix): `uᵀA⁻¹u/C` with `u = Fᵀz`, O(C·d + d²).
fn cohort_projection(m: &Cohort, z: &[f64]) -> f64 {
    let u = DVector::from_vec(m.theta(z, 1));
    let inverse: &DMatrix<f64> = m.gram_inverse();
    u.dot(&(inverse * &u)) / f64::from(m.cohorts())
}

/// Row-conditioned Sheffet χ² of a signed sketch: the statistic and its degrees of
/// freedom. Errors name a sketch whose rows do not match the family, and a null under
/// which no reported row carries information (every row empty, or certain).
pub fn row_conditioned_chi2(
    mechanism: &Mechanism,
    plus: &[u64],
    minus: &[u64],
    p0: &[f64],
) -> Result<(f64, u32), EngineError> {
    let (eta, complement) = match mechanism {
        Mechanism::Hadamard(m) => (m.eta(), m.one_minus_two_eta()),
        Mechanism::Cohort(m) => (m.eta(), m.one_minus_two_eta()),
        _ => {
            return Err(EngineError::invalid(
                "mechanism",
                mechanism.kind(),
                "hadamard or cohort",
            ))
        }
    };
    if p0.len() != mechanism.domain() {
        return Err(EngineError::ShapeMismatch {
            expected: mechanism.domain(),
            found: p0.len(),
        });
    }
    let h = sign_row_means(mechanism, p0);
    if plus.len() != h.len() || minus.len() != h.len() {
        return Err(EngineError::ShapeMismatch {
            expected: h.len(),
            found: plus.len(),
        });
    }
    let residuals = row_residuals(plus, minus, &h, eta, complement);
    projected_statistic(mechanism, &residuals).ok_or_else(|| EngineError::InvalidParameter {
        name: "null",
        value: "p0".into(),
        allowed: "a null under which some reported row's sign has variance",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A certain row (|h| = 1) at ε = 40 keeps a positive variance, and a report of the
    /// impossible-in-f64 sign refutes the null instead of dividing by 0.
    #[test]
    fn certain_rows_stay_finite() {
        let m = Hadamard::new(40.0, 2).unwrap();
        let (lower, upper) = sign_spread(1.0, m.eta(), m.one_minus_two_eta());
        assert!(lower > 0.0 && upper > 1.9, "{lower} {upper}");
        let r = row_residuals(&[10, 0], &[0, 10], &[1.0, -1.0], m.eta(), 0.0);
        assert_eq!(
            r,
            RowResiduals::Finite {
                z: vec![0.0, 0.0],
                informative: 0
            }
        );
        let r = row_residuals(&[9, 0], &[1, 10], &[1.0, -1.0], m.eta(), 0.0);
        assert_eq!(r, RowResiduals::Refuted);
    }

    /// A sketch with the wrong number of rows, or a null of the wrong length, is an error
    /// that names the shapes, not a silently truncated statistic.
    #[test]
    fn mismatched_shapes_are_errors() {
        let m = Mechanism::Hadamard(Hadamard::new(1.0, 3).unwrap());
        let e = row_conditioned_chi2(&m, &[1, 2], &[2, 1], &[0.5, 0.3, 0.2]).unwrap_err();
        assert!(
            matches!(
                e,
                EngineError::ShapeMismatch {
                    expected: 4,
                    found: 2
                }
            ),
            "{e}"
        );
        let e = row_conditioned_chi2(&m, &[1; 4], &[1; 4], &[0.5, 0.5]).unwrap_err();
        assert!(
            matches!(
                e,
                EngineError::ShapeMismatch {
                    expected: 3,
                    found: 2
                }
            ),
            "{e}"
        );
    }

    /// With K = d the projection Q is the identity: the statistic is the plain
    /// sum of squares.
    #[test]
    fn square_hadamard_projection_is_the_plain_sum() {
        let m = Hadamard::new(1.0, 4).unwrap();
        let z = [0.3, -1.2, 2.0, 0.7];
        let plain: f64 = z.iter().map(|x| x * x).sum();
        let projected = hadamard_projection(&m, &z);
        assert!((plain - projected).abs() < 1e-12, "{plain} {projected}");
    }
}
