//! Tuning a mixture e-process to a planned sample size (a test's `design_n`).
//!
//! The equal-weight mixtures over a grid of effect scales ([`super::dirichlet::KAPPA_GRID`],
//! [`super::gaussian::PRECISION_GRID`]) detect whatever the effect, at a price: against the
//! best single scale in hindsight they lose up to `ln(grid size)` ≈ 2.5 nats, next to the
//! `ln(1/α)` = 3.0 nats a rejection needs at α = 0.05. That price is most of why median
//! detection took 1.30–1.34× the fixed-n sample size.
//!
//! A user who has run `plan` knows the n at which the fixed-n test reaches power 0.8: the
//! per-report noncentrality of the alternative is then `u = λ₀.₈/n`, with `λ₀.₈` the
//! noncentrality at which a level-α χ²_ν test has power 0.8. To first order every mixture
//! component has `ln E_t(r) ≈ ½·(t/(t+r))·|Z_t|² − (ν/2)·ln(1 + t/r)` (the Dirichlet one with
//! κ in place of r), and with `|Z_t|² ≈ ν + t·u` it is largest, whenever the crossing
//! happens, at `r* = ν/u = ν·n/λ₀.₈`. The tuned mixture puts weight [`DESIGN_WEIGHT`] on `r*`
//! and the rest, equally, on the grid. Any weights fixed before the data give an average of
//! e-processes, so validity is untouched; what the design buys is ln(1/w) nats instead of
//! ln(grid) at the planned effect, and what it costs is ln(1/(1 − w)) nats at effects far
//! from it.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::plan::{chi2_isf, ncx2_sf};

/// The weight of the tuned component. Chosen by simulation at the planner's README
/// example (`engine/tests/sequential.rs`, `power_*_with_design_n`): it is the share of the
/// prior on the planned effect, so it must stay well below 1 for effects the plan missed.
pub const DESIGN_WEIGHT: f64 = 0.75;

/// The power the planned n is read at (what `plan` prints by default).
const DESIGN_POWER: f64 = 0.8;

/// The planned sample size of one test and its level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Design {
    /// Reports at which the fixed-n test reaches power 0.8 (`plan`'s n); ≥ 1.
    pub n: u64,
    /// The test's level, in (0, 1).
    pub alpha: f64,
}

impl Design {
    /// `r* = ν·n/λ₀.₈(ν, α)`, in reports; None where it is undefined (ν = 0, α outside
    /// (0, 1), n = 0).
    pub fn scale(&self, df: u32) -> Option<f64> {
        if df == 0 || self.n == 0 {
            return None;
        }
        let lambda = power_noncentrality(df, self.alpha)?;
        Some(f64::from(df) * self.n as f64 / lambda)
    }
}

/// The noncentrality at which a level-α χ²_ν test has power [`DESIGN_POWER`], by bisection
/// (power rises with λ). Each `(ν, α)` is solved once per process: a snapshot evaluates it
/// for every group and look, and the bisection takes ~100 noncentral tails.
fn power_noncentrality(df: u32, alpha: f64) -> Option<f64> {
    static SOLVED: OnceLock<Mutex<HashMap<(u32, u64), f64>>> = OnceLock::new();
    let key = (df, alpha.to_bits());
    let cache = SOLVED.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(&lambda) = cache.lock().ok().as_ref().and_then(|c| c.get(&key)) {
        return Some(lambda);
    }
    let lambda = solve_power_noncentrality(df, alpha)?;
    if let Ok(mut c) = cache.lock() {
        c.insert(key, lambda);
    }
    Some(lambda)
}

fn solve_power_noncentrality(df: u32, alpha: f64) -> Option<f64> {
    if !(alpha > 0.0 && alpha < DESIGN_POWER) {
        return None;
    }
    let nu = f64::from(df);
    let critical = chi2_isf(nu, alpha);
    if !critical.is_finite() {
        return None;
    }
    let power = |lambda: f64| ncx2_sf(nu, lambda, critical);
    first_reaching(|lambda| power(lambda) >= DESIGN_POWER, 1e12, 1e-9)
}

