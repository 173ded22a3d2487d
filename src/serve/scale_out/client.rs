//! What both stages do with their consumer the same way: joining their group, taking the
//! next message, and the locks their rebalance callbacks share with their loops.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use ldpstream_config::KafkaConfig;
use ldpstream_connectors::kafka::transactions::consumer_config;
use ldpstream_connectors::ConnectorError;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::message::BorrowedMessage;
use tracing::warn;

use crate::error::Error;

/// A rebalance callback that panicked left the state as it was; keep using it.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A `read_committed` consumer in `group`, subscribed to `topic`.
pub(super) fn subscribed<C: ConsumerContext + 'static>(
    kafka: &KafkaConfig,
    group: &str,
    topic: &str,
    context: C,
) -> Result<BaseConsumer<C>, Error> {
    let consumer: BaseConsumer<C> = consumer_config(kafka, group)?
        .create_with_context(context)
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
    Ok(consumer)
}

/// The next message, waiting at most 50 ms (so the loop's timers run); a consumer error
/// is logged and skipped, as librdkafka retries on its own.
pub(super) fn next_message<'a, C: ConsumerContext>(
    consumer: &'a BaseConsumer<C>,
    stream: &str,
) -> Option<BorrowedMessage<'a>> {
    match consumer.poll(Duration::from_millis(50))? {
        Ok(m) => Some(m),
        Err(e) => {
            warn!(stream, error = %e, "Kafka consumer error");
            None
        }
    }
}
