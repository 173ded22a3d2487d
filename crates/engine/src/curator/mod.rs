//! Curator-model private testers (docs/STATISTICS.md §8, seed 004): a trusted aggregator holds
//! raw counts and the *test* is differentially private. Every release spends budget from a
//! [`ledger::PrivacyLedger`].
//!
//! Noise for released values must come from a CSPRNG ([`secure_rng`]); a seeded generator
//! is for tests only. Thresholds are calibrated by Monte Carlo under the uniform null with
//! a separate, seeded generator: they depend on public parameters only, never on the data.

mod collisions;
mod goldreich;
pub mod ledger;
mod subsample;
mod unique;

pub use collisions::{collision_count, collisions_null, private_collisions};
pub use goldreich::GoldreichMap;
pub use subsample::{block_count, pearson_rejects, subsample_and_aggregate, SubsampleOutcome};
pub use unique::{private_unique_elements, unique_elements_applies, unique_elements_null};

use rand::{Rng, SeedableRng};

/// What a private tester releases.
#[derive(Debug, Clone, PartialEq)]
pub struct PrivateOutcome {
    /// The noisy statistic that was released.
    pub statistic: f64,
    /// Monte Carlo p-value of the noisy statistic under the uniform null.
    pub p_value: f64,
    pub reject: bool,
}

/// A CSPRNG seeded from the operating system, for the noise of real releases.
pub fn secure_rng() -> rand::rngs::StdRng {
    rand::rngs::StdRng::from_os_rng()
}

/// One draw of Lap(scale), from the open unit interval (never infinite).
pub fn laplace<R: Rng + ?Sized>(rng: &mut R, scale: f64) -> f64 {
    crate::mechanism::sample_laplace(rng, scale)
}

/// `(1 + #{simulated at least as extreme})/(m + 1)`, extreme meaning *smaller* when
/// `lower_is_extreme`.
pub(crate) fn mc_p_value(observed: f64, simulated: &[f64], lower_is_extreme: bool) -> f64 {
    let extreme = simulated
        .iter()
        .filter(|&&t| {
            if lower_is_extreme {
                t <= observed
            } else {
                t >= observed
            }
        })
        .count();
    (1 + extreme) as f64 / (simulated.len() + 1) as f64
}
