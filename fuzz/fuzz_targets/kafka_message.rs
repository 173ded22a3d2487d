//! JSON and binary Kafka messages, for every mechanism's report layout. First byte: bit 0
//! picks the format, the rest the stream; the remainder is split at 0xFF into messages.

#![no_main]
use ldpstream_config::MessageFormat;
use ldpstream_connectors::messages::MessageDecoder;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    static STREAMS: OnceLock<Vec<(ldpstream_config::StreamConfig, ldpstream_engine::mechanism::Mechanism)>> =
        OnceLock::new();
    let streams = STREAMS.get_or_init(|| {
        common::streams(r#"{ kind = "kafka", brokers = "127.0.0.1:1", topics = ["t"], group_id = "g" }"#)
    });
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let (stream, mechanism) = &streams[usize::from(selector >> 1) % streams.len()];
    let format = if selector & 1 == 0 {
        MessageFormat::Json
    } else {
        MessageFormat::Binary
    };
    let mut decoder = MessageDecoder::new(stream, mechanism, format);
    let mut accepted = 0usize;
    for message in rest.split(|&b| b == 0xFF) {
        // A report the fold will reject is still a row: the fold counts it by reason.
        if let Ok(
            ldpstream_connectors::messages::Decoded::Report
            | ldpstream_connectors::messages::Decoded::Invalid(_),
        ) = decoder.push(message)
        {
            accepted += 1;
        }
    }
    let batch = decoder.finish().expect("a batch of accepted reports always builds");
    assert_eq!(batch.num_rows(), accepted, "every accepted report is in the batch");
});
