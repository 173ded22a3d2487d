//! ldpstream's jobs over bounded input and the pieces the service shares with them: the
//! batch job over Parquet files (`batch_job`, feature `parquet`, on by default), the tests
//! of folded sketches every bounded job ends in ([`evaluate`]), partial sketch files and their exact merge
//! ([`sketch_file`]), the in-memory fold of Arrow data and its identity ([`memory_fold`],
//! [`memory_id`]), the versioned state encoding ([`state_codec`]), the state a config will
//! hold ([`state_memory`]), the privacy ledger ([`ledger`]) and the evaluation of a window's
//! groups on rayon's pool ([`parallel_groups`]). It reads through the
//! connectors' Parquet side, folds and tests through the engine's stream layer, and
//! builds no Kafka client, async runtime or HTTP server: the service (`ldpstream-serve`)
//! and the Python package (`ldpstream-python`) both sit on it.

#[cfg(feature = "parquet")]
pub mod batch_job;
pub mod digest;
pub mod error;
pub mod evaluate;
pub mod ledger;
pub mod mechanisms;
pub mod memory_check;
pub mod memory_fold;
pub mod memory_id;
pub mod output;
pub mod parallel_groups;
pub mod record_output;
mod record_spool;
pub mod row_digest;
pub mod sketch_file;
pub mod state_codec;
pub mod state_memory;

pub use error::{Conflict, Error, Fault};
