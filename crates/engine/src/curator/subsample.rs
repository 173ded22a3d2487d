use rand::Rng;

use crate::error::EngineError;
use crate::stats::pearson_gof;

/// What the wrapper released and how it got there.
#[derive(Debug, Clone, PartialEq)]
pub struct SubsampleOutcome {
    pub reject: bool,
    /// m = ⌈1/(δε)⌉.
    pub blocks: u64,
    /// The block the tester ran on (0-based, in stream order).
    pub block: u64,
    /// The inner tester's own answer before the δ-flip.
    pub inner_reject: bool,
    pub flipped: bool,
}

/// `m = ⌈1/(δε)⌉`.
pub fn block_count(delta: f64, epsilon: f64) -> u64 {
    (1.0 / (delta * epsilon)).ceil() as u64
}

/// Subsample and aggregate (seed 004): pick one of `m` blocks uniformly with `rng` (a
/// CSPRNG for real releases), run `inner` on that block's counts, and flip its answer with
/// probability δ. Two neighbouring streams differ in one block, so
/// `P(reject | X)/P(reject | X') ≤ 1 + 1/(δm) ≤ e^ε`.
pub fn subsample_and_aggregate<R: Rng + ?Sized>(
    block_counts: impl FnOnce(u64, &mut R) -> Result<Vec<u64>, EngineError>,
    inner: impl FnOnce(&[u64]) -> Result<bool, EngineError>,
    delta: f64,
    epsilon: f64,
    rng: &mut R,
) -> Result<SubsampleOutcome, EngineError> {
    let blocks = block_count(delta, epsilon);
    let block = rng.random_range(0..blocks);
    let inner_reject = inner(&block_counts(block, rng)?)?;
    let flipped = rng.random::<f64>() < delta;
    Ok(SubsampleOutcome {
        reject: inner_reject != flipped,
        blocks,
        block,
        inner_reject,
        flipped,
    })
}

/// The classic Pearson GOF at level α, as an inner tester (non-private by itself).
pub fn pearson_rejects(counts: &[u64], p0: &[f64], alpha: f64) -> bool {
    counts.iter().sum::<u64>() > 0 && pearson_gof(counts, p0).p_value.is_some_and(|p| p < alpha)
}
