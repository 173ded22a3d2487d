use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{laplace, mc_p_value, PrivateOutcome};
use crate::error::EngineError;
use crate::stats::sample_multinomial;

/// `Z2 = (1/n) Σ_j 1(N_j = 1)`: the fraction of reports whose category appears once.
fn unique_fraction(counts: &[u64], n: u64) -> f64 {
    counts.iter().filter(|&&c| c == 1).count() as f64 / n.max(1) as f64
}

/// Whether the unique-elements tester is valid for n reports on k categories: n ≤ k + 1.
///
/// Seed 004's tester rejects when there are few singletons, which presumes that uniform
/// maximises `E[#singletons] = Σ_j g(p_j)`, `g(p) = n p (1−p)^{n−1}`. g is concave on
/// [0, 2/n] and convex beyond, and its concave envelope on [0, 1] is g itself up to the
/// point p* where the tangent passes through (1, 0): `g(p*) = −g'(p*)(1−p*)` gives
/// `p* = 1/(n−1)`. By Jensen on the envelope, uniform (p_j = 1/k) maximises the expected
/// singletons over all distributions iff 1/k ≤ p*, i.e. n ≤ k + 1. Beyond it some
/// distributions far from uniform have more singletons than uniform, so the test's power
/// against them is below its level (d = 100, n = 1000, TV 0.25: power 0.025 at α = 0.05).
pub fn unique_elements_applies(n: u64, k: usize) -> bool {
    n <= k as u64 + 1
}

/// The unique-elements uniformity tester (seed 004): release `Z2 + Lap(2/ε)/n` (one report
/// changes the unique count by at most 2). Far-from-uniform distributions lower Z2, so small
/// values are extreme; the p-value and threshold come from `mc_samples` simulated uniform
/// datasets with the same noise.
pub fn private_unique_elements<R: Rng + ?Sized>(
    counts: &[u64],
    epsilon: f64,
    alpha: f64,
    null: &[f64],
    noise: &mut R,
) -> PrivateOutcome {
    let n: u64 = counts.iter().sum();
    let released = unique_fraction(counts, n) + laplace(noise, 2.0 / epsilon) / n.max(1) as f64;
    let p_value = mc_p_value(released, null, true);
    PrivateOutcome {
        statistic: released,
        p_value,
        reject: p_value <= alpha,
    }
}

/// The released statistic's law under the uniform null on `d` categories with `n` reports:
/// `mc_samples` draws from a generator seeded with `seed`. It depends on public parameters
/// only, so it can be computed once and reused for every release with the same (n, d, ε).
pub fn unique_elements_null(
    n: u64,
    d: usize,
    epsilon: f64,
    mc_samples: u32,
    seed: u64,
) -> Result<Vec<f64>, EngineError> {
    let mut sim = StdRng::seed_from_u64(seed);
    let uniform = vec![1.0 / d as f64; d];
    let nf = n.max(1) as f64;
    (0..mc_samples)
        .map(|_| {
            let c = sample_multinomial(&mut sim, n, &uniform)?;
            Ok(unique_fraction(&c, n) + laplace(&mut sim, 2.0 / epsilon) / nf)
        })
        .collect()
}
