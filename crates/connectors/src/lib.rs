//! ldpstream's connectors: sources and sinks only, one folder per external system.
//! `parquet` and `kafka` (features, both on by default) read reports and write results,
//! [`simulator`] makes reports, [`jsonl`] writes results as JSON Lines, [`messages`] is the
//! clients' wire format, [`records`] the results as Arrow, [`schema_check`] an Arrow schema
//! against a stream's layout and [`inputs`] the files a job names. Every source is run
//! through one [`Source`] interface with a typed [`Position`]; Parquet files read all at
//! once, in parallel, go through its sibling `ParallelFiles`. Folding and testing live in
//! the engine. The Python package builds without `kafka` and `parquet`.

// The record fixture in parquet::record_schema sets every field in one `json!`.
#![recursion_limit = "256"]

pub mod atomic_file;
pub mod emit;
pub mod error;
pub mod inputs;
pub mod jsonl;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod memo_file;
pub mod messages;
#[cfg(feature = "parquet")]
pub mod parallel_files;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod per_thread;
pub mod position;
pub mod records;
pub mod schema_check;
pub mod simulator;
pub mod sinks;
pub mod source;

pub use emit::{SourceBatch, SourceEvents};
pub use error::{ConnectorError, Fault};
#[cfg(feature = "parquet")]
pub use parallel_files::{ParallelFiles, RowGroupInput};
pub use position::{KafkaPosition, Position};
pub use sinks::Sinks;
pub use source::{Source, SourceEnd};
