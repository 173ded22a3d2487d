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

/// `wᵀ Σ⁻¹ w` for `Σ = a²(Diag(p) − ppᵀ) + bI` (bit flip's Σ(p)), p a distribution and w
/// orthogonal to 1 (so that Σ's eigenvalue b on 1 never enters). With `s_j = 1/(a²p_j+b)`
/// Sherman–Morrison reduces, using `Σp = 1` and `Σw = 0` exactly, to
/// `Σ s_j w_j² + (b/a²)(Σ s_j w_j)²/(Σ p_j s_j)` = `Σ s_j w_j² + (a²/b)(Σ p_j s_j w_j)²/(Σ p_j s_j)`.
/// The textbook form divides by `1 − a² Σ p_j² s_j`, which cancels to O(b) and is 0 in
/// f64 for large ε; of the two stable forms the first suits b ≤ a², the second b > a².
pub fn bitflip_form(a2: f64, b: f64, p: &[f64], w: &[f64]) -> f64 {
    let (mut main, mut sw, mut psw, mut ps) = (0.0, 0.0, 0.0, 0.0);
    for (&pj, &wj) in p.iter().zip(w) {
        let sj = 1.0 / (a2 * pj + b);
        main += sj * wj * wj;
        sw += sj * wj;
        psw += pj * sj * wj;
        ps += pj * sj;
    }
    let correction = if b <= a2 {
        b / a2 * sw * sw / ps
    } else {
        a2 / b * psw * psw / ps
    };
    main + correction
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

    /// The stable bit-flip form equals the dense `(Πv)ᵀ Σ⁻¹ (Πv)` in both of its regimes
    /// (b ≤ a² and b > a²), including a null with an empty category.
    #[test]
    fn bitflip_form_matches_dense_inverse() {
        for (d, a2, b) in [
            (3usize, 0.8, 0.05),
            (6, 0.3, 0.2),
            (5, 0.01, 0.24),
            (4, 0.9, 1e-3),
        ] {
            let mut p: Vec<f64> = (0..d).map(|j| (j % 3) as f64).collect();
            let total: f64 = p.iter().sum();
            p.iter_mut().for_each(|x| *x /= total);
            let v: Vec<f64> = (0..d).map(|j| ((j * 7 % 5) as f64 - 2.0) / 100.0).collect();
            let w = center(&v);
            let fast = bitflip_form(a2, b, &p, &w);
            let pv = DVector::from_vec(p.clone());
            let sigma = a2 * (DMatrix::from_diagonal(&pv) - &pv * pv.transpose())
                + b * DMatrix::<f64>::identity(d, d);
            let ww = DVector::from_vec(w);
            let dense = (ww.transpose() * sigma.try_inverse().unwrap() * &ww)[(0, 0)];
            assert!(
                (fast - dense).abs() <= 1e-9 * dense.abs(),
                "d={d} a²={a2} b={b}: {fast} vs {dense}"
            );
        }
    }
}
