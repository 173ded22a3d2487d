//! Time-uniform confidence sequences for each category's frequency, from the same Gaussian
//! mixture as the asymptotic e-processes ([`super::gaussian`]).
//!
//! Every unbiased estimator of this engine is a mean of i.i.d. per-report contributions
//! (GenRR's `(1{report = j} − q)/(p − q)`, bit flip's debiased bit, a Hadamard or cohort
//! sign times its row entry, a noisy one-hot coordinate), so `p̂_j − p_j` is a normalized
//! random walk with per-report standard deviation `σ_j = std_error_j·√n`. The mixture
//! e-process for `H: p_j = μ` has the χ²₁ statistic `T(μ) = n (p̂_j − μ)²/σ_j²`; by Ville's
//! inequality the set of μ it has not rejected at level α,
//!
//! ```text
//! CS_n = p̂_j ± std_error_j · √T*(n),   T*(n): log E_n(T*) = ln(1/α),
//! ```
//!
//! covers p_j at every n simultaneously with probability ≥ 1 − α, asymptotically (the
//! time-uniform CLT of Waudby-Smith, Wu, Ramdas et al., as for the e-processes; σ_j is the
//! plug-in standard error). Before `ASYMPTOTIC_START` reports the sequence is [0, 1]. The
//! guarantee is per category; over all d categories at once it holds at level d·α
//! (Bonferroni). The mixture over the precision grid makes the width adapt to n without
//! a planned sample size, at a price: ≈ 1.8× the fixed-n Wald interval at n = 10⁶
//! (docs/STATISTICS.md §10.2 has the ratio over n).

use super::gaussian::{log_e_mixture, ASYMPTOTIC_START, PRECISION_GRID};

/// `√T*(n)`: the confidence sequence's half-width in standard errors at n reports, or
/// None before [`ASYMPTOTIC_START`] (the sequence is then the whole [0, 1]).
pub fn width_in_standard_errors(n: u64, alpha: f64) -> Option<f64> {
    let t = n as f64;
    if t < ASYMPTOTIC_START || !(alpha > 0.0 && alpha < 1.0) {
        return None;
    }
    let target = (1.0 / alpha).ln();
    let log_e = |stat: f64| log_e_mixture(stat, 1, t, &PRECISION_GRID);
    // log E is increasing in the statistic: bisect on [0, hi].
    let mut hi = 1.0;
    while log_e(hi) < target {
        hi *= 2.0;
        if hi > 1e9 {
            return None;
        }
    }
    let mut lo = 0.0;
    // Every record computes this (once per group and look): stop at 1e-12 relative,
    // far below what a width is read to, instead of bisecting to the last bit.
    while hi - lo > 1e-12 * hi {
        let mid = 0.5 * (lo + hi);
        if log_e(mid) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some(hi.sqrt())
}

/// Per category, `[lower, upper]` of the level-(1 − α) confidence sequence at n reports,
/// clipped to [0, 1] (a frequency lies there, so clipping keeps the coverage).
pub fn confidence_sequence(
    estimate: &[f64],
    std_error: &[f64],
    n: u64,
    alpha: f64,
) -> (Vec<f64>, Vec<f64>) {
    match width_in_standard_errors(n, alpha) {
        None => (vec![0.0; estimate.len()], vec![1.0; estimate.len()]),
        Some(k) => estimate
            .iter()
            .zip(std_error)
            .map(|(&p, &s)| {
                let r = k * s;
                ((p - r).clamp(0.0, 1.0), (p + r).clamp(0.0, 1.0))
            })
            .unzip(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At its solution the mixture e-value is exactly 1/α, and the width grows slowly
    /// (like √log n) beyond the grid's smallest precision.
    #[test]
    fn the_width_solves_the_mixture_at_one_over_alpha() {
        for n in [1_000u64, 10_000, 1_000_000, 100_000_000] {
            let k = width_in_standard_errors(n, 0.05).unwrap();
            let log_e = log_e_mixture(k * k, 1, n as f64, &PRECISION_GRID);
            assert!((log_e - 20f64.ln()).abs() < 1e-9, "n = {n}: {log_e}");
            // Always wider than the fixed-n 1.96, never absurdly so.
            assert!(k > 1.96 && k < 5.0, "n = {n}: {k}");
        }
        assert_eq!(width_in_standard_errors(999, 0.05), None);
        let (lo, hi) = confidence_sequence(&[0.5, 0.01], &[0.01, 0.01], 999, 0.05);
        assert_eq!((lo, hi), (vec![0.0, 0.0], vec![1.0, 1.0]));
        let (lo, _) = confidence_sequence(&[0.5, 0.01], &[0.01, 0.01], 10_000, 0.05);
        assert_eq!(lo[1], 0.0, "clipped at 0");
    }
}
