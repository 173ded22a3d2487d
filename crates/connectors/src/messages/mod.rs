//! The report messages clients send (JSON or the compact binary layout) and their decoding
//! straight into Arrow builders. Kafka carries them, but nothing here needs a Kafka client,
//! so the wire format is built with or without the `kafka` feature.

mod decode;
mod json_message;

pub use decode::{
    encode_binary_subset, encode_binary_u32, BadMessage, Decoded, MessageDecoder, BAD_MESSAGE,
    BINARY_END_MARKER, FINGERPRINT_FIELD, GROUP_VALUE_TOO_LONG, MECHANISM_MISMATCH,
    MESSAGE_REASONS,
};
