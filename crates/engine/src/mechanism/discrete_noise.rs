//! Exact samplers for the discrete Laplace and discrete Gaussian distributions on the
//! integers: Algorithms 1-3 of Canonne, Kamath and Steinke, "The Discrete Gaussian for
//! Differential Privacy" (NeurIPS 2020), the construction OpenDP and prio use.
//!
//! Every decision is an integer comparison of a uniform integer drawn by rejection
//! sampling (`random_range`, no modulo bias), so no floating-point rounding ever touches a
//! probability: the output is exactly the stated distribution, which is what defeats
//! Mironov's low-order-bit attack on textbook floating-point noise.
//!
//! Why not the `prio` crate's sampler: it works in arbitrary-precision rationals and takes
//! about 10 µs per draw here (measured), and the noise mechanisms draw d coordinates per
//! report (the size test draws 10⁸). The parameters are restricted to integers (the scale
//! `t` of the Laplace and the σ of the Gaussian, both in grid units), which keeps every
//! intermediate value inside u128 and makes a draw take well under a microsecond.

use rand::Rng;

/// Bernoulli(exp(−num/den)) exactly (CKS Algorithm 1, with the integer-part split of
/// their Section 5.1). `den` must be > 0.
pub fn bernoulli_exp<R: Rng + ?Sized>(rng: &mut R, num: u128, den: u128) -> bool {
    let whole = num / den;
    let frac = num % den;
    // exp(−γ) = exp(−1)^⌊γ⌋ · exp(−(γ − ⌊γ⌋)): each factor an independent trial.
    let mut i = 0u128;
    while i < whole {
        if !bernoulli_exp_unit(rng, 1, 1) {
            return false;
        }
        i += 1;
    }
    bernoulli_exp_unit(rng, frac, den)
}

/// Bernoulli(exp(−γ)) for γ = num/den in [0, 1]: draw A_k ~ Bernoulli(γ/k) for k = 1, 2, …
/// until one is 0; the answer is whether that k is odd.
fn bernoulli_exp_unit<R: Rng + ?Sized>(rng: &mut R, num: u128, den: u128) -> bool {
    let mut k: u128 = 1;
    loop {
        // γ/k = num/(den·k). The product cannot overflow before k passes 2²⁷ (den < 2¹⁰⁰
        // for every parameter this module is called with), which needs 2²⁷ consecutive
        // successes of probability ≤ 1/k each: never, to any precision that matters.
        let Some(range) = den.checked_mul(k) else {
            return k % 2 == 1;
        };
        if rng.random_range(0..range) < num {
            k += 1;
        } else {
            return k % 2 == 1;
        }
    }
}

/// One draw of the discrete Laplace distribution with integer scale `t` ≥ 1:
/// P(y) ∝ exp(−|y|/t) on the integers (CKS Algorithm 2 with s = 1).
pub fn discrete_laplace<R: Rng + ?Sized>(rng: &mut R, t: u64) -> i64 {
    let t = t.max(1);
    loop {
        let u = rng.random_range(0..t);
        if !bernoulli_exp(rng, u as u128, t as u128) {
            continue;
        }
        let mut v: u64 = 0;
        while bernoulli_exp(rng, 1, 1) {
            v = v.saturating_add(1);
        }
        // x = u + t·v; beyond i64 would need v ≈ 2⁶³/t consecutive exp(−1) successes.
        let Some(x) = v
            .checked_mul(t)
            .and_then(|tv| tv.checked_add(u))
            .and_then(|x| i64::try_from(x).ok())
        else {
            continue;
        };
        let negative: bool = rng.random();
        if negative && x == 0 {
            continue;
        }
        return if negative { -x } else { x };
    }
}

