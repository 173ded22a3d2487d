//! ldpstream's connectors: Parquet in and out, the report simulator, and the batch job that
//! wires them to the engine.

pub mod atomic_file;
pub mod batch;
pub mod decode;
pub mod error;
pub mod grouping;
pub(crate) mod json_message;
pub mod jsonl;
pub mod ledger_file;
pub mod paned;
pub mod parquet_dict;
pub mod parquet_in;
pub mod record_parquet;
pub mod rle_hybrid;
pub mod serve;
pub mod simulate;
pub mod windows;

pub use error::ConnectorError;
