use super::rank_one::bitflip_form;
use super::{chi2_sf, Decision};
use crate::mechanism::BitFlip;

/// Gaboardi–Rogers' `LocalBitFlipGOF` (seed 002 eq. 7, Thm 5.9):
/// `T = n vᵀ Π Σ(p0)⁻¹ Π v`, `v = H̃/n − p̃0`, `Σ(p0) = α²(Diag(p0) − p0p0ᵀ) + bI`,
/// referred to χ²_{d−1}. Π is symmetric, so `T = n (Πv)ᵀ Σ⁻¹ (Πv)`, and Σ is diagonal minus
/// rank one: O(d), no dense inverse.
///
/// At large ε, Σ⁻¹ weighs an empty category of p0 by 1/b ≈ e^{ε/2}, so Πv must be exact
/// there: its mean is taken from the integer total of the bits, `Σv = (ΣH̃ − n)/n −
/// (d−2)/(e^{ε/2}+1)` (α = 1 − 2/(e^{ε/2}+1)), not by summing nearly cancelling v_j.
pub fn local_bitflip_gof(m: &BitFlip, bit_counts: &[u64], n: u64, p0: &[f64]) -> Decision {
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
    let statistic = nf * bitflip_form(alpha * alpha, m.b(), p0, &w);
    let df = (p0.len() as u32).saturating_sub(1);
    Decision::chi2(statistic, df, chi2_sf(df, statistic))
}
