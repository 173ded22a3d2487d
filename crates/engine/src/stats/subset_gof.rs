use super::{chi2_sf, Decision};
use crate::mechanism::Subset;

/// The identity test for k-subset reports (docs/STATISTICS.md §3.2). With `v = c/n − (q +
/// α p0)`, c the item counts, the covariance of one report's indicator vector under p0 is
/// `Σ(p0) = D + U C Uᵀ`, `U = [1, p0]`,
/// `D = Diag((q − r) + (α − 2(s − r)) p0)`,
/// `C = [[r − q², s − r − qα], [s − r − qα, −α²]]`,
/// with `s = P(i, j ∈ S | x = i)` and `r = P(i, j ∈ S | x ∉ {i, j})`. Every report has
/// exactly k members, so `Σ1 = 0` and `1ᵀv = 0`: the statistic is the generalized-inverse
/// form `T = n vᵀ Σ⁺ v`, referred to χ²_{d−1}. On `1⊥`, Σ⁺ is the inverse of `Σ + c 11ᵀ`
/// for any c > 0, which is again diagonal plus rank two and is inverted by Woodbury in
/// O(d).
pub fn subset_gof(m: &Subset, item_counts: &[u64], n: u64, p0: &[f64]) -> Decision {
    let statistic = subset_statistic(m, item_counts, n, p0);
    let df = (p0.len() as u32).saturating_sub(1);
    Decision::chi2(statistic, df, chi2_sf(df, statistic))
}

/// `T = n vᵀ Σ⁺ v`; 0 when n = 0.
pub fn subset_statistic(m: &Subset, item_counts: &[u64], n: u64, p0: &[f64]) -> f64 {
    if n == 0 || p0.is_empty() {
        return 0.0;
    }
    let nf = n as f64;
    let (q, alpha) = (m.q(), m.alpha());
    let mut v: Vec<f64> = item_counts
        .iter()
        .zip(p0)
        .map(|(&c, &p)| c as f64 / nf - q - alpha * p)
        .collect();
    // 1ᵀv is 0 for valid reports; removing its rounding keeps v on 1⊥, where Σ⁺ applies.
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    v.iter_mut().for_each(|x| *x -= mean);
    nf * pinv_form(m, p0, &v)
}

/// `vᵀ Σ(p0)⁺ v` for `v` on `1⊥` (Σ(p0) as in [`subset_gof`]); the planner's noncentrality
/// is `α² Δᵀ Σ⁺ Δ` with the same form.
pub fn pinv_form(m: &Subset, p0: &[f64], v: &[f64]) -> f64 {
    let (q, alpha) = (m.q(), m.alpha());
    let (s, r) = (m.pair_with_truth(), m.pair_without_truth());
    let base = q - r;
    let slope = alpha - 2.0 * (s - r);
    let diag: Vec<f64> = p0.iter().map(|&p| base + slope * p).collect();
    let cross = s - r - q * alpha;
    // c = q − r > 0 makes Σ + c11ᵀ positive definite at the scale of Σ's diagonal.
    let c = [[r - q * q + base, cross], [cross, -alpha * alpha]];
    woodbury_form(&diag, &c, p0, v).max(0.0)
}

