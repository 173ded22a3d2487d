use super::rank_one::{bitflip_form, quad_form_inverse};
use super::{chi2_sf, Decision};
use crate::mechanism::BitFlip;

/// Gaboardi–Rogers' `LocalBitFlipGOF` (seed 002 eq. 7, Thm 5.9), generalized to any unary
/// encoding (docs/STATISTICS.md §3.1): with `v = H̃/n − (q + α p0)` and
/// `Σ(p0) = Diag(q(1−q) + α(1−2q) p0) − α² p0p0ᵀ`,
/// `T = n (vᵀ Σ⁻¹ v − (1ᵀv)² / 1ᵀΣ1)`, referred to χ²_{d−1}. The second term removes the
/// direction in which no p moves the mean (`1ᵀ E[v] = 0` for every p); for the symmetric
/// mechanism `Σ1 = b1` and T is exactly `n vᵀ Π Σ⁻¹ Π v`.
pub fn local_bitflip_gof(m: &BitFlip, bit_counts: &[u64], n: u64, p0: &[f64]) -> Decision {
    let statistic = if m.is_optimized() {
        unary_statistic(m, bit_counts, n, p0)
    } else {
        symmetric_statistic(m, bit_counts, n, p0)
    };
    let df = (p0.len() as u32).saturating_sub(1);
    Decision::chi2(statistic, df, chi2_sf(df, statistic))
}

/// The symmetric form `n (Πv)ᵀ Σ⁻¹ (Πv)`, Σ diagonal minus rank one: O(d), no dense inverse.
///
/// At large ε, Σ⁻¹ weighs an empty category of p0 by 1/b ≈ e^{ε/2}, so Πv must be exact
/// there: its mean is taken from the integer total of the bits, `Σv = (ΣH̃ − n)/n −
/// (d−2)/(e^{ε/2}+1)` (α = 1 − 2/(e^{ε/2}+1)), not by summing nearly cancelling v_j.
fn symmetric_statistic(m: &BitFlip, bit_counts: &[u64], n: u64, p0: &[f64]) -> f64 {
    let nf = n as f64;
    let (alpha, flip) = (m.alpha(), m.flip());
    let d = p0.len() as f64;
    let ones: u128 = bit_counts.iter().map(|&h| u128::from(h)).sum();
    let excess = ones as f64 - n as f64;
    let mean = (excess / nf - (d - 2.0) * flip) / d;
    let w: Vec<f64> = bit_counts
        .iter()
        .zip(p0)
        .map(|(&h, &p)| (h as f64 / nf - flip - alpha * p) - mean)
        .collect();
    nf * bitflip_form(alpha * alpha, m.b(), p0, &w)
}

/// The general form for an asymmetric encoding (OUE). Σ's diagonal never falls below
/// `q(1−q)` and its Sherman–Morrison denominator `1 − α² Σ p_j²/D_j` stays ≥ 1/2 for
/// OUE (each term is at most `p_j/2`), so the textbook form is stable at every ε.
fn unary_statistic(m: &BitFlip, bit_counts: &[u64], n: u64, p0: &[f64]) -> f64 {
    let nf = n as f64;
    let (alpha, flip, b, slope) = (m.alpha(), m.flip(), m.b(), m.diag_slope());
    let d = p0.len() as f64;
    let v: Vec<f64> = bit_counts
        .iter()
        .zip(p0)
        .map(|(&h, &p)| h as f64 / nf - flip - alpha * p)
        .collect();
    let diag: Vec<f64> = p0.iter().map(|&p| b + slope * p).collect();
    // 1ᵀv from the integer total, and 1ᵀΣ1 = d·q(1−q) + α(1−2q) − α² (Σp0 = 1).
    let ones: u128 = bit_counts.iter().map(|&h| u128::from(h)).sum();
    let total = ones as f64 / nf - d * flip - alpha;
    let total_variance = d * b + slope - alpha * alpha;
    let t = quad_form_inverse(&diag, alpha * alpha, p0, &v) - total * total / total_variance;
    nf * t.max(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::{DMatrix, DVector};

    /// Σ(p) of a unary encoding from its four bit probabilities, entry by entry: the
    /// covariance of independent bits given x, mixed over x ~ p.
    fn dense_sigma(m: &BitFlip, p: &[f64]) -> DMatrix<f64> {
        let d = p.len();
        let (keep, flip) = (m.keep_probability(), m.flip());
        let mean: Vec<f64> = p.iter().map(|&pj| pj * keep + (1.0 - pj) * flip).collect();
        DMatrix::from_fn(d, d, |j, k| {
            // E[Z_j Z_k] = Σ_x p_x E[Z_j | x] E[Z_k | x] for j ≠ k; E[Z_j²] = E[Z_j].
            let second = if j == k {
                mean[j]
            } else {
                (0..d)
                    .map(|x| {
                        let e = |i: usize| if i == x { keep } else { flip };
                        p[x] * e(j) * e(k)
                    })
                    .sum()
            };
            second - mean[j] * mean[k]
        })
    }

    /// The O(d) statistic equals the dense GLR form `n(vᵀΣ⁻¹v − (1ᵀv)²/1ᵀΣ1)` built from
    /// the bit law itself, for OUE and for symmetric bit flip (whose form is Π Σ⁻¹ Π).
    #[test]
    fn matches_the_dense_form_from_the_bit_law() {
        for optimized in [true, false] {
            for (eps, d) in [(0.5, 3usize), (2.0, 6), (5.0, 5)] {
                let m = if optimized {
                    BitFlip::optimized(eps, d as u32).unwrap()
                } else {
                    BitFlip::new(eps, d as u32).unwrap()
                };
                let p0: Vec<f64> = (0..d).map(|j| (j + 1) as f64).collect();
                let total: f64 = p0.iter().sum();
                let p0: Vec<f64> = p0.iter().map(|x| x / total).collect();
                let n = 1000u64;
                let bits: Vec<u64> = (0..d as u64).map(|j| 200 + 37 * j % 90).collect();
                let fast = local_bitflip_gof(&m, &bits, n, &p0).statistic;
                let sigma = dense_sigma(&m, &p0);
                let v = DVector::from_iterator(
                    d,
                    bits.iter()
                        .zip(&m.bit_law(&p0))
                        .map(|(&h, &mu)| h as f64 / n as f64 - mu),
                );
                let ones = DVector::from_element(d, 1.0);
                let inv = sigma.clone().try_inverse().unwrap();
                let s1 = (ones.transpose() * &v)[(0, 0)];
                let dense = n as f64
                    * ((v.transpose() * inv * &v)[(0, 0)]
                        - s1 * s1 / (ones.transpose() * &sigma * &ones)[(0, 0)]);
                assert!(
                    (fast - dense).abs() <= 1e-8 * dense.abs().max(1.0),
                    "oue={optimized} ε={eps} d={d}: {fast} vs {dense}"
                );
            }
        }
    }
}
