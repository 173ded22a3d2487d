use nalgebra::{DMatrix, DVector};

/// Sheffet's χ² statistic for the non-symmetric mechanism (seed 000 §4.2):
/// `P(θ) = n Σ_x (θ(x) − 2η p0(x))² / (1 − 4η² p0(x)²)`, referred to χ²_d (d, not d−1:
/// θ is not constrained to sum to anything).
pub fn sheffet_chi2_statistic(theta: &[f64], n: u64, eta: f64, p0: &[f64]) -> f64 {
    let two_eta = 2.0 * eta;
    n as f64
        * theta
            .iter()
            .zip(p0)
            .map(|(&t, &p)| {
                let mu = two_eta * p;
                (t - mu).powi(2) / (1.0 - mu * mu)
            })
            .sum::<f64>()
}

/// The same test for a finite cohort family, whose θ has mean `μ0 = 2ηAp0` and covariance
/// `(A − μ0μ0ᵀ)/n` with `A = FᵀF/C ≠ I`: `n (θ − μ0)ᵀ (A − μ0μ0ᵀ)⁻¹ (θ − μ0)`, χ²_d. With
/// A = I and the rank-one term dropped this is exactly `P(θ)`.
pub fn cohort_chi2_statistic(
    theta: &[f64],
    n: u64,
    eta: f64,
    gram: &DMatrix<f64>,
    p0: &[f64],
) -> Option<f64> {
    let mu = gram * DVector::from_column_slice(p0) * (2.0 * eta);
    let cov = gram - &mu * mu.transpose();
    let diff = DVector::from_column_slice(theta) - &mu;
    let solved = cov.cholesky()?.solve(&diff);
    Some(n as f64 * diff.dot(&solved))
}

/// Total-variation distance `½ Σ |a − b|`.
pub fn tv_distance(a: &[f64], b: &[f64]) -> f64 {
    0.5 * a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum::<f64>()
}