/// `vᵀ (D + U C Uᵀ)⁻¹ v` for `U = [1, f]`: `vᵀD⁻¹v − zᵀ (I + C G)⁻¹ C z` with
/// `G = UᵀD⁻¹U` and `z = UᵀD⁻¹v` (no inverse of C, which may be singular).
fn woodbury_form(diag: &[f64], c: &[[f64; 2]; 2], f: &[f64], v: &[f64]) -> f64 {
    let (mut vdv, mut z, mut g) = (0.0, [0.0; 2], [[0.0; 2]; 2]);
    for ((&dj, &fj), &vj) in diag.iter().zip(f).zip(v) {
        let inv = 1.0 / dj;
        vdv += vj * vj * inv;
        z[0] += vj * inv;
        z[1] += fj * vj * inv;
        g[0][0] += inv;
        g[0][1] += fj * inv;
        g[1][1] += fj * fj * inv;
    }
    g[1][0] = g[0][1];
    let cg = |i: usize, j: usize| c[i][0] * g[0][j] + c[i][1] * g[1][j];
    let mat = [[1.0 + cg(0, 0), cg(0, 1)], [cg(1, 0), 1.0 + cg(1, 1)]];
    let w = [
        c[0][0] * z[0] + c[0][1] * z[1],
        c[1][0] * z[0] + c[1][1] * z[1],
    ];
    let det = mat[0][0] * mat[1][1] - mat[0][1] * mat[1][0];
    let y = [
        (mat[1][1] * w[0] - mat[0][1] * w[1]) / det,
        (mat[0][0] * w[1] - mat[1][0] * w[0]) / det,
    ];
    vdv - (z[0] * y[0] + z[1] * y[1])
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::{DMatrix, DVector};

    /// Σ(p) entry by entry from the report law: E[Y_iY_j] mixed over x ~ p, minus the
    /// product of the means.
    fn dense_sigma(m: &Subset, p: &[f64]) -> DMatrix<f64> {
        let d = p.len();
        let mean = m.item_law(p);
        let (keep, q, s, r) = (
            m.keep_probability(),
            m.q(),
            m.pair_with_truth(),
            m.pair_without_truth(),
        );
        DMatrix::from_fn(d, d, |i, j| {
            let second: f64 = (0..d)
                .map(|x| {
                    let e = if i == j {
                        if x == i {
                            keep
                        } else {
                            q
                        }
                    } else if x == i || x == j {
                        s
                    } else {
                        r
                    };
                    p[x] * e
                })
                .sum();
            second - mean[i] * mean[j]
        })
    }

    /// The O(d) statistic equals `n vᵀ Σ⁺ v` with Σ⁺ the dense pseudo-inverse of the
    /// covariance built from the pair law, and Σ annihilates 1.
    #[test]
    fn matches_the_dense_pseudo_inverse() {
        for (eps, d, k) in [(0.5, 3usize, 1u32), (1.0, 6, 2), (2.0, 8, 3), (5.0, 5, 4)] {
            let m = Subset::new(eps, d as u32, Some(k)).unwrap();
            let p0: Vec<f64> = (0..d).map(|j| (j + 1) as f64).collect();
            let total: f64 = p0.iter().sum();
            let p0: Vec<f64> = p0.iter().map(|x| x / total).collect();
            let n = 1000u64;
            // Counts summing to k·n, as valid reports do.
            let mut counts: Vec<u64> = (0..d as u64).map(|j| 100 + 37 * j % 90).collect();
            let rest = k as u64 * n - counts[..d - 1].iter().sum::<u64>();
            counts[d - 1] = rest;
            let fast = subset_statistic(&m, &counts, n, &p0);
            let sigma = dense_sigma(&m, &p0);
            let ones = DVector::from_element(d, 1.0);
            assert!((&sigma * &ones).norm() < 1e-12);
            let v = DVector::from_iterator(
                d,
                counts
                    .iter()
                    .zip(m.item_law(&p0))
                    .map(|(&c, mu)| c as f64 / n as f64 - mu),
            );
            // Σ⁺ on 1⊥ through the full-rank Σ + 11ᵀ/d (LU, steadier than an SVD cut-off).
            let full = &sigma + &ones * ones.transpose() / d as f64;
            let dense = n as f64 * (v.transpose() * full.try_inverse().unwrap() * &v)[(0, 0)];
            let pinv = sigma.pseudo_inverse(1e-12).unwrap();
            let svd = n as f64 * (v.transpose() * pinv * &v)[(0, 0)];
            assert!((svd - dense).abs() <= 1e-5 * dense.abs().max(1.0));
            assert!(
                (fast - dense).abs() <= 1e-9 * dense.abs().max(1.0),
                "ε={eps} d={d} k={k}: {fast} vs {dense}"
            );
        }
    }
}
