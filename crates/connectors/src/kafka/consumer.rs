//! A consumer in a group, subscribed, with a [`PartitionHandler`] told of every
//! rebalance: what the scale-out stages read through. Their owners see messages,
//! partitions and offsets, never a librdkafka type.

use std::sync::Arc;
use std::time::Duration;

use ldpstream_config::KafkaConfig;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerGroupMetadata};
use rdkafka::message::{BorrowedMessage, Message};
use tracing::warn;

use super::client::client_config;
use super::group::{GroupContext, PartitionHandler, StartAt};
use crate::emit::SourceEvents;
use crate::error::ConnectorError;

/// Which messages of transactions a [`GroupConsumer`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// Only committed ones (`read_committed`; on a broker that implements KIP-98).
    Committed,
    /// Every message, also of open and aborted transactions (`read_uncommitted`): for a
    /// reader that tells committed values from others by itself, which an open
    /// transaction then never holds up.
    Uncommitted,
}

/// A consumer in `group_id` with the source's defaults and the user's options, offsets
/// committed only through transactions.
fn consumer_config(
    kafka: &KafkaConfig,
    group_id: &str,
    isolation: Isolation,
) -> Result<ClientConfig, ConnectorError> {
    let mut config = client_config(
        &super::source::DEFAULTS,
        &kafka.options,
        &kafka.options_from_env,
        &format!("consumer group {group_id:?}"),
    )?;
    config
        .set("bootstrap.servers", &kafka.brokers)
        .set("group.id", group_id)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set(
            "isolation.level",
            match isolation {
                Isolation::Committed => "read_committed",
                Isolation::Uncommitted => "read_uncommitted",
            },
        )
        .set("fetch.message.max.bytes", "16000000");
    Ok(config)
}

/// One consumed message, borrowed from the consumer until the next poll.
pub struct Polled<'a>(pub(crate) BorrowedMessage<'a>);

impl Polled<'_> {
    pub fn partition(&self) -> i32 {
        self.0.partition()
    }

    pub fn offset(&self) -> i64 {
        self.0.offset()
    }

    pub fn key(&self) -> &[u8] {
        self.0.key().unwrap_or_default()
    }

    /// None: a tombstone.
    pub fn payload(&self) -> Option<&[u8]> {
        self.0.payload()
    }

    pub(crate) fn timestamp_ms(&self) -> Option<i64> {
        self.0.timestamp().to_millis()
    }
}

/// The group's generation and member id, which a transaction that commits the consumer's
/// offsets must carry (so a fenced member's commit fails).
pub struct GroupMetadata(pub(crate) ConsumerGroupMetadata);

/// A consumer in a group, subscribed to one topic.
pub struct GroupConsumer<H: PartitionHandler> {
    consumer: BaseConsumer<GroupContext<H>>,
    stream: String,
}

impl<H: PartitionHandler> GroupConsumer<H> {
    /// Joins `group` and subscribes to `topic`; `handler` hears of every rebalance.
    pub fn subscribe(
        kafka: &KafkaConfig,
        (stream, group, topic): (&str, &str, &str),
        isolation: Isolation,
        handler: H,
        events: Option<Arc<dyn SourceEvents>>,
    ) -> Result<Self, ConnectorError> {
        let consumer: BaseConsumer<GroupContext<H>> = consumer_config(kafka, group, isolation)?
            .create_with_context(GroupContext::new(stream, handler, events))
            .map_err(|e| ConnectorError::Kafka {
                context: format!("consumer in group {group:?}"),
                source: e,
            })?;
        consumer
            .subscribe(&[topic])
            .map_err(|e| ConnectorError::Kafka {
                context: format!("subscribing to {topic:?}"),
                source: e,
            })?;
        Ok(GroupConsumer {
            consumer,
            stream: stream.to_string(),
        })
    }

    pub fn handler(&self) -> &H {
        self.consumer.context().handler()
    }

    /// The next message, waiting at most `timeout`; a rebalance is dispatched to the
    /// handler meanwhile. A consumer error is logged and skipped, as librdkafka retries
    /// on its own.
    pub fn next_message(&self, timeout: Duration) -> Option<Polled<'_>> {
        match self.consumer.poll(timeout)? {
            Ok(m) => Some(Polled(m)),
            Err(e) => {
                warn!(stream = %self.stream, error = %e, "Kafka consumer error");
                None
            }
        }
    }

    /// None while the consumer is not (yet) a member of the group.
    pub fn group_metadata(&self) -> Option<GroupMetadata> {
        self.consumer.group_metadata().map(GroupMetadata)
    }

    /// Reads `topic`/`partition` from `start` on.
    pub fn seek(&self, topic: &str, partition: i32, start: StartAt) -> Result<(), ConnectorError> {
        self.consumer
            .seek(topic, partition, start.offset(), Duration::from_secs(30))
            .map_err(|e| ConnectorError::Kafka {
                context: format!("seeking {topic:?}/{partition} to {start:?}"),
                source: e,
            })
    }
}
