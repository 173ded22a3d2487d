//! Multiple-testing control across the groups of one window (docs/STATISTICS.md §9).

/// Benjamini–Hochberg adjusted p-values (q-values), in the input order. Entries without a
/// p-value, or with a NaN one (a test that could not run), are left out of the family, so
/// they do not inflate its size m, and get none.
pub fn bh_q_values(p: &[Option<f64>]) -> Vec<Option<f64>> {
    let mut present: Vec<(usize, f64)> = p
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.filter(|x| !x.is_nan()).map(|x| (i, x)))
        .collect();
    let m = present.len() as f64;
    present.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut out = vec![None; p.len()];
    let mut running = 1.0f64;
    for (rank, &(index, value)) in present.iter().enumerate().rev() {
        // m/rank ≥ 1 first, so that rounding can never put a q-value below its p-value
        // (p·m/m can come out one ulp below p).
        running = running.min(value * (m / (rank + 1) as f64)).min(1.0);
        out[index] = Some(running);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// statsmodels.stats.multitest.multipletests(
    ///     [0.01, 0.04, 0.03, 0.005, 0.5, 0.2, 0.04], method="fdr_bh")[1]
    #[test]
    fn matches_statsmodels() {
        let p = [0.01, 0.04, 0.03, 0.005, 0.5, 0.2, 0.04].map(Some);
        let q = bh_q_values(&p);
        let expected = [0.035, 0.056, 0.056, 0.035, 0.5, 0.23333333333333336, 0.056];
        for (found, e) in q.iter().zip(expected) {
            assert!((found.unwrap() - e).abs() < 1e-12, "{q:?}");
        }
        assert_eq!(bh_q_values(&[None, Some(0.2)]), vec![None, Some(0.2)]);
    }

    /// q ≥ p for every entry, to the last bit: p·3/3 rounds below p for some p.
    #[test]
    fn q_values_never_fall_below_p_values() {
        let mut p = 0.123456789f64;
        for _ in 0..10_000 {
            p = (p * 7.3 + 0.011).fract();
            let family = [Some(p / 3.0), Some(p / 2.0), Some(p)];
            for (q, pv) in bh_q_values(&family).iter().zip(family) {
                assert!(q.unwrap() >= pv.unwrap(), "{family:?}");
            }
        }
    }

    /// A NaN p-value is not a member of the family: m stays 2 here, not 3.
    #[test]
    fn nan_p_values_are_left_out() {
        let q = bh_q_values(&[Some(0.01), Some(f64::NAN), Some(0.04)]);
        assert_eq!(q[1], None);
        assert!((q[0].unwrap() - 0.02).abs() < 1e-15, "{q:?}");
        assert!((q[2].unwrap() - 0.04).abs() < 1e-15, "{q:?}");
    }
}
