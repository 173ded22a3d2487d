use super::{chi2_sf, Decision};

/// Pearson's χ² of observed counts against cell probabilities `probs`:
/// `T = Σ (H − n q)² / (n q)` over cells with `q > 0`, df = (cells with q > 0) − 1.
/// A count in a cell the null says is impossible makes T infinite (p = 0).
pub fn pearson_gof(counts: &[u64], probs: &[f64]) -> Decision {
    let n: u64 = counts.iter().sum();
    let nf = n as f64;
    let mut statistic = 0.0;
    let mut cells = 0u32;
    for (&h, &q) in counts.iter().zip(probs) {
        if q > 0.0 {
            let expected = nf * q;
            let diff = h as f64 - expected;
            statistic += diff * diff / expected;
            cells += 1;
        } else if h > 0 {
            statistic = f64::INFINITY;
        }
    }
    let df = cells.saturating_sub(1);
    Decision::chi2(statistic, df, chi2_sf(df, statistic))
}
