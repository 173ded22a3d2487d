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
//!
//! With a planned sample size N (the test's `design_n`), [`DESIGN_WEIGHT`] of the mixing
//! law moves to the two points `θ = ±θ*`, `θ*² = 2 ln(2/(wα))/N`, whose martingale
//! `cosh(θ* S_t)·e^{−θ*² t/2}` (S_t the whitened sum, `S_t² = t·T`) gives the narrowest
//! boundary at t = N that one exponential pair can: √(2 ln(2/(wα))) standard errors, 1.44×
//! Wald at α = 0.05, where a Gaussian prior on θ, however tuned, cannot go below 1.55×
//! (its `ν/2·ln(1 + t/r)` term). Away from N the grid part keeps the sequence shrinking.

use super::design::{first_reaching, log_weighted_pair, DESIGN_WEIGHT};
use super::gaussian::{log_e_mixture, ASYMPTOTIC_START, PRECISION_GRID};

/// `ln cosh(x)`, without overflow for large |x|.
fn ln_cosh(x: f64) -> f64 {
    let a = x.abs();
    a + (-2.0 * a).exp().ln_1p() - std::f64::consts::LN_2
}

/// The level-α mixture for `H: p_j = μ` at `t` reports, as a function of the χ²₁ statistic:
/// equal weights over the precision grid, or with a planned n, [`DESIGN_WEIGHT`] on the
/// two-point prior tuned there.
fn log_e(statistic: f64, t: f64, alpha: f64, design_n: Option<u64>) -> f64 {
    let spread = log_e_mixture(statistic, 1, t, &PRECISION_GRID);
    match design_n.filter(|&n| n > 0) {
        None => spread,
        Some(n) => {
            let theta_sq = 2.0 * (2.0 / (DESIGN_WEIGHT * alpha)).ln() / n as f64;
            let pair = ln_cosh((theta_sq * t * statistic).sqrt()) - theta_sq * t / 2.0;
            log_weighted_pair(spread, pair, DESIGN_WEIGHT)
        }
    }
}

/// `√T*(n)`: the confidence sequence's half-width in standard errors at n reports, or
/// None before [`ASYMPTOTIC_START`] (the sequence is then the whole [0, 1]). `design_n`
/// narrows it around a planned sample size.
pub fn width_in_standard_errors(n: u64, alpha: f64, design_n: Option<u64>) -> Option<f64> {
    let t = n as f64;
    if t < ASYMPTOTIC_START || !(alpha > 0.0 && alpha < 1.0) {
        return None;
    }
    let target = (1.0 / alpha).ln();
    let log_e = |stat: f64| log_e(stat, t, alpha, design_n);
    // log E is increasing in the statistic. Every record computes this (once per group and
    // look): stop at 1e-12 relative, far below what a width is read to.
    first_reaching(|stat| log_e(stat) >= target, 1e9, 1e-12).map(f64::sqrt)
}

/// Per category, `[lower, upper]` of the level-(1 − α) confidence sequence at n reports,
/// clipped to [0, 1] (a frequency lies there, so clipping keeps the coverage).
pub fn confidence_sequence(
    estimate: &[f64],
    std_error: &[f64],
    n: u64,
    alpha: f64,
    design_n: Option<u64>,
) -> (Vec<f64>, Vec<f64>) {
    match width_in_standard_errors(n, alpha, design_n) {
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
            let k = width_in_standard_errors(n, 0.05, None).unwrap();
            let log_e = log_e_mixture(k * k, 1, n as f64, &PRECISION_GRID);
            assert!((log_e - 20f64.ln()).abs() < 1e-9, "n = {n}: {log_e}");
            // Always wider than the fixed-n 1.96, never absurdly so.
            assert!(k > 1.96 && k < 5.0, "n = {n}: {k}");
        }
        assert_eq!(width_in_standard_errors(999, 0.05, None), None);
        let (lo, hi) = confidence_sequence(&[0.5, 0.01], &[0.01, 0.01], 999, 0.05, None);
        assert_eq!((lo, hi), (vec![0.0, 0.0], vec![1.0, 1.0]));
        let (lo, _) = confidence_sequence(&[0.5, 0.01], &[0.01, 0.01], 10_000, 0.05, None);
        assert_eq!(lo[1], 0.0, "clipped at 0");
    }

    /// At its planned n the tuned sequence is within a hair of the two-point bound
    /// √(2 ln(2/(wα))) (the grid part adds a little evidence, so it is slightly narrower),
    /// and it is still a sequence elsewhere: finite and wider than Wald.
    #[test]
    fn the_design_narrows_the_sequence_at_the_planned_n() {
        let n = 1_000_000;
        let bound = (2.0 * (2.0 / (DESIGN_WEIGHT * 0.05)).ln()).sqrt();
        let k = width_in_standard_errors(n, 0.05, Some(n)).unwrap();
        assert!(k <= bound && k > bound - 0.05, "{k} vs {bound}");
        assert!(k / 1.959_963_984_540_054 < 1.5, "{k}");
        for m in [1_000u64, 10_000, 100_000_000] {
            let k = width_in_standard_errors(m, 0.05, Some(n)).unwrap();
            assert!(k > 1.96 && k < 6.0, "n = {m}: {k}");
        }
    }

    #[test]
    fn ln_cosh_is_stable() {
        for x in [0.0f64, 0.3, -2.0, 20.0] {
            assert!((ln_cosh(x) - x.cosh().ln()).abs() < 1e-12, "{x}");
        }
        assert!((ln_cosh(1e6) - (1e6 - std::f64::consts::LN_2)).abs() < 1e-6);
    }
}
