use super::rank_one::{center, quad_form_inverse};

/// Gaboardi–Rogers' `LocalNoiseGOF` statistic (seed 002 eq. 2, Alg. 1; Kifer–Rogers
/// projected form): `T = n vᵀ Π (Diag(p0) + σI − p0p0ᵀ)⁻¹ Π v`, `v = Ĥ/n − p0`, σ the
/// per-coordinate noise variance. O(d) by Sherman–Morrison.
pub fn noise_statistic(sums: &[f64], n: u64, p0: &[f64], variance: f64) -> f64 {
    let nf = n as f64;
    let v: Vec<f64> = sums.iter().zip(p0).map(|(&s, &p)| s / nf - p).collect();
    let diag: Vec<f64> = p0.iter().map(|&p| p + variance).collect();
    nf * quad_form_inverse(&diag, 1.0, p0, &center(&v))
}
