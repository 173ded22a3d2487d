//! Sampler-level golden vectors (conformance/README.md, "samplers"): the integer draws the
//! noise mechanisms are built from, each replayed from its words alone, so that a port that
//! disagrees is caught at the step that differs rather than somewhere in a d-vector. Fixed
//! words reach the branches seeded words almost never do (Canon's carry loop on u64 and
//! u128, the discrete Laplace's rejected −0).

use ldpstream_engine::mechanism::{bernoulli_exp, discrete_gaussian, discrete_laplace};
use rand::{Rng, RngCore, SeedableRng};
use serde_json::{json, Value};

use super::{Record, Replay};

enum Draw {
    /// rand 0.9 `random_range(0..n)` on u64.
    RangeU64(u64),
    /// The same on u128.
    RangeU128(u128),
    /// Bernoulli(exp(−num/den)).
    BernoulliExp(u128, u128),
    /// Discrete Laplace with scale t.
    Laplace(u64),
    /// Discrete Gaussian with σ = s.
    Gaussian(u64),
}

impl Draw {
    fn run<R: RngCore>(&self, rng: &mut R) -> Value {
        match *self {
            Draw::RangeU64(n) => json!(rng.random_range(0..n).to_string()),
            Draw::RangeU128(n) => json!(rng.random_range(0..n).to_string()),
            Draw::BernoulliExp(num, den) => json!(bernoulli_exp(rng, num, den)),
            Draw::Laplace(t) => json!(discrete_laplace(rng, t).to_string()),
            Draw::Gaussian(s) => json!(discrete_gaussian(rng, s).to_string()),
        }
    }

    /// The sampler's name and its arguments as decimal strings (u128 exceeds 2^53).
    fn describe(&self) -> (&'static str, Vec<String>) {
        match *self {
            Draw::RangeU64(n) => ("range_u64", vec![n.to_string()]),
            Draw::RangeU128(n) => ("range_u128", vec![n.to_string()]),
            Draw::BernoulliExp(num, den) => {
                ("bernoulli_exp", vec![num.to_string(), den.to_string()])
            }
            Draw::Laplace(t) => ("discrete_laplace", vec![t.to_string()]),
            Draw::Gaussian(s) => ("discrete_gaussian", vec![s.to_string()]),
        }
    }
}

/// (draw, fixed words or none, seed for recorded words)
fn cases() -> Vec<(Draw, Option<Vec<u32>>, u64)> {
    let third = 0x5555_5555u32; // ⌊2^32/3⌋: three times a run of these is 2^k − 1
                                // Laplace t = 1: u = 0 (u64), Bernoulli(e^0) accepts (u128 draw 0 is not below 0), then
                                // v = 0 (Bernoulli(e^-1): k = 1 always continues, the k = 2 draw of 1 stops it), then
                                // the sign word: negative, x = 0, so start over; the second round is positive 0.
    let round = |sign: u32| {
        let mut w = vec![0u32; 2 + 4 + 4];
        w.extend([0, 0, 0, 0x8000_0000, sign]);
        w
    };
    let mut minus_zero = round(0x8000_0000);
    minus_zero.extend(round(0));
    let mut out = vec![
        (
            Draw::RangeU64(3),
            Some(vec![third, third, third, third, u32::MAX, u32::MAX]),
            0,
        ),
        (
            Draw::RangeU64(3),
            Some(vec![third, third, third, third, 0, 0]),
            0,
        ),
        (
            Draw::RangeU128(3),
            Some([vec![third; 8], vec![u32::MAX; 4]].concat()),
            0,
        ),
        (
            Draw::RangeU128(3),
            Some(vec![third, third, third, third, 7, 0, 0, 0]),
            0,
        ),
        (
            Draw::RangeU64((1 << 37) - 1),
            Some(vec![u32::MAX, u32::MAX]),
            0,
        ),
        (Draw::Laplace(1), Some(minus_zero), 0),
    ];
    let seeded = [
        Draw::RangeU64(7),
        Draw::RangeU64(262_145),
        Draw::RangeU64((1 << 37) + 3),
        Draw::RangeU64(u64::MAX),
        Draw::RangeU128(5),
        Draw::RangeU128(1 << 100),
        Draw::RangeU128(u128::MAX - 2),
        Draw::BernoulliExp(1, 3),
        Draw::BernoulliExp(1, 3),
        Draw::BernoulliExp(0, 1),
        Draw::BernoulliExp(2, 7),
        Draw::BernoulliExp(5, 2),
        Draw::BernoulliExp(1 << 90, (1 << 89) + 1),
        Draw::Laplace(1),
        Draw::Laplace(3),
        Draw::Laplace(262_144),
        Draw::Gaussian(1),
        Draw::Gaussian(7),
        Draw::Gaussian(16_948),
        Draw::Gaussian(419_431),
    ];
    out.extend(
        seeded
            .into_iter()
            .zip(100..)
            .map(|(d, seed)| (d, None, seed)),
    );
    out
}

pub fn sampler_cases() -> Value {
    let cases = cases().into_iter().map(|(draw, fixed, seed)| {
        let (sampler, args) = draw.describe();
        let words = match fixed {
            Some(words) => words,
            None => {
                let mut rng = Record {
                    inner: rand::rngs::StdRng::seed_from_u64(seed),
                    words: Vec::new(),
                };
                draw.run(&mut rng);
                rng.words
            }
        };
        let mut replay = Replay {
            words: words.clone(),
            at: 0,
        };
        let value = draw.run(&mut replay);
        assert_eq!(
            replay.at,
            words.len(),
            "{sampler} {args:?}: words left unread"
        );
        json!({"sampler": sampler, "args": args, "words": words, "value": value})
    });
    Value::Array(cases.collect())
}
