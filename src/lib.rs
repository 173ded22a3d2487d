//! ldpstream's jobs: the batch job over Parquet files ([`batch`]) and the long-running
//! service ([`serve`]). Both read through the connectors' sources, fold and test through
//! the engine's stream layer, and write through the connectors' sinks. The binary
//! (`src/main.rs`, `src/cli/`) only parses the command line and calls in here.

pub mod batch;
pub mod digest;
pub mod error;
pub mod ledger_file;
pub mod ledger_rules;
pub mod ledger_store;
pub mod mechanisms;
pub mod memory_fold;
pub mod memory_id;
pub mod output;
pub mod partials;
pub mod release;
pub mod serve;
pub mod state_codec;
pub mod state_memory;

pub use error::{Error, Fault};
