//! The generator every client-side draw of real reports uses.
//!
//! A fresh ChaCha12 ([`StdRng`]) seeded from the operating system on every call, kept on
//! the caller's stack for that call only. rand 0.9's thread-local `rand::rng()` is no
//! longer reseeded when a process forks (rand PR #1379), so a child forked after its
//! parent drew (multiprocessing's fork start method, PySpark's worker daemon, gunicorn
//! `--preload`) would replay the parent's stream: correlated noise across processes, which
//! breaks ε-LDP and the independence every estimate assumes. A generator that lives for one
//! call cannot be inherited half-used, and fork keeps only the forking thread, so no child
//! continues a parent's stream. The cost is one `getrandom` of 32 bytes per call.

use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::error::EngineError;

/// A CSPRNG freshly seeded from the operating system: for one call's draws, never kept.
/// Fails (instead of panicking) when the OS has no randomness to give.
pub fn client_rng() -> Result<StdRng, EngineError> {
    StdRng::try_from_os_rng().map_err(|e| EngineError::NoEntropy(e.to_string()))
}

#[cfg(test)]
mod tests {
    use rand::Rng;

    use super::*;

    /// Two generators made one after the other draw independent streams: the seed comes
    /// from the OS each time, not from a state they share.
    #[test]
    fn each_call_is_seeded_afresh() {
        let a: [u64; 4] = client_rng().unwrap().random();
        let b: [u64; 4] = client_rng().unwrap().random();
        assert_ne!(a, b);
    }
}
