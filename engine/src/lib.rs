//! The ldpstream engine: local randomizers, mergeable count sketches, batch fold kernels,
//! estimators and hypothesis tests. It performs no I/O; connectors feed it Arrow arrays and
//! take its [`record::TestRecord`]s away.

pub mod audit;
pub mod curator;
pub mod error;
pub mod evaluate;
pub mod fold;
pub mod mechanism;
pub mod mle;
pub mod plan;
pub mod record;
pub mod sequential;
pub mod sketch;
pub mod stats;
pub mod window;

pub use error::EngineError;
