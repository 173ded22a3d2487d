//! Quadratic forms in diagonal-minus-rank-one matrices, in O(d) by Sherman–Morrison.
//! Both Σ(p0) of bit flip and the noise covariance have the form `D − c·uuᵀ`.

/// `vᵀ (D − c·uuᵀ)⁻¹ v` with `D = Diag(diag)` (all entries > 0) and `c ≥ 0`.
/// Sherman–Morrison: `(D − cuuᵀ)⁻¹ = D⁻¹ + c D⁻¹uuᵀD⁻¹ / (1 − c uᵀD⁻¹u)`.
pub fn quad_form_inverse(diag: &[f64], c: f64, u: &[f64], v: &[f64]) -> f64 {
    let mut vdv = 0.0;
    let mut udv = 0.0;
    let mut udu = 0.0;
    for ((&dj, &uj), &vj) in diag.iter().zip(u).zip(v) {
        vdv += vj * vj / dj;
        udv += uj * vj / dj;
        udu += uj * uj / dj;
    }
    vdv + c * udv * udv / (1.0 - c * udu)
}

/// `Π v = v − mean(v)·1`: removes the all-ones direction.
pub fn center(v: &[f64]) -> Vec<f64> {
    let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
    v.iter().map(|x| x - mean).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::{DMatrix, DVector};

    /// The O(d) form equals the dense nalgebra inverse for d up to 64.
    #[test]
    fn matches_dense_inverse() {
        for d in [2usize, 3, 10, 64] {
            let p: Vec<f64> = (0..d).map(|j| (j + 1) as f64).collect();
            let total: f64 = p.iter().sum();
            let p: Vec<f64> = p.iter().map(|x| x / total).collect();
            let (a2, b) = (0.3, 0.2);
            let diag: Vec<f64> = p.iter().map(|pj| a2 * pj + b).collect();
            let v: Vec<f64> = (0..d).map(|j| ((j * 7 % 5) as f64 - 2.0) / 100.0).collect();
            let fast = quad_form_inverse(&diag, a2, &p, &v);
            let pv = DVector::from_vec(p.clone());
            let sigma =
                DMatrix::from_diagonal(&DVector::from_vec(diag)) - a2 * &pv * pv.transpose();
            let vv = DVector::from_vec(v);
            let dense = (vv.transpose() * sigma.try_inverse().unwrap() * &vv)[(0, 0)];
            assert!(
                (fast - dense).abs() <= 1e-10 * dense.abs(),
                "d={d}: {fast} vs {dense}"
            );
        }
    }
}