/// One draw of the discrete Gaussian N_ℤ(0, s²) with integer σ = `s` ≥ 1:
/// P(y) ∝ exp(−y²/(2s²)) on the integers (CKS Algorithm 3): a discrete Laplace proposal
/// with t = s + 1, accepted with probability exp(−(|y| − s²/t)²/(2s²)).
pub fn discrete_gaussian<R: Rng + ?Sized>(rng: &mut R, s: u64) -> i64 {
    let s = s.max(1) as u128;
    let t = s + 1;
    let s2 = s * s;
    let den = 2 * s2 * t * t;
    loop {
        let y = discrete_laplace(rng, t as u64);
        // (|y| − s²/t)² / (2s²) = (|y|·t − s²)² / (2s²t²), all in integers. A proposal so
        // far out that the square overflows has acceptance probability below exp(−2⁴⁰):
        // rejecting it outright changes nothing representable.
        let Some(num) = (y.unsigned_abs() as u128)
            .checked_mul(t)
            .map(|yt| yt.abs_diff(s2))
            .and_then(|a| a.checked_mul(a))
        else {
            continue;
        };
        if bernoulli_exp(rng, num, den) {
            return y;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use statrs::distribution::{ChiSquared, ContinuousCDF};

    /// χ² goodness of fit of `draws` against the pmf ∝ `weight(y)` on the integers,
    /// pooling the tails beyond ±`cut` into one cell each.
    fn chi2_p(draws: &[i64], cut: i64, weight: impl Fn(i64) -> f64) -> f64 {
        let total: f64 = (-(cut * 40)..=cut * 40).map(&weight).sum();
        let cells = (2 * cut + 3) as usize;
        let cell = |y: i64| (y.clamp(-cut - 1, cut + 1) + cut + 1) as usize;
        let mut expected = vec![0.0; cells];
        for y in -(cut * 40)..=cut * 40 {
            expected[cell(y)] += weight(y) / total;
        }
        let mut observed = vec![0.0; cells];
        for &y in draws {
            observed[cell(y)] += 1.0;
        }
        let n = draws.len() as f64;
        let stat: f64 = observed
            .iter()
            .zip(&expected)
            .filter(|(_, &e)| e * n > 5.0)
            .map(|(o, e)| (o - e * n).powi(2) / (e * n))
            .sum();
        let df = expected.iter().filter(|&&e| e * n > 5.0).count() - 1;
        ChiSquared::new(df as f64).unwrap().sf(stat)
    }

    #[test]
    fn bernoulli_exp_has_the_exact_rate() {
        let mut rng = StdRng::seed_from_u64(1);
        for (num, den) in [(0u128, 1u128), (1, 3), (1, 1), (5, 2), (7, 1)] {
            let n = 400_000;
            let hits = (0..n).filter(|_| bernoulli_exp(&mut rng, num, den)).count();
            let p = (-(num as f64) / den as f64).exp();
            let se = (p * (1.0 - p) / n as f64).sqrt().max(1e-9);
            let z = (hits as f64 / n as f64 - p) / se;
            assert!(z.abs() < 5.0, "exp(-{num}/{den}): z = {z}");
        }
    }

    /// The draws follow exp(−|y|/t) / exp(−y²/2s²): χ² over ±3 scales at α = 1e-6.
    #[test]
    fn samplers_follow_their_pmf() {
        let mut rng = StdRng::seed_from_u64(7);
        for t in [1u64, 3, 10] {
            let draws: Vec<i64> = (0..300_000)
                .map(|_| discrete_laplace(&mut rng, t))
                .collect();
            let p = chi2_p(&draws, 3 * t as i64, |y| {
                (-(y.abs() as f64) / t as f64).exp()
            });
            assert!(p > 1e-6, "discrete Laplace t = {t}: p = {p}");
        }
        for s in [1u64, 2, 7] {
            let draws: Vec<i64> = (0..300_000)
                .map(|_| discrete_gaussian(&mut rng, s))
                .collect();
            let s2 = (s * s) as f64;
            let p = chi2_p(&draws, 3 * s as i64, |y| {
                (-(y * y) as f64 / (2.0 * s2)).exp()
            });
            assert!(p > 1e-6, "discrete Gaussian s = {s}: p = {p}");
        }
    }

    /// At the grid sizes the mechanisms use (scales of 10⁴-10⁶ grid steps) the variance is
    /// the formula's: 2/(4 sinh²(1/2t)) for the Laplace and s² for the Gaussian.
    #[test]
    fn variance_at_mechanism_scales() {
        let mut rng = StdRng::seed_from_u64(3);
        let n = 200_000;
        for s in [16_948u64, 316_228] {
            let var: f64 = (0..n)
                .map(|_| (discrete_gaussian(&mut rng, s) as f64).powi(2))
                .sum::<f64>()
                / n as f64;
            let ratio = var / (s as f64).powi(2);
            // Var of a sample variance of normals: 2σ⁴/n, so the ratio's s.e. is √(2/n).
            assert!(
                (ratio - 1.0).abs() < 5.0 * (2.0 / n as f64).sqrt(),
                "s = {s}: {ratio}"
            );
        }
        let t = 23_968u64;
        let want = 1.0 / (2.0 * (0.5 / t as f64).sinh().powi(2));
        let var: f64 = (0..n)
            .map(|_| (discrete_laplace(&mut rng, t) as f64).powi(2))
            .sum::<f64>()
            / n as f64;
        // Laplace: the fourth moment is 24b⁴ = 6·Var², so the ratio's s.e. is √(5/n).
        let ratio = var / want;
        assert!(
            (ratio - 1.0).abs() < 5.0 * (5.0 / n as f64).sqrt(),
            "{ratio}"
        );
    }
}
