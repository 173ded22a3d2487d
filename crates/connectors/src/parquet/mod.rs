//! Parquet: the bounded input (schema check up front, row groups read as batches for
//! [`crate::ParallelFiles`], a dictionary-key fast path with its own RLE/bit-packed
//! decoder), the replay source of
//! `serve`, the record schema and the rolling result sink.

pub mod contained;
pub mod dictionary;
pub mod files;
pub mod group_dictionary;
pub mod page_error;
pub mod reader;
pub mod record_schema;
pub mod replay;
pub mod rle_hybrid;
pub mod sink;

pub use crate::inputs::resolve_inputs;
pub use crate::schema_check::check_schema;
pub use files::{inspect, InputFile};
pub use reader::BATCH_ROWS;
pub use record_schema::{
    record_schema, records_parquet_bytes, records_to_batch, write_records_parquet,
};
pub use sink::ParquetSink;
