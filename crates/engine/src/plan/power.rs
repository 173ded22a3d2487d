//! Asymptotic power and the sample size that reaches a target power.

use crate::error::EngineError;

use super::alternative::Hypotheses;
use super::ncx2::{chi2_isf, ncx2_sf};
use super::noncentrality::PlanMechanism;

/// The largest n the search considers: beyond 2^53 report counts stop being exact in f64.
const MAX_N: u64 = 1 << 53;

/// `P(χ²_df(λ) > χ²_{df,1−α})`: the rejection probability of a level-α χ² test whose
/// statistic is noncentral χ² with noncentrality λ. NaN for `df = 0` or invalid α or λ.
pub fn asymptotic_power(df: u32, lambda: f64, alpha: f64) -> f64 {
    let df = f64::from(df);
    ncx2_sf(df, lambda, chi2_isf(df, alpha))
}

fn check_alpha(alpha: f64) -> Result<(), EngineError> {
    if alpha > 0.0 && alpha < 1.0 {
        Ok(())
    } else {
        Err(EngineError::invalid("alpha", alpha, "a number in (0, 1)"))
    }
}

/// The asymptotic power of `mechanism`'s level-`alpha` identity test of `h.p0()` after `n`
/// reports drawn from `h.p1()`.
pub fn power(
    mechanism: PlanMechanism,
    h: &Hypotheses,
    alpha: f64,
    n: u64,
) -> Result<f64, EngineError> {
    check_alpha(alpha)?;
    let lambda = super::noncentrality(mechanism, h, n)?;
    Ok(asymptotic_power(mechanism.df(h.domain()), lambda, alpha))
}

/// The smallest n whose [`power`] is at least `target`, for `alpha < target < 1`.
///
/// Power grows with λ and λ grows linearly with n, so doubling brackets the answer and
/// bisection on the integers finds it; the result satisfies `power(n) ≥ target` and
/// `power(n − 1) < target` exactly as [`power`] computes them. Fails with
/// [`EngineError::PowerUnreachable`] when the mechanism cannot see the alternative
/// (λ = 0) or would need more than 2^53 reports.
pub fn required_n(
    mechanism: PlanMechanism,
    h: &Hypotheses,
    alpha: f64,
    target: f64,
) -> Result<u64, EngineError> {
    check_alpha(alpha)?;
    if !(target > alpha && target < 1.0) {
        return Err(EngineError::invalid(
            "power target",
            target,
            "a number above alpha and below 1",
        ));
    }
    let unit = mechanism.unit_noncentrality(h)?;
    if unit.is_nan() || unit <= 0.0 {
        return Err(EngineError::PowerUnreachable {
            mechanism: mechanism.name(),
            target,
            reason: "the alternative is invisible to it (noncentrality 0)",
        });
    }
    let df = f64::from(mechanism.df(h.domain()));
    let critical = chi2_isf(df, alpha);
    // The same arithmetic as `power`, with the critical value computed once.
    let reaches = |n: u64| ncx2_sf(df, n as f64 * unit, critical) >= target;

    smallest_n(reaches).ok_or(EngineError::PowerUnreachable {
        mechanism: mechanism.name(),
        target,
        reason: "it would need more than 2^53 reports",
    })
}

