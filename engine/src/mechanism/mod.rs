//! Local randomizers: the client side that privatizes a value before it leaves the device,
//! and the algebra the engine needs to debias what arrives.
//!
//! Every randomizer draws from a cryptographically secure generator by default
//! (`rand::rng()`, a ChaCha12 generator seeded and periodically reseeded from the OS). A
//! caller that needs reproducible simulation passes its own seeded generator to the
//! `*_with` methods; never do that for real users' data.

mod grr;

pub use grr::Grr;

/// A debiased frequency estimate with its per-category standard error.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    pub estimate: Vec<f64>,
    pub std_error: Vec<f64>,
}
