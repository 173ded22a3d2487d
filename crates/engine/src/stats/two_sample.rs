//! Two-sample tests (docs/STATISTICS.md §5, seed 003): do two privatized samples share one
//! distribution?

use super::rank_one::bitflip_form;
use super::{chi2_sf, Decision};
use crate::mechanism::BitFlip;
use crate::mle::project_to_simplex;

/// Pearson's χ² on the 2×d table of privatized counts `a` (n1 reports) and `b` (n2):
/// `T = Σ_ℓ (n2 a_ℓ − n1 b_ℓ)² / (n1 n2 (a_ℓ + b_ℓ))`, χ²_{k−1} over the k cells not empty
/// in both samples. This equals `scipy.stats.chi2_contingency(correction=False)`; seed 003's
/// extra factor (n1+n2) in the denominator is a typo.
pub fn genrr_two_sample(a: &[u64], b: &[u64]) -> Decision {
    let n1: u64 = a.iter().sum();
    let n2: u64 = b.iter().sum();
    let (n1f, n2f) = (n1 as f64, n2 as f64);
    let mut statistic = 0.0;
    let mut cells = 0u32;
    for (&x, &y) in a.iter().zip(b) {
        if x + y == 0 {
            continue;
        }
        cells += 1;
        let diff = n2f * x as f64 - n1f * y as f64;
        statistic += diff * diff / (n1f * n2f * (x + y) as f64);
    }
    let df = cells.saturating_sub(1);
    Decision::chi2(statistic, df, chi2_sf(df, statistic))
}

/// Bit-flip two-sample: `D = H̃_Y/n1 − H̃_Z/n2`; p̂ from the pooled reports, projected onto
/// the simplex (so `Σ(p̂)1 = b1` holds); `T = (n1n2/(n1+n2)) (ΠD)ᵀ Σ(p̂)⁻¹ (ΠD)`, χ²_{d−1}.
pub fn bitflip_two_sample(m: &BitFlip, a: &[u64], n1: u64, b: &[u64], n2: u64) -> Decision {
    let (n1f, n2f) = (n1 as f64, n2 as f64);
    let (alpha, flip) = (m.alpha(), m.flip());
    // ΠD with the mean of D from the integer bit totals (see `local_bitflip_gof`: at
    // large ε an empty category weighs 1/b, so ΠD must not carry rounding there).
    let excess =
        |c: &[u64], n: u64| c.iter().map(|&h| u128::from(h)).sum::<u128>() as f64 - n as f64;
    let mean = (excess(a, n1) / n1f - excess(b, n2) / n2f) / a.len().max(1) as f64;
    let diff: Vec<f64> = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (x as f64 / n1f - y as f64 / n2f) - mean)
        .collect();
    let pooled: Vec<f64> = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| ((x + y) as f64 / (n1f + n2f) - flip) / alpha)
        .collect();
    let p = project_to_simplex(&pooled);
    let a2 = alpha * alpha;
    let statistic = n1f * n2f / (n1f + n2f) * bitflip_form(a2, m.b(), &p, &diff);
    let df = (a.len() as u32).saturating_sub(1);
    Decision::chi2(statistic, df, chi2_sf(df, statistic))
}
