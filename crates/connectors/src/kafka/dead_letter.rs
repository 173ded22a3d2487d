//! The dead-letter topic of a Kafka source: a message that does not decode, or whose
//! report the fold will reject (out of the domain, a NaN noise vector, ...), is produced
//! there unchanged, with headers saying why and where it came from, so it can be
//! inspected and replayed. Sends never block the source; deliveries are served whenever
//! the source cuts a batch and flushed when it stops.

use std::sync::atomic::Ordering;
use std::time::Duration;

use ldpstream_config::KafkaConfig;
use rdkafka::message::{BorrowedMessage, Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use tracing::warn;

use super::client::client_config;
use super::sink::Deliveries;
use crate::error::ConnectorError;

pub struct DeadLetters {
    topic: String,
    producer: BaseProducer<Deliveries>,
    /// Failures already counted into the metric.
    reported: u64,
}

impl DeadLetters {
    /// A producer with the source's own client options (security settings), so it reaches
    /// the same cluster the same way.
    pub fn open(kafka: &KafkaConfig, topic: &str) -> Result<Self, ConnectorError> {
        let mut config = client_config(
            // Whatever the consumer could read (up to librdkafka's default
            // receive.message.max.bytes) can be dead-lettered; where the topic's
            // max.message.bytes is lower, the broker refuses the send and it is counted in
            // ldpstream_dead_letters_failed_total.
            &[("linger.ms", "50"), ("message.max.bytes", "100000000")],
            &kafka.options,
            &kafka.options_from_env,
            &format!("dead-letter topic {topic:?}"),
        )?;
        config.set("bootstrap.servers", &kafka.brokers);
        let producer = config
            .create_with_context(Deliveries::default())
            .map_err(|source| ConnectorError::Kafka {
                context: format!("dead-letter producer for topic {topic:?}"),
                source,
            })?;
        Ok(DeadLetters {
            topic: topic.to_string(),
            producer,
            reported: 0,
        })
    }

    /// Queues a consumed message's payload, with its topic/partition@offset as the source.
    /// `topic` overrides the message's own topic name (a single-topic source knows it).
    pub fn send_message(&self, message: &BorrowedMessage<'_>, topic: Option<&str>, reason: &str) {
        let topic = topic.unwrap_or_else(|| message.topic());
        let source = format!("{topic}/{}@{}", message.partition(), message.offset());
        self.send(message.payload().unwrap_or_default(), reason, &source);
    }

    /// Queues `payload`; when librdkafka's queue is full the message is dropped and counted
    /// as failed rather than stalling the stream.
    pub(super) fn send(&self, payload: &[u8], reason: &str, source: &str) {
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: "ldpstream-reason",
                value: Some(reason),
            })
            .insert(Header {
                key: "ldpstream-source",
                value: Some(source),
            });
        let record = BaseRecord::<str, [u8]>::to(&self.topic)
            .key(source)
            .payload(payload)
            .headers(headers);
        if let Err((e, _)) = self.producer.send(record) {
            self.producer
                .context()
                .failed
                .fetch_add(1, Ordering::AcqRel);
            warn!(topic = %self.topic, error = %e, "dead-letter message not queued");
        }
    }

    /// Serves delivery reports; returns failures not yet counted.
    pub fn poll(&mut self) -> u64 {
        self.producer.poll(Duration::ZERO);
        self.new_failures()
    }

    /// Waits (bounded) for queued messages; returns failures not yet counted.
    pub fn flush(&mut self) -> u64 {
        if let Err(e) = self.producer.flush(Duration::from_secs(10)) {
            warn!(topic = %self.topic, error = %e, "dead-letter messages still queued at shutdown");
        }
        self.new_failures()
    }

    fn new_failures(&mut self) -> u64 {
        let failed = self.producer.context().failed.load(Ordering::Acquire);
        let new = failed - self.reported;
        self.reported = failed;
        new
    }
}
