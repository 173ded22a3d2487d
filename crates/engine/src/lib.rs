//! The ldpstream engine: local randomizers, mergeable count sketches, batch fold kernels,
//! estimators and hypothesis tests, and the stream layer (panes, due windows, evaluation)
//! that the batch job and the service share. It performs no I/O; sources hand it Arrow
//! batches and sinks take its [`record::TestRecord`]s away.
//!
//! The public API, by what its callers do:
//! - privatize on a client or in the simulator: [`mechanism::Mechanism`] (built from a
//!   config's mechanism), [`mechanism::privatize_batch`], [`curator::secure_rng`];
//! - fold reports: [`stream`] (a stream's layout, the grouped and paned fold of a decoded
//!   batch, due windows and their records), [`kernels`] (one Arrow array into one
//!   [`sketch::Sketch`]), [`window`] (panes and the pane store);
//! - test a snapshot: [`hypothesis::evaluate`] → [`record::TestRecord`];
//! - plan and audit: [`plan`], [`audit`]; the curator's composition rule:
//!   [`curator::ledger`].
//!
//! The statistics themselves (`stats`, `mle`, `eprocess`) are internal: every formula is
//! in docs/STATISTICS.md, and the crate's own tests (`src/tests/`) check them against
//! known values and by simulation.

pub mod audit;
pub mod curator;
pub(crate) mod eprocess;
pub mod error;
pub mod hypothesis;
pub mod kernels;
pub mod mechanism;
pub(crate) mod mle;
pub mod plan;
pub mod record;
pub mod scope;
pub mod simulation_seed;
pub mod sketch;
pub(crate) mod stats;
pub mod stream;
pub mod window;

pub use error::EngineError;

/// Internal statistics the criterion benches time on their own (benches/benches/snapshot.rs),
/// behind the `bench-internals` feature so that no other crate builds on them.
#[cfg(feature = "bench-internals")]
#[doc(hidden)]
pub mod internals {
    pub use crate::stats::{gof_statistic, local_exp_ind};
}

#[cfg(test)]
mod tests;
