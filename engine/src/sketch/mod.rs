//! Mergeable sketches: integer tables plus `n`. Merges are exact, associative and
//! commutative, so any split of the input over shards, panes or instances combines to a
//! bit-identical sketch. Floating point starts only at snapshot time.

mod codec;
mod counts;
mod rejections;

pub use counts::CountSketch;
pub use rejections::{RejectReason, Rejections};

/// The first bytes of every serialized sketch.
pub const MAGIC: [u8; 4] = *b"LDPS";
/// The serialization format this build writes and reads.
pub const FORMAT_VERSION: u8 = 1;
