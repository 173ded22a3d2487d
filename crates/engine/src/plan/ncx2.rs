//! The noncentral chi-square tail and the central critical value.
//!
//! No maintained Rust crate computes the noncentral tail to full relative precision: the
//! CDFLIB port forms `sf = 1 - cdf` (useless below ~1e-16) and the R nmath port is GPL.
//! The Poisson mixture below only needs the central tail, which statrs computes directly.

use statrs::distribution::{ChiSquared, Continuous, ContinuousCDF};
use statrs::function::gamma::checked_gamma_ur;

/// Each direction of the series stops once its remainder is provably below this fraction
/// of the partial sum.
const RELATIVE_TOLERANCE: f64 = 1e-14;

/// Enough for λ up to ~1e10; larger λ only reaches the series for `x` near the mean.
const MAX_TERMS_PER_DIRECTION: u64 = 2_000_000;

/// `e^{-40} ≈ 4e-18` is below half an ulp of 1, so a lower tail bounded by it makes the
/// survival function exactly 1.0 in f64.
const NEGLIGIBLE_TAIL_LOG: f64 = 40.0;

/// `P(χ²_df(λ) > x)`, the survival function of the noncentral chi-square law with `df > 0`
/// degrees of freedom (not necessarily an integer) and noncentrality `λ ≥ 0`.
///
/// Computed as the Poisson mixture `Σ_k Pois(k; λ/2) · Q(df/2 + k, x/2)` with `Q` the
/// regularized upper incomplete gamma function (the central `χ²_{df+2k}` tail), summed
/// outward from the Poisson mode `m = ⌊λ/2⌋` in both directions:
///
/// * upward, after term `k` the unsummed Poisson mass is at most
///   `w_{k+1} / (1 − (λ/2)/(k+2))` (the weight ratios are below `(λ/2)/(k+2)` from there on)
///   and each omitted `Q ≤ 1`;
/// * downward, after term `k` the unsummed mass is at most `w_{k−1} / (1 − (k−1)/(λ/2))`
///   and each omitted `Q ≤ Q(df/2 + k, x/2)` (Q grows with its first argument).
///
/// Each direction stops when its remainder bound is below `1e-14` times the partial sum
/// and the unsummed Poisson mass is below `1e-14` of the summed mass. The weights are
/// carried unnormalised from the mode (`w_m = 1`) by their exact ratios and the sum divided
/// by the summed weight at the end, which avoids evaluating `e^{−λ/2}` for large λ. The
/// truncation error is therefore below `4e-14` relative to the result, also for tiny tails;
/// what remains is the rounding of statrs' central tail (about 1e-15 relative per term).
/// Past 2·10⁶ terms a side (λ ≳ 10¹⁰) the series is cut there and the bound no longer holds.
///
/// Shortcut: when `x ≤ df + λ − 2√((df + 2λ)·40)`, Birgé's bound (2001, Lemma 8.1)
/// `P(χ²_df(λ) ≤ df + λ − 2√((df+2λ)t)) ≤ e^{−t}` puts the lower tail below `e^{−40}`, and
/// 1.0 is returned without summing. This keeps the planner's saturated powers (huge n,
/// hence huge λ) as cheap as the rest.
///
/// Returns NaN for NaN input, `df ≤ 0`, an infinite `df` or λ, or `λ < 0`, like
/// [`crate::stats::chi2_sf`].
pub fn ncx2_sf(df: f64, lambda: f64, x: f64) -> f64 {
    if df.is_nan() || lambda.is_nan() || x.is_nan() {
        return f64::NAN;
    }
    if !(df.is_finite() && df > 0.0 && lambda.is_finite() && lambda >= 0.0) {
        return f64::NAN;
    }
    if x <= 0.0 {
        return 1.0;
    }
    if x == f64::INFINITY {
        return 0.0;
    }
    let spread = 2.0 * ((df + 2.0 * lambda) * NEGLIGIBLE_TAIL_LOG).sqrt();
    if x <= df + lambda - spread {
        return 1.0;
    }
    let (a0, y) = (df / 2.0, x / 2.0);
    let q = |k: u64| checked_gamma_ur(a0 + k as f64, y).unwrap_or(f64::NAN);
    if lambda == 0.0 {
        return q(0);
    }
    let mu = lambda / 2.0;
    let mode = mu.floor() as u64;

    let mut weight_sum = 1.0;
    let mut sum = q(mode);

    // Upward from the mode.
    let mut w = 1.0;
    for k in (mode + 1)..=mode.saturating_add(MAX_TERMS_PER_DIRECTION) {
        w *= mu / k as f64;
        let term_q = q(k);
        weight_sum += w;
        sum += w * term_q;
        let next_w = w * mu / (k + 1) as f64;
        let tail = next_w / (1.0 - mu / (k + 2) as f64);
        if (tail <= RELATIVE_TOLERANCE * sum && tail <= RELATIVE_TOLERANCE * weight_sum)
            || tail == 0.0
        {
            break;
        }
    }

    // Downward from the mode; `k` is the index of the term just added.
    let mut w = 1.0;
    let mut last_q = q(mode);
    let mut k = mode;
    let floor = mode.saturating_sub(MAX_TERMS_PER_DIRECTION);
    while k > floor {
        let prev_w = w * k as f64 / mu;
        let tail = prev_w / (1.0 - (k - 1) as f64 / mu);
        if (last_q * tail <= RELATIVE_TOLERANCE * sum && tail <= RELATIVE_TOLERANCE * weight_sum)
            || tail == 0.0
        {
            break;
        }
        k -= 1;
        w = prev_w;
        last_q = q(k);
        weight_sum += w;
        sum += w * last_q;
    }

    (sum / weight_sum).clamp(0.0, 1.0)
}

