//! What an OLH pool of S hash functions over g buckets can estimate on d categories
//! (docs/STATISTICS.md §1.8): whether it identifies the frequencies at all, and how much
//! variance it costs against fresh per-user hashes.

use crate::model::{OLH_MAX_G, OLH_MAX_POOL_SIZE};

/// Largest OLH table, pool size × g cells (8 bytes each: 128 MiB per sketch).
pub const MAX_OLH_TABLE_CELLS: u64 = 1 << 24;

/// The widest domain whose exactly unbiased pool estimate the engine computes: it holds
/// the pool's d × d collision inverse (and a second d × d table for the exact standard
/// errors), 128 MiB each at d = 4,096. Beyond it a record carries the plain (pool-biased)
/// estimate only.
pub const OLH_MAX_DENSE_DOMAIN: u32 = 4096;

/// The pool's share of the variance a 10% penalty allows: the variance against fresh
/// hashes grows like 1/(1 − γ) (Marchenko–Pastur, γ = (d − 1)/(S(g − 1))), so γ ≤ 1/12
/// keeps it within about 9% (measured 1.08–1.09 with this hash family).
pub const OLH_POOL_GAMMA_FOR_TEN_PERCENT: f64 = 1.0 / 12.0;

/// S(g − 1) + 1: the most categories a pool of S entries over g buckets can tell apart.
/// Each entry's one-hot bucket columns sum to one, so the collision matrix has rank at
/// most this (docs/STATISTICS.md §1.8).
pub fn olh_identifiable_domain(g: u32, pool_size: u32) -> u64 {
    u64::from(pool_size) * u64::from(g.saturating_sub(1)) + 1
}

/// γ = (d − 1)/(S(g − 1)): the pool's aspect ratio, which sets its variance penalty.
pub fn olh_gamma(domain: u32, g: u32, pool_size: u32) -> f64 {
    f64::from(domain.saturating_sub(1)) / (f64::from(pool_size) * f64::from(g.saturating_sub(1)))
}

/// The variance against fresh hashes that γ predicts, 1/(1 − γ) (infinite at γ ≥ 1).
pub fn olh_variance_factor_estimate(domain: u32, g: u32, pool_size: u32) -> f64 {
    let gamma = olh_gamma(domain, g, pool_size);
    if gamma < 1.0 {
        1.0 / (1.0 - gamma)
    } else {
        f64::INFINITY
    }
}

/// The smallest power-of-two pool whose estimate's variance is within about 10% of fresh
/// hashes (γ ≤ 1/12), if the pool and table limits allow one.
pub fn olh_suggested_pool_size(domain: u32, g: u32) -> Option<u32> {
    if !(2..=OLH_MAX_G).contains(&g) {
        return None;
    }
    (0..=16)
        .map(|k| 1u32 << k)
        .filter(|&s| s <= OLH_MAX_POOL_SIZE)
        .filter(|&s| u64::from(s) * u64::from(g) <= MAX_OLH_TABLE_CELLS)
        .find(|&s| olh_gamma(domain, g, s) <= OLH_POOL_GAMMA_FOR_TEN_PERCENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The notes' table (/work/notes/olh_seeds.md §1c): d = 256 needs 2048 / 1024 / 512 at
    /// g = 3 / 4 / 8; d = 1024 needs 8192 / 4096 / 2048 / 256 at g = 3 / 4 / 8 / 56;
    /// d = 4096 at g = 4 / 8 / 56: 16384 / 8192 / 1024.
    #[test]
    fn suggested_pool_sizes() {
        let cases = [
            (256, 3, 2048),
            (256, 4, 1024),
            (256, 8, 512),
            (1024, 3, 8192),
            (1024, 4, 4096),
            (1024, 8, 2048),
            (1024, 56, 256),
            (4096, 4, 16384),
            (4096, 8, 8192),
            (4096, 56, 1024),
        ];
        for (d, g, s) in cases {
            assert_eq!(olh_suggested_pool_size(d, g), Some(s), "d {d} g {g}");
        }
        // 65,536 categories at g = 2 would need S(g − 1) ≥ 12·65,535: beyond 2^16 entries.
        assert_eq!(olh_suggested_pool_size(65_536, 2), None);
        assert_eq!(olh_identifiable_domain(4, 1024), 3073);
        assert_eq!(olh_identifiable_domain(2, 1), 2);
    }
}
