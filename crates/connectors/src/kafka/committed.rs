//! The offsets a consumer group has committed, read without joining the group. Scale-out's
//! merge reads its own group's after fencing the previous owner, to know which of its
//! emitted markers a reader of the results topic can see. On a broker that implements
//! KIP-98 that offset is exact. Tansu 0.6.0 may report an older one (it leaves a
//! transaction's offsets unapplied while another producer's transaction on the same
//! partition is open), which makes the merge emit some windows again, never fewer.

use std::time::Duration;

use ldpstream_config::KafkaConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use super::transactions::{base_config, err};
use crate::error::ConnectorError;

/// How long one request for committed offsets may take.
const OFFSETS_TIMEOUT: Duration = Duration::from_secs(10);

/// The offset `group` last committed for `topic`/`partition` (None: nothing yet), asked by
/// a client that never joins the group.
pub fn committed_offset(
    kafka: &KafkaConfig,
    group: &str,
    topic: &str,
    partition: i32,
) -> Result<Option<i64>, ConnectorError> {
    let mut config = base_config(kafka, &format!("offsets of group {group:?}"))?;
    config
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        // As the group's own consumers ask.
        .set("isolation.level", "read_committed");
    let consumer: BaseConsumer = config
        .create()
        .map_err(|e| err(format!("offsets of group {group:?}"), e))?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(topic, partition);
    let committed = consumer
        .committed_offsets(tpl, OFFSETS_TIMEOUT)
        .map_err(|e| err(format!("committed offset of {topic:?}/{partition}"), e))?;
    Ok(committed
        .find_partition(topic, partition)
        .and_then(|e| match e.offset() {
            Offset::Offset(o) => Some(o),
            _ => None,
        }))
}
