//! OLH's golden cases (conformance/README.md): whole reports from recorded and fixed words,
//! and the pool and hash pinned on their own (`olh_pools`), so that a port whose SplitMix64
//! stream or multiply-add-shift disagrees is caught before any draw.

use ldpstream_engine::mechanism::{olh_bucket, olh_pool};
use serde_json::{json, Value};

use super::{case, Case};

/// Reports: defaults resolved (g = round(e^ε)+1, 1024 seeds; a tie e^ε = 2.5), a seed
/// above 2^63 with
/// the largest pool, the largest domain with g in the tens of thousands, and fixed words
/// for a pool of one (its index still reads one word) with a lie at ε = 700, and Canon's
/// carry on the pool index.
pub fn olh_cases() -> Vec<Case> {
    let mut grouped = case(
        "olh-default-g-pool",
        "{ kind = \"olh\", epsilon = 2.0, domain = 1000 }",
        999,
        29,
    );
    grouped.ts = Some(1_767_225_600_000);
    grouped.groups = vec![("country", "fr")];
    // The index (one word, range 1), U = 0 (16 zero 64-bit words: a lie even at ε = 700),
    // then the other bucket over g − 1 = 65535.
    let mut pool1 = vec![0x1234_5678u32];
    pool1.extend([0u32; 32]);
    pool1.push(0xdead_beef);
    vec![
        case(
            "olh-d16-g4",
            "{ kind = \"olh\", epsilon = 1.0, domain = 16, g = 4, pool_size = 8, pool_seed = 3 }",
            5,
            30,
        ),
        grouped,
        case(
            "olh-seed-max-pool-max",
            "{ kind = \"olh\", epsilon = 0.5, domain = 100, g = 3, pool_size = 65536, pool_seed = 18446744073709551615 }",
            42,
            31,
        ),
        case(
            // d = 2^24 at ε = 10 is refused since issue 44 (no pool within the sketch's
            // size limit identifies it), so the largest domain a pool of 64 identifies.
            "olh-eps10-d2pow20",
            "{ kind = \"olh\", epsilon = 10.0, domain = 1048576, pool_size = 64, pool_seed = 9007199254740993 }",
            1_048_575,
            32,
        ),
        Case {
            words: Some(pool1),
            ..case(
                "olh-pool1-eps700-lie",
                "{ kind = \"olh\", epsilon = 700.0, domain = 3, pool_size = 1 }",
                2,
                0,
            )
        },
        // e^ε = 2.5 exactly in f64: the default g rounds the tie away from zero, g = 4
        // (Python's round() would give 3).
        case(
            "olh-default-g-tie",
            "{ kind = \"olh\", epsilon = 0.9162907318741551, domain = 8, pool_size = 4 }",
            7,
            33,
        ),
        // 0x55555555·3 = 2^32 − 1 twice: Canon's method reads a third word and carries, index
        // 1; then U ≈ 1 keeps the bucket.
        Case {
            words: Some(vec![0x5555_5555, 0x5555_5555, 0xffff_ffff, 0xffff_ffff, 0xffff_ffff]),
            ..case(
                "olh-canon-carry-keep",
                "{ kind = \"olh\", epsilon = 1.0, domain = 10, g = 4, pool_size = 3 }",
                9,
                0,
            )
        },
    ]
}

/// Pools and buckets by themselves: (pool seed, pool size, g, values hashed). The first is
/// olh.rs's own golden vector; the others reach a seed above 2^63, g = 2^16 and the full
/// u32 key width.
pub fn olh_pools() -> Vec<Value> {
    let pools: [(u64, u32, u32, &[u32]); 3] = [
        (0, 4, 8, &[0, 1, 2, 999]),
        (u64::MAX, 3, 65_536, &[0, 1, 16_777_215, u32::MAX]),
        (9_007_199_254_740_993, 2, 3, &[0, 7, 65_535, 2_147_483_648]),
    ];
    pools
        .iter()
        .map(|&(seed, size, g, values)| {
            let pool = olh_pool(seed, size);
            let buckets: Vec<Vec<u32>> = pool
                .iter()
                .map(|&(a, b)| values.iter().map(|&v| olh_bucket(a, b, g, v)).collect())
                .collect();
            // The high word of a·v + b before the multiply-high: a carry from the low words
            // moves a bucket only with probability g/2^32, so the buckets alone rarely see it.
            let keys: Vec<Vec<u64>> = pool
                .iter()
                .map(|&(a, b)| {
                    values
                        .iter()
                        .map(|&v| a.wrapping_mul(u64::from(v)).wrapping_add(b) >> 32)
                        .collect()
                })
                .collect();
            json!({
                "pool_seed": seed.to_string(),
                "pool_size": size,
                "g": g,
                "pool": pool.iter().map(|(a, b)| [format!("{a:016x}"), format!("{b:016x}")]).collect::<Vec<_>>(),
                "values": values,
                "keys": keys,
                "buckets": buckets,
            })
        })
        .collect()
}