/// The smallest x ≥ 0 (to `relative` precision) where the increasing condition `reached`
/// holds, by doubling from 1 and then bisection; None when it does not hold by `limit`.
pub(crate) fn first_reaching(
    reached: impl Fn(f64) -> bool,
    limit: f64,
    relative: f64,
) -> Option<f64> {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while !reached(hi) {
        lo = hi;
        hi *= 2.0;
        if hi > limit {
            return None;
        }
    }
    while hi - lo > relative * hi {
        let mid = 0.5 * (lo + hi);
        if reached(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// A mixing distribution over effect scales: equal weights on `grid`, or, with a tuned
/// scale, [`DESIGN_WEIGHT`] on it and the rest spread equally over `grid`.
#[derive(Debug, Clone, Copy)]
pub struct Mixture<'a> {
    pub grid: &'a [f64],
    pub tuned: Option<f64>,
}

impl<'a> Mixture<'a> {
    /// The equal-weight mixture over `grid`.
    pub fn uniform(grid: &'a [f64]) -> Self {
        Mixture { grid, tuned: None }
    }

    /// `ln Σ_k w_k·exp(component(scale_k))`, stable for large and infinite logs.
    pub fn log_e(&self, component: impl Fn(f64) -> f64) -> f64 {
        let logs: Vec<f64> = self.grid.iter().map(|&s| component(s)).collect();
        let spread = log_mean_exp(&logs);
        match self.tuned {
            None => spread,
            Some(scale) => log_weighted_pair(spread, component(scale), DESIGN_WEIGHT),
        }
    }
}

/// `ln((1/m) Σ exp(x_i))`, stable for large and infinite entries.
pub(crate) fn log_mean_exp(logs: &[f64]) -> f64 {
    if logs.is_empty() {
        return 0.0;
    }
    let top = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if top == f64::INFINITY {
        return f64::INFINITY;
    }
    if top == f64::NEG_INFINITY {
        return f64::NEG_INFINITY;
    }
    let sum: f64 = logs.iter().map(|&l| (l - top).exp()).sum();
    top + (sum / logs.len() as f64).ln()
}

/// `ln((1 − w)·e^a + w·e^b)`, for `0 < w < 1`.
pub(crate) fn log_weighted_pair(a: f64, b: f64, w: f64) -> f64 {
    let (la, lb) = (a + (1.0 - w).ln(), b + w.ln());
    let top = la.max(lb);
    if top.is_infinite() {
        return top;
    }
    top + ((la - top).exp() + (lb - top).exp()).ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_mean_exp_is_stable() {
        assert!((log_mean_exp(&[1000.0, 1000.0]) - 1000.0).abs() < 1e-12);
        assert!((log_mean_exp(&[0.0, f64::NEG_INFINITY]) - 0.5f64.ln()).abs() < 1e-15);
        assert_eq!(log_mean_exp(&[f64::INFINITY, 0.0]), f64::INFINITY);
    }

    /// Known values, from scipy 1.17.1:
    /// ```python
    /// from scipy.stats import chi2, ncx2; from scipy.optimize import brentq
    /// for nu in (1, 15):
    ///     c = chi2.isf(0.05, nu)
    ///     print(repr(brentq(lambda l: ncx2.sf(c, nu, l) - 0.8, 0.1, 100, xtol=1e-14)))
    /// ```
    #[test]
    fn power_noncentrality_matches_scipy() {
        for (nu, want) in [(1u32, 7.848860509326201), (15, 18.811088747485154)] {
            let got = power_noncentrality(nu, 0.05).unwrap();
            assert!(
                (got - want).abs() < 1e-6 * want,
                "ν = {nu}: {got} vs {want}"
            );
        }
        assert_eq!(power_noncentrality(3, 0.9), None);
    }

    #[test]
    fn design_scale_is_nu_n_over_lambda() {
        let d = Design {
            n: 36_061,
            alpha: 0.05,
        };
        let lambda = power_noncentrality(15, 0.05).unwrap();
        assert!((d.scale(15).unwrap() - 15.0 * 36_061.0 / lambda).abs() < 1e-9);
        assert_eq!(d.scale(0), None);
        assert_eq!(Design { n: 0, alpha: 0.05 }.scale(3), None);
    }

    /// The weights sum to one: a constant component gives that constant back.
    #[test]
    fn weights_sum_to_one() {
        let grid = [1.0, 2.0, 3.0];
        for tuned in [None, Some(7.0)] {
            let m = Mixture { grid: &grid, tuned };
            assert!((m.log_e(|_| 1.25) - 1.25).abs() < 1e-15);
        }
        let m = Mixture {
            grid: &grid,
            tuned: Some(7.0),
        };
        // Only the tuned component carries evidence: ln w + its log.
        let got = m.log_e(|s| if s == 7.0 { 10.0 } else { f64::NEG_INFINITY });
        assert!((got - (10.0 + DESIGN_WEIGHT.ln())).abs() < 1e-12);
        assert_eq!(m.log_e(|_| f64::INFINITY), f64::INFINITY);
    }
}
