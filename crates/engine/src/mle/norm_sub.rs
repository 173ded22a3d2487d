//! Norm-Sub (Wang, Lopuhaä-Zwakenberg, Li, Škorić & Li, *Locally Differentially Private
//! Frequency Estimation with Consistency*, NDSS 2020, §4): the consistent estimate records
//! carry beside the unbiased one (docs/STATISTICS.md §2.1).

use super::project_to_simplex;

/// Norm-Sub of an unbiased estimate: entries ≤ 0 become 0 and stay 0; one common δ is
/// subtracted from the positive ones (added, when they sum below 1), repeating while any
/// falls below 0, until they sum to 1. Its result is `max(p̂_j − δ, 0)` on the positive
/// entries with `Σ = 1`: the Euclidean projection of the positive entries alone onto the
/// simplex, which the sort-based projection computes in one O(d log d) pass instead of
/// up to d rounds. (It is not the projection of the whole estimate: when the positive
/// entries sum below 1, that one would lift some negative entries above 0 too.) When no
/// entry is positive the data say nothing, and the result is uniform. Empty in, empty
/// out.
pub fn norm_sub(estimate: &[f64]) -> Vec<f64> {
    let positive: Vec<f64> = estimate.iter().copied().filter(|&x| x > 0.0).collect();
    if positive.is_empty() {
        let d = estimate.len();
        return vec![1.0 / d as f64; d];
    }
    let mut projected = project_to_simplex(&positive).into_iter();
    estimate
        .iter()
        .map(|&x| match x > 0.0 {
            true => projected.next().unwrap_or(0.0),
            false => 0.0,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The paper's procedure, literally: clip negatives, shift the positive entries by a
    /// common δ to sum 1, repeat while any became negative.
    fn iterative(estimate: &[f64]) -> Vec<f64> {
        let mut f = estimate.to_vec();
        loop {
            f.iter_mut().for_each(|x| *x = x.max(0.0));
            let positive = f.iter().filter(|&&x| x > 0.0).count();
            if positive == 0 {
                return f;
            }
            let delta = (f.iter().sum::<f64>() - 1.0) / positive as f64;
            let mut negative = false;
            for x in f.iter_mut().filter(|x| **x > 0.0) {
                *x -= delta;
                negative |= *x < 0.0;
            }
            if !negative {
                return f;
            }
        }
    }

    /// Non-negative, sums to 1, and equals the iterative procedure, on random unbiased-
    /// looking estimates (entries around a distribution plus noise of either sign, sums
    /// above and below 1) from d = 2 to 1000; a valid distribution is left as it is.
    #[test]
    fn is_the_consistent_norm_sub_estimate() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(30);
        for d in [2usize, 3, 16, 100, 1000] {
            for _ in 0..50 {
                let noise = rng.random_range(0.001..0.5);
                let v: Vec<f64> = (0..d)
                    .map(|_| 1.0 / d as f64 + rng.random_range(-noise..noise))
                    .collect();
                let f = norm_sub(&v);
                assert!(f.iter().all(|&x| x >= 0.0), "d={d}: {f:?}");
                let total: f64 = f.iter().sum();
                assert!(
                    (total - 1.0).abs() <= 1e-12 * d as f64,
                    "d={d}: sum {total}"
                );
                for (a, b) in f.iter().zip(iterative(&v)) {
                    assert!((a - b).abs() <= 1e-12, "d={d}: {a} vs {b}");
                }
            }
        }
        let p = [0.5, 0.25, 0.25];
        assert_eq!(norm_sub(&p), p);
        assert!(norm_sub(&[]).is_empty());
        // Positive entries summing below 1 are lifted by one δ; the negative one stays 0.
        let f = norm_sub(&[0.3, 0.3, -0.05]);
        assert!((f[0] - 0.5).abs() < 1e-15 && (f[1] - 0.5).abs() < 1e-15 && f[2] == 0.0);
        assert_eq!(norm_sub(&[-0.1, 0.0]), [0.5, 0.5]);
    }
}
