use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{laplace, mc_p_value, PrivateOutcome};
use crate::error::EngineError;
use crate::stats::sample_multinomial;

/// `Σ_j C(min(N_j, cap), 2)`: collisions with every count clipped at `cap`.
pub fn collision_count(counts: &[u64], cap: f64) -> f64 {
    counts
        .iter()
        .map(|&c| {
            let c = (c as f64).min(cap.floor());
            c * (c - 1.0) / 2.0
        })
        .sum()
}

/// `η_f = max(3n/(2d), 12e² ln(24d)) + 2 ln 12/ε₁`: with probability 11/12 a uniform sample's
/// noisy N_max stays below it (Aliakbarpour et al. 2018, Lemma F.2, via seed 004).
fn clip_threshold(n: u64, d: usize, eps1: f64) -> f64 {
    let e2 = std::f64::consts::E * std::f64::consts::E;
    (1.5 * n as f64 / d as f64).max(12.0 * e2 * (24.0 * d as f64).ln()) + 2.0 * 12f64.ln() / eps1
}

/// One run of the private procedure: `+∞` when the noisy N_max check rejects, else the
/// noisy collision fraction.
fn released_statistic<R: Rng + ?Sized>(
    counts: &[u64],
    n: u64,
    eps1: f64,
    eps2: f64,
    rng: &mut R,
) -> f64 {
    let eta = clip_threshold(n, counts.len(), eps1);
    let n_max = counts.iter().copied().max().unwrap_or(0) as f64;
    if n_max + laplace(rng, 2.0 / eps1) > eta {
        return f64::INFINITY;
    }
    let pairs = (n as f64) * (n as f64 - 1.0) / 2.0;
    (collision_count(counts, eta) + laplace(rng, eta / eps2)) / pairs.max(1.0)
}

/// The collision tester with clipping (seed 004): N_max released as `N_max + Lap(2/ε₁)`
/// and checked against η_f (reject if above); otherwise the collision count of the counts
/// clipped at η_f (sensitivity η_f) released with `Lap(η_f/ε₂)`. Large collision fractions
/// are extreme; p-value and threshold by Monte Carlo under uniform. ε = ε₁ + ε₂.
pub fn private_collisions<R: Rng + ?Sized>(
    counts: &[u64],
    eps1: f64,
    eps2: f64,
    alpha: f64,
    null: &[f64],
    noise: &mut R,
) -> PrivateOutcome {
    let n: u64 = counts.iter().sum();
    let released = released_statistic(counts, n, eps1, eps2, noise);
    let p_value = mc_p_value(released, null, false);
    PrivateOutcome {
        statistic: released,
        p_value,
        reject: p_value <= alpha,
    }
}

/// The released statistic's law under the uniform null (public parameters only; compute
/// once per (n, d, ε₁, ε₂) and reuse).
pub fn collisions_null(
    n: u64,
    d: usize,
    eps1: f64,
    eps2: f64,
    mc_samples: u32,
    seed: u64,
) -> Result<Vec<f64>, EngineError> {
    let mut sim = StdRng::seed_from_u64(seed);
    let uniform = vec![1.0 / d as f64; d];
    (0..mc_samples)
        .map(|_| {
            let c = sample_multinomial(&mut sim, n, &uniform)?;
            Ok(released_statistic(&c, n, eps1, eps2, &mut sim))
        })
        .collect()
}
