//! Shared input generators for the benchmarks, seeded so that runs compare like with like.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// `len` uniformly random categories in `[0, d)`.
pub fn random_categories(len: usize, d: u32, seed: u64) -> Vec<u32> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..len).map(|_| rng.random_range(0..d)).collect()
}
