use super::rank_one::{center, quad_form_inverse};
use super::{chi2_sf, Decision};
use crate::mechanism::BitFlip;

/// Gaboardi–Rogers' `LocalBitFlipGOF` (seed 002 eq. 7, Thm 5.9):
/// `T = n vᵀ Π Σ(p0)⁻¹ Π v`, `v = H̃/n − p̃0`, `Σ(p0) = α²(Diag(p0) − p0p0ᵀ) + bI`,
/// referred to χ²_{d−1}. Π is symmetric, so `T = n (Πv)ᵀ Σ⁻¹ (Πv)`, and Σ is diagonal minus
/// rank one: O(d), no dense inverse.
pub fn local_bitflip_gof(m: &BitFlip, bit_counts: &[u64], n: u64, p0: &[f64]) -> Decision {
    let nf = n as f64;
    let mean0 = m.bit_law(p0);
    let v: Vec<f64> = bit_counts
        .iter()
        .zip(&mean0)
        .map(|(&h, &e)| h as f64 / nf - e)
        .collect();
    let a2 = m.alpha() * m.alpha();
    let b = m.b();
    let diag: Vec<f64> = p0.iter().map(|&p| a2 * p + b).collect();
    let statistic = nf * quad_form_inverse(&diag, a2, p0, &center(&v));
    let df = (p0.len() as u32).saturating_sub(1);
    Decision::chi2(statistic, df, chi2_sf(df, statistic))
}
