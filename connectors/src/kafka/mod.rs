//! Kafka: client settings, the consumer-group source with its rebalance handling, message
//! decoding (JSON and the compact binary layout), the dead-letter producer and the result
//! sink.

mod client;
pub mod dead_letter;
pub mod decode;
pub mod group;
mod json_message;
pub mod sink;
pub mod source;
pub mod transactions;

pub use decode::{encode_binary_u32, Decoded, MessageDecoder, BAD_MESSAGE};
pub use sink::{record_key, KafkaSink};
