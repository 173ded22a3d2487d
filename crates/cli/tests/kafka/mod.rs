//! `serve` against a real Kafka-protocol broker (scripts/test.sh starts Tansu and exports
//! LDPSTREAM_KAFKA_BROKERS; the TLS, SASL and outage tests start brokers of their own).

mod basics;
mod event_time;
mod fingerprint;
mod js_client;
mod malformed;
mod outage;
mod scale_out;
mod security;
