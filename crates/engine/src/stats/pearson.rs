use super::{chi2_sf, Decision};
use crate::sketch::nonzero_cells;

/// Pearson's χ² of observed counts against cell probabilities `probs`:
/// `T = Σ (H − n q)² / (n q)` over cells with `q > 0`, df = (cells with q > 0) − 1.
/// A count in a cell the null says is impossible makes T infinite (p = 0).
pub fn pearson_gof(counts: &[u64], probs: &[f64]) -> Decision {
    pearson_gof_cells(
        nonzero_cells(counts),
        counts.iter().sum(),
        probs.iter().copied(),
    )
}

/// [`pearson_gof`] from the non-zero cells `(category, count)` in category order, `n`
/// their sum, and the probability of every cell in order. A sparse table at d = 2^24 is
/// walked once without building its d counts (128 MiB); the terms are added in the same
/// order as the dense walk, so the statistic has the same bits.
pub fn pearson_gof_cells(
    nonzero: impl IntoIterator<Item = (usize, u64)>,
    n: u64,
    probs: impl IntoIterator<Item = f64>,
) -> Decision {
    let (statistic, df) = pearson_statistic_cells(nonzero, n, probs);
    Decision::chi2(statistic, df, chi2_sf(df, statistic))
}

/// [`pearson_gof_cells`]'s statistic and df without its χ² tail: a simulated p-value
/// computes the statistic of hundreds of null tables and needs no tail for any of them.
pub fn pearson_statistic_cells(
    nonzero: impl IntoIterator<Item = (usize, u64)>,
    n: u64,
    probs: impl IntoIterator<Item = f64>,
) -> (f64, u32) {
    let nf = n as f64;
    let mut nonzero = nonzero.into_iter().peekable();
    let mut statistic = 0.0;
    let mut cells = 0u32;
    for (j, q) in probs.into_iter().enumerate() {
        let h = nonzero.next_if(|&(k, _)| k == j).map_or(0, |(_, h)| h);
        if q > 0.0 {
            let expected = nf * q;
            let diff = h as f64 - expected;
            statistic += diff * diff / expected;
            cells += 1;
        } else if h > 0 {
            statistic = f64::INFINITY;
        }
    }
    (statistic, cells.saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The walk over non-zero cells is the dense walk: the same statistic to the bit,
        /// the same df, with impossible cells (q = 0) and empty ones anywhere.
        #[test]
        fn cells_walk_equals_the_dense_walk(
            table in proptest::collection::vec((0u64..4, 0u32..3), 1..60),
        ) {
            let counts: Vec<u64> = table.iter().map(|&(h, _)| h).collect();
            let weights: Vec<f64> = table.iter().map(|&(_, w)| f64::from(w)).collect();
            let total: f64 = weights.iter().sum();
            let probs: Vec<f64> = weights.iter().map(|w| w / total.max(1.0)).collect();
            let dense = pearson_gof(&counts, &probs);
            let sparse = pearson_gof_cells(
                nonzero_cells(&counts).collect::<Vec<_>>(),
                counts.iter().sum(),
                probs.iter().copied(),
            );
            proptest::prop_assert_eq!(dense.statistic.to_bits(), sparse.statistic.to_bits());
            proptest::prop_assert_eq!(dense.df, sparse.df);
        }
    }

    // scipy.stats.chisquare([0, 5, 0, 3], f_exp=[2, 2, 2, 2])
    //   -> statistic 9.0, pvalue 0.02929088653488826
    #[test]
    fn known_value_with_empty_cells() {
        let found = pearson_gof_cells([(1, 5), (3, 3)], 8, [0.25; 4]);
        assert_eq!(found.statistic, 9.0);
        let p = found.p_value.unwrap_or(f64::NAN);
        assert!((p - 0.02929088653488826).abs() < 1e-14, "{p}");
    }
}
