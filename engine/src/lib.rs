//! The ldpstream engine: local randomizers, mergeable count sketches, batch fold kernels,
//! estimators and hypothesis tests, and the stream layer (panes, due windows, evaluation)
//! that the batch job and the service share. It performs no I/O; sources hand it Arrow
//! batches and sinks take its [`record::TestRecord`]s away.

pub mod audit;
pub mod curator;
pub mod eprocess;
pub mod error;
pub mod fold;
pub mod mechanism;
pub mod mle;
pub mod plan;
pub mod record;
pub mod sketch;
pub mod snapshot_test;
pub mod stats;
pub mod stream;
pub mod window;

pub use error::EngineError;