/// The smallest n with `reaches(n)`, for a `reaches` that is false at 0 and stays true
/// once true (power grows with n): doubling brackets it and bisection on the integers
/// finds it. None when it would be above 2^53.
pub(super) fn smallest_n(reaches: impl Fn(u64) -> bool) -> Option<u64> {
    let (mut lo, mut hi) = (0u64, 1u64);
    while !reaches(hi) {
        lo = hi;
        hi = hi.saturating_mul(2);
        if hi > MAX_N {
            return None;
        }
    }
    // Invariant: !reaches(lo) && reaches(hi).
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if reaches(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mechanism::Grr;
    use crate::plan::Alternative;
    use crate::stats::local_exp_gof;
    use rand::{Rng, SeedableRng};

    fn assert_rel(found: f64, expected: f64, rel: f64, what: &str) {
        assert!(
            (found - expected).abs() <= rel * expected.abs(),
            "{what}: found {found:e}, expected {expected:e}"
        );
    }

    /// `scipy.stats.ncx2.sf(scipy.stats.chi2.isf(alpha, df), df, lam)`, scipy 1.17.1.
    #[test]
    fn asymptotic_power_matches_scipy() {
        // (α, df, λ, power)
        let cases: [(f64, u32, f64, f64); 5] = [
            (0.05, 3, 4.515, 0.4011682926878781),
            (0.01, 15, 20.0, 0.6363056625841351),
            (0.001, 99, 60.0, 0.6860429164755304),
            (0.05, 1, 0.5, 0.10895461755061536),
            (0.05, 4, 150.0, 1.0),
        ];
        for (alpha, df, lambda, expected) in cases {
            assert_rel(
                asymptotic_power(df, lambda, alpha),
                expected,
                1e-9,
                &format!("power(α={alpha}, df={df}, λ={lambda})"),
            );
        }
        // No signal, no power beyond the level.
        assert_rel(asymptotic_power(6, 0.0, 0.05), 0.05, 1e-10, "λ = 0");
    }

    #[test]
    fn required_n_is_the_first_n_reaching_the_target() {
        let cases = [
            (vec![0.25; 4], "paninski:0.2"),
            (vec![0.1; 10], "paninski:0.3"),
            (
                vec![0.4, 0.3, 0.2, 0.1],
                "0.35,0.3,0.2,0.15", // a shift of mass between the extremes
            ),
        ];
        for (p0, alt) in cases {
            let h = alt.parse::<Alternative>().unwrap().against(&p0).unwrap();
            for eps in [0.5, 1.0, 3.0] {
                for m in PlanMechanism::all(eps) {
                    for (alpha, target) in [(0.05, 0.8), (0.01, 0.9), (0.05, 0.5)] {
                        let n = required_n(m, &h, alpha, target).unwrap();
                        let what = format!("{} ε={eps} α={alpha} target={target}", m.name());
                        assert!(n >= 1, "{what}");
                        assert!(power(m, &h, alpha, n).unwrap() >= target, "{what}: n={n}");
                        assert!(
                            power(m, &h, alpha, n - 1).unwrap() < target,
                            "{what}: n-1={}",
                            n - 1
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn required_n_refuses_the_impossible() {
        let h = Hypotheses::new(vec![0.5, 0.5], vec![0.5, 0.5]).unwrap();
        let grr = PlanMechanism::Grr { epsilon: 1.0 };
        assert!(matches!(
            required_n(grr, &h, 0.05, 0.8),
            Err(EngineError::PowerUnreachable { .. })
        ));
        let h = Hypotheses::new(vec![0.5, 0.5], vec![0.6, 0.4]).unwrap();
        for (alpha, target) in [(0.05, 0.05), (0.05, 1.0), (0.0, 0.8), (0.05, f64::NAN)] {
            assert!(required_n(grr, &h, alpha, target).is_err());
        }
        // A difference of 1e-12 would need ~1e25 reports.
        let h = Hypotheses::new(vec![0.5, 0.5], vec![0.5 + 1e-12, 0.5 - 1e-12]).unwrap();
        assert!(matches!(
            required_n(grr, &h, 0.05, 0.8),
            Err(EngineError::PowerUnreachable { .. })
        ));
    }

    /// The prediction against simulation: 2000 datasets of n = 5000 reports, true categories
    /// from the Paninski alternative (DIST = 0.11) of a uniform p0 on d = 4, privatized by
    /// the real GenRR randomizer at ε = 1, tested by LocalExpGOF at α = 0.05. The predicted
    /// power is about 0.477 (λ ≈ 5.46); the empirical rate (standard error ≈ 0.011) must be
    /// within 0.04 of it.
    #[test]
    fn grr_power_prediction_matches_monte_carlo() {
        let (d, eps, n, alpha, runs) = (4usize, 1.0, 5000u64, 0.05, 2000u32);
        let p0 = vec![0.25; d];
        let h = Alternative::Paninski { distance: 0.11 }
            .against(&p0)
            .unwrap();
        let predicted = power(PlanMechanism::Grr { epsilon: eps }, &h, alpha, n).unwrap();
        assert!((0.4..0.6).contains(&predicted), "predicted {predicted}");

        let grr = Grr::new(eps, d as u32).unwrap();
        let cumulative: Vec<f64> = h
            .p1()
            .iter()
            .scan(0.0, |acc, p| {
                *acc += p;
                Some(*acc)
            })
            .collect();
        let mut rng = rand::rngs::StdRng::seed_from_u64(5000);
        let mut rejections = 0u32;
        for _ in 0..runs {
            let mut counts = vec![0u64; d];
            for _ in 0..n {
                let u: f64 = rng.random();
                let x = cumulative.iter().position(|&c| u < c).unwrap_or(d - 1) as u32;
                counts[grr.randomize_with(x, &mut rng).unwrap() as usize] += 1;
            }
            if local_exp_gof(&grr, &counts, &p0)
                .p_value
                .is_some_and(|p| p < alpha)
            {
                rejections += 1;
            }
        }
        let rate = f64::from(rejections) / f64::from(runs);
        eprintln!("LocalExpGOF power: empirical {rate}, predicted {predicted}");
        assert!(
            (rate - predicted).abs() <= 0.04,
            "empirical power {rate}, predicted {predicted}"
        );
    }

    /// The same check for LocalBitFlipGOF: d = 8, ε = 1, a Paninski alternative with
    /// predicted power near 0.5, 2000 seeded datasets through the real randomizer.
    #[test]
    fn bitflip_power_prediction_matches_monte_carlo() {
        let (d, eps, n, alpha, runs) = (8usize, 1.0, 7000u64, 0.05, 2000u32);
        let p0 = vec![1.0 / d as f64; d];
        let h = Alternative::Paninski { distance: 0.2 }
            .against(&p0)
            .unwrap();
        let predicted = power(PlanMechanism::BitFlip { epsilon: eps }, &h, alpha, n).unwrap();
        assert!((0.35..0.65).contains(&predicted), "predicted {predicted}");
        let m = crate::mechanism::BitFlip::new(eps, d as u32).unwrap();
        let cumulative: Vec<f64> = h
            .p1()
            .iter()
            .scan(0.0, |acc, p| {
                *acc += p;
                Some(*acc)
            })
            .collect();
        let mut rng = rand::rngs::StdRng::seed_from_u64(4000);
        let mut rejections = 0u32;
        for _ in 0..runs {
            let mut bits = vec![0u64; d];
            for _ in 0..n {
                let u: f64 = rng.random();
                let x = cumulative.iter().position(|&c| u < c).unwrap_or(d - 1) as u32;
                let report = m.randomize_with(x, &mut rng).unwrap();
                for (j, b) in bits.iter_mut().enumerate() {
                    *b += u64::from(report[j / 8] >> (j % 8) & 1);
                }
            }
            let out = crate::stats::local_bitflip_gof(&m, &bits, n, &p0);
            if out.p_value.is_some_and(|p| p < alpha) {
                rejections += 1;
            }
        }
        let rate = f64::from(rejections) / f64::from(runs);
        eprintln!("LocalBitFlipGOF power: empirical {rate}, predicted {predicted}");
        assert!(
            (rate - predicted).abs() <= 0.04,
            "empirical power {rate}, predicted {predicted}"
        );
    }
}
