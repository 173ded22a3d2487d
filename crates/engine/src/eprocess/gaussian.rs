//! The Gaussian-mixture (method-of-mixtures) e-process for a χ² statistic, an
//! **asymptotic** construction (Robbins 1970; Howard, Ramdas, McAuliffe & Sekhon,
//! *Time-uniform, nonparametric, nonasymptotic confidence sequences*, Ann. Stat. 2021,
//! §3; Waudby-Smith, Arbour, Sinha, Kennedy & Ramdas, *Time-uniform central limit theory
//! and asymptotic confidence sequences*, 2021).
//!
//! Every χ² statistic of this engine has the form `T_n = |Z_n|²/t` where `t` is an
//! information time (the report count n, or `n1·n2/(n1+n2)` for two samples) and `Z_t`
//! is the whitened sum of the per-report score increments on ν free directions. Under H0
//! `Z_t` is a sum of i.i.d. mean-zero vectors with identity covariance on a ν-dimensional
//! subspace. For a Gaussian random walk,
//!
//! ```text
//! M_t(θ) = exp(θᵀZ_t − t|θ|²/2)
//! ```
//!
//! is a martingale for every θ, and so is its average over θ ~ N(0, I/r):
//!
//! ```text
//! E_t(r) = (r/(t+r))^{ν/2} · exp(t·T_t / (2(t+r))).
//! ```
//!
//! The reports are not Gaussian, so `E_t(r)` is an e-process only asymptotically: by the
//! strong (Komlós–Major–Tusnády) approximation the whitened walk is within `O(log t)` of a
//! Brownian motion, and Waudby-Smith et al. (Thm 2) show the boundary then holds
//! uniformly over t as the starting time grows. For composite nulls (independence,
//! two-sample) the nuisance parameters are plug-in estimates that converge at rate
//! `t^{-1/2}`, which leaves the statistic's χ²_ν limit and the same argument intact. We
//! therefore start the process at `t = ASYMPTOTIC_START` (it is 1 before) and check its
//! type I error by simulation from there (engine/tests/sequential.rs).
//!
//! As for the Dirichlet mixture, r is the effect scale (r ≈ the number of reports at which
//! the component is best tuned); an equal-weight mixture over a grid of r keeps the
//! guarantee and costs at most `ln(grid size)` nats.

use super::design::Mixture;

/// The prior precisions r averaged over, in units of reports: powers of four from 256 to
/// 4^14 ≈ 2.7·10^8. Below 256 the Gaussian approximation of a few hundred reports would
/// carry the whole e-value.
pub const PRECISION_GRID: [f64; 11] = [
    256.0,
    1024.0,
    4096.0,
    16384.0,
    65536.0,
    262144.0,
    1048576.0,
    4194304.0,
    16777216.0,
    67108864.0,
    268435456.0,
];

/// The information time from which the asymptotic e-processes run; before it they are 1.
pub const ASYMPTOTIC_START: f64 = 1000.0;

/// The information (reports' worth of signal, `n·β²`) from which the composite-null
/// e-processes (independence, two-sample) run; before it they are 1. Chosen by simulation
/// (`engine/tests/sequential_small_eps.rs`): it leaves ε ≥ 1 at d ≤ 16 starting at
/// `ASYMPTOTIC_START` as before, and holds small-ε processes at 1 while their plug-in
/// marginals are noise.
pub const INFORMATION_START: f64 = 10.0;

/// `ln E_t(r)` for one precision: `(ν/2) ln(r/(t+r)) + t·T/(2(t+r))`.
pub fn log_e_single(statistic: f64, df: u32, t: f64, r: f64) -> f64 {
    0.5 * f64::from(df) * (r / (t + r)).ln() + t * statistic / (2.0 * (t + r))
}

/// `ln` of the equal-weight mixture over `grid`; 0 (e = 1) before [`ASYMPTOTIC_START`] and
/// for an undefined (NaN) statistic, which carries no evidence.
pub fn log_e_mixture(statistic: f64, df: u32, t: f64, grid: &[f64]) -> f64 {
    log_e_tuned(statistic, df, t, Mixture::uniform(grid))
}

/// `ln` of the mixture over `mixture`'s precisions (a planned sample size may tune one,
/// [`super::design`]); 0 before [`ASYMPTOTIC_START`] and for a NaN statistic.
pub fn log_e_tuned(statistic: f64, df: u32, t: f64, mixture: Mixture) -> f64 {
    if t.is_nan() || t < ASYMPTOTIC_START || statistic.is_nan() || df == 0 {
        return 0.0;
    }
    mixture.log_e(|r| log_e_single(statistic, df, t, r))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The closed form is the Gaussian average of M_t(θ): check it against numerical
    /// integration over θ in one dimension, where `T = z²/t`.
    #[test]
    fn closed_form_matches_the_integral() {
        let (t, r, z) = (50.0f64, 20.0f64, 9.0f64);
        let steps = 200_000;
        let (lo, hi) = (-3.0, 3.0);
        let h = (hi - lo) / steps as f64;
        let integral: f64 = (0..steps)
            .map(|i| {
                let th = lo + (i as f64 + 0.5) * h;
                let prior = (r / (2.0 * std::f64::consts::PI)).sqrt() * (-r * th * th / 2.0).exp();
                prior * (th * z - t * th * th / 2.0).exp() * h
            })
            .sum();
        let closed = log_e_single(z * z / t, 1, t, r).exp();
        assert!(
            (integral - closed).abs() < 1e-9 * closed,
            "{integral} vs {closed}"
        );
    }

    #[test]
    fn is_one_before_the_start_and_for_nan() {
        assert_eq!(
            log_e_mixture(1e6, 3, ASYMPTOTIC_START - 1.0, &PRECISION_GRID),
            0.0
        );
        assert_eq!(log_e_mixture(f64::NAN, 3, 1e6, &PRECISION_GRID), 0.0);
    }

    /// Evidence grows with the statistic at fixed t and ν.
    #[test]
    fn increases_in_the_statistic() {
        let a = log_e_mixture(10.0, 4, 5000.0, &PRECISION_GRID);
        let b = log_e_mixture(40.0, 4, 5000.0, &PRECISION_GRID);
        assert!(b > a, "{a} {b}");
    }
}
