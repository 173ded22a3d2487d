#[cfg(test)]
use nalgebra::{DMatrix, DVector};

/// Sheffet's χ² statistic for the non-symmetric mechanism (seed 000 §4.2), as published:
/// it assumes rows drawn uniformly, so SheffetChi2 uses the row-conditioned form
/// (`row_conditioned.rs`) instead; this one stays as the reference that form is checked
/// against under uniform rows (engine/tests/row_conditioned.rs).
///
/// `P(θ) = n Σ_x (θ(x) − 2η p0(x))² / (1 − 4η² p0(x)²)`, referred to χ²_d (d, not d−1:
/// θ is not constrained to sum to anything).
///
/// `complement` is `1 − 2η`, computed stably by the mechanism: the denominator is taken
/// as `(1 − 2ηp)(1 + 2ηp)` with `1 − 2ηp = (1 − p) + p(1 − 2η)`, because from ε ≈ 37 on
/// `2η` rounds to 1 and a null with a point mass (p0(x) = 1) divided by an exact 0.
#[cfg(test)]
pub fn sheffet_chi2_statistic(theta: &[f64], n: u64, eta: f64, complement: f64, p0: &[f64]) -> f64 {
    let two_eta = 2.0 * eta;
    n as f64
        * theta
            .iter()
            .zip(p0)
            .map(|(&t, &p)| {
                let mu = two_eta * p;
                let below_one = (1.0 - p) + p * complement;
                (t - mu).powi(2) / (below_one * (1.0 + mu))
            })
            .sum::<f64>()
}

/// Eigenvalues below this fraction of the largest are treated as 0 by the fallback: a
/// few ulps of the entries, times the dimension.
#[cfg(test)]
const RANK_TOLERANCE: f64 = 64.0 * f64::EPSILON;

/// The same test (as published, uniform rows; see above) for a finite cohort family, whose
/// θ has mean `μ0 = 2ηAp0` and covariance
/// `(A − μ0μ0ᵀ)/n` with `A = FᵀF/C ≠ I`: `n (θ − μ0)ᵀ (A − μ0μ0ᵀ)⁻¹ (θ − μ0)`, χ²_d. With
/// A = I and the rank-one term dropped this is exactly `P(θ)`. Returns the statistic and
/// its degrees of freedom.
///
/// The covariance is assembled as `(A − aaᵀ) + (1 − 4η²)·aaᵀ` (a = Ap0, and
/// `1 − 4η² = (1 − 2η)(1 + 2η)` from the stable `complement = 1 − 2η`), which is exact
/// where `A − 4η²aaᵀ` loses everything to rounding. With a point-mass null and ε ≳ 37 the
/// second term is below rounding and the matrix is singular in f64; the direction it
/// loses is one along which θ − μ0 is 0 unless a report lied (probability ≈ n·e^{−ε}).
/// The statistic is then taken on the remaining directions (a pseudo-inverse), with
/// the degrees of freedom reduced to match. `None` when nothing is left.
#[cfg(test)]
pub fn cohort_chi2_statistic(
    theta: &[f64],
    n: u64,
    eta: f64,
    complement: f64,
    gram: &DMatrix<f64>,
    p0: &[f64],
) -> Option<(f64, u32)> {
    let a = gram * DVector::from_column_slice(p0);
    let rank_one = &a * a.transpose();
    let cov = (gram - &rank_one) + rank_one * (complement * (1.0 + 2.0 * eta));
    let diff = DVector::from_column_slice(theta) - &a * (2.0 * eta);
    let d = u32::try_from(theta.len()).ok()?;
    if let Some(cholesky) = cov.clone().cholesky() {
        let solved = cholesky.solve(&diff);
        return Some((n as f64 * diff.dot(&solved), d));
    }
    let eigen = cov.symmetric_eigen();
    let largest = eigen.eigenvalues.iter().copied().fold(0.0, f64::max);
    let mut statistic = 0.0;
    let mut rank = 0u32;
    for (value, vector) in eigen
        .eigenvalues
        .iter()
        .zip(eigen.eigenvectors.column_iter())
    {
        if *value > RANK_TOLERANCE * largest {
            statistic += vector.dot(&diff).powi(2) / value;
            rank += 1;
        }
    }
    (rank > 0).then_some((n as f64 * statistic, rank))
}

/// Total-variation distance `½ Σ |a − b|`.
pub fn tv_distance(a: &[f64], b: &[f64]) -> f64 {
    0.5 * a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum::<f64>()
}
