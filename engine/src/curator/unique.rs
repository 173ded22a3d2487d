use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{laplace, mc_p_value, PrivateOutcome};
use crate::error::EngineError;
use crate::stats::sample_multinomial;

/// `Z2 = (1/n) Σ_j 1(N_j = 1)`: the fraction of reports whose category appears once.
fn unique_fraction(counts: &[u64], n: u64) -> f64 {
    counts.iter().filter(|&&c| c == 1).count() as f64 / n.max(1) as f64
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