/// The central critical value `χ²_{df, 1−α}`: the `x` with `P(χ²_df > x) = α`, for `df > 0`
/// and `0 < α < 1`; NaN otherwise.
///
/// statrs' `inverse_cdf(1 − α)` works on the cdf, whose rounding near 1 costs relative
/// precision in α for small α, so this solves `ln sf(x) = ln α` instead by Newton's method
/// (derivative `−pdf/sf`) kept inside a bisection bracket; it converges to a few ulps.
pub fn chi2_isf(df: f64, alpha: f64) -> f64 {
    if !(df.is_finite() && df > 0.0 && alpha > 0.0 && alpha < 1.0) {
        return f64::NAN;
    }
    let law = match ChiSquared::new(df) {
        Ok(law) => law,
        Err(_) => return f64::NAN,
    };
    let target = alpha.ln();
    let (mut lo, mut hi) = (0.0, df.max(1.0));
    while law.sf(hi) > alpha {
        lo = hi;
        hi *= 2.0;
        if !hi.is_finite() {
            return f64::NAN;
        }
    }
    let mut x = 0.5 * (lo + hi);
    for _ in 0..200 {
        let sf = law.sf(x);
        if sf > alpha {
            lo = x;
        } else {
            hi = x;
        }
        let residual = sf.ln() - target;
        let slope = -law.pdf(x) / sf;
        let mut next = x - residual / slope;
        if !next.is_finite() || next <= lo || next >= hi {
            next = 0.5 * (lo + hi);
        }
        if (next - x).abs() <= 4.0 * f64::EPSILON * x || hi - lo <= 4.0 * f64::EPSILON * hi {
            return next;
        }
        x = next;
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use statrs::function::gamma::ln_gamma;

    fn poisson_pmf(k: u64, mu: f64) -> f64 {
        (-mu + k as f64 * mu.ln() - ln_gamma(k as f64 + 1.0)).exp()
    }

    fn assert_rel(found: f64, expected: f64, rel: f64, what: &str) {
        assert!(
            (found - expected).abs() <= rel * expected.abs(),
            "{what}: found {found:e}, expected {expected:e}, rel. error {:e}",
            (found - expected).abs() / expected.abs()
        );
    }

    /// Reference values from scipy 1.17.1 (`scipy.stats.ncx2.sf(x, df, nc)`, Boost).
    #[test]
    fn ncx2_sf_matches_scipy() {
        // (x, df, λ, sf)
        let cases: [(f64, f64, f64, f64); 10] = [
            // scipy.stats.ncx2.sf(7.8147279032511765, 3, 0.0): λ = 0 is the central law
            (7.8147279032511765, 3.0, 0.0, 0.05000000000000003),
            // scipy.stats.ncx2.sf(3.0, 1, 2.5)
            (3.0, 1.0, 2.5, 0.4404837680950961),
            // scipy.stats.ncx2.sf(0.5, 1, 0.3): mode 0, only the upward side
            (0.5, 1.0, 0.3, 0.5414534436840296),
            // scipy.stats.ncx2.sf(120.0, 100, 10.0)
            (120.0, 100.0, 10.0, 0.25037981275999194),
            // scipy.stats.ncx2.sf(250.0, 5, 200.0)
            (250.0, 5.0, 200.0, 0.062332968378053064),
            // scipy.stats.ncx2.sf(100.0, 4, 1.0): a tail far below 1e-10
            (100.0, 4.0, 1.0, 3.488176713111084e-18),
            // scipy.stats.ncx2.sf(400.0, 100, 60.0): another tiny tail, df = 100
            (400.0, 100.0, 60.0, 1.1447161810431212e-17),
            // scipy.stats.ncx2.sf(10.0, 2.5, 30.0): non-integer df
            (10.0, 2.5, 30.0, 0.9936992515100311),
            // scipy.stats.ncx2.sf(20.0, 10, 50.0)
            (20.0, 10.0, 50.0, 0.9996604950008426),
            // scipy.stats.ncx2.sf(4500.0, 1, 5000.0): very large λ
            (4500.0, 1.0, 5000.0, 0.999857540221089),
        ];
        for (x, df, lambda, expected) in cases {
            assert_rel(
                ncx2_sf(df, lambda, x),
                expected,
                1e-9,
                &format!("ncx2_sf(df={df}, λ={lambda}, x={x})"),
            );
        }
    }

    #[test]
    fn ncx2_sf_edge_cases() {
        assert_eq!(ncx2_sf(3.0, 2.0, 0.0), 1.0);
        assert_eq!(ncx2_sf(3.0, 2.0, -1.0), 1.0);
        assert_eq!(ncx2_sf(3.0, 2.0, f64::INFINITY), 0.0);
        assert!(ncx2_sf(0.0, 2.0, 1.0).is_nan());
        assert!(ncx2_sf(3.0, -1.0, 1.0).is_nan());
        assert!(ncx2_sf(3.0, f64::NAN, 1.0).is_nan());
        assert!(ncx2_sf(3.0, f64::INFINITY, 1.0).is_nan());
        // Monotone in λ: more noncentrality, more mass above x.
        let mut last = 0.0;
        for i in 0..40 {
            let s = ncx2_sf(7.0, f64::from(i) * 2.5, 14.0);
            assert!(s > last, "not increasing at λ = {}", f64::from(i) * 2.5);
            last = s;
        }
    }

    /// The Poisson weights the series carries by ratios agree with the direct pmf.
    #[test]
    fn ncx2_sf_is_the_poisson_mixture() {
        let (df, lambda, x) = (3.0, 7.0, 9.0);
        let direct: f64 = (0..200)
            .map(|k| {
                poisson_pmf(k, lambda / 2.0) * ChiSquared::new(df + 2.0 * k as f64).unwrap().sf(x)
            })
            .sum();
        assert_rel(ncx2_sf(df, lambda, x), direct, 1e-13, "mixture");
    }

    /// Reference values: `scipy.stats.chi2.isf(alpha, df)`, scipy 1.17.1.
    #[test]
    fn chi2_isf_matches_scipy() {
        // (α, df, critical value)
        let cases: [(f64, f64, f64); 7] = [
            (0.05, 3.0, 7.814727903251178),
            (1e-6, 1.0, 23.928126976934827),
            (0.5, 100.0, 99.33412923598846),
            (0.01, 15.0, 30.577914166892494),
            (0.1, 2.0, 4.605170185988092),
            (1e-6, 250.0, 371.0235106567398),
            (0.3, 1.0, 1.0741941708575722),
        ];
        for (alpha, df, expected) in cases {
            assert_rel(
                chi2_isf(df, alpha),
                expected,
                1e-10,
                &format!("chi2_isf(df={df}, α={alpha})"),
            );
        }
        assert!(chi2_isf(3.0, 0.0).is_nan());
        assert!(chi2_isf(3.0, 1.0).is_nan());
        assert!(chi2_isf(0.0, 0.05).is_nan());
    }
}
