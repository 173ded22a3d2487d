//! The offsets a consumer group has committed, read without joining the group: in
//! scale-out mode they are the one record of which transactions committed that every
//! broker keeps right (Tansu 0.6.0 shows aborted transactions' messages to
//! `read_committed` readers, but applies a transaction's offsets only when it commits).

use std::collections::BTreeMap;
use std::time::Duration;

use ldpstream_config::KafkaConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use super::transactions::{base_config, err};
use crate::error::ConnectorError;

/// How long one request for committed offsets may take.
const OFFSETS_TIMEOUT: Duration = Duration::from_secs(10);

/// A client that asks for `group`'s committed offsets; it never joins the group.
pub struct CommittedOffsets {
    group: String,
    consumer: BaseConsumer,
}

impl CommittedOffsets {
    pub fn open(kafka: &KafkaConfig, group: &str) -> Result<Self, ConnectorError> {
        let mut config = base_config(kafka, &format!("offsets of group {group:?}"))?;
        config
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            // As the group's own consumers ask. (Tansu 0.6.0 sometimes never reports a
            // transaction's offsets, with either isolation level: benches/RESULTS.md.)
            .set("isolation.level", "read_committed");
        let consumer: BaseConsumer = config
            .create()
            .map_err(|e| err(format!("offsets of group {group:?}"), e))?;
        Ok(CommittedOffsets {
            group: group.to_string(),
            consumer,
        })
    }

    /// The offset committed for each of `topic`'s partitions `0..partitions` that has
    /// one.
    pub fn of_partitions(
        &self,
        topic: &str,
        partitions: i32,
    ) -> Result<BTreeMap<i32, i64>, ConnectorError> {
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition(topic, p);
        }
        let committed = self
            .consumer
            .committed_offsets(tpl, OFFSETS_TIMEOUT)
            .map_err(|e| {
                err(
                    format!("committed offsets of group {:?} on {topic:?}", self.group),
                    e,
                )
            })?;
        Ok(committed
            .elements()
            .iter()
            .filter_map(|e| match e.offset() {
                Offset::Offset(o) => Some((e.partition(), o)),
                _ => None,
            })
            .collect())
    }
}

/// The offset `group` last committed for `topic`/`partition` (None: nothing yet).
pub fn committed_offset(
    kafka: &KafkaConfig,
    group: &str,
    topic: &str,
    partition: i32,
) -> Result<Option<i64>, ConnectorError> {
    let offsets = CommittedOffsets::open(kafka, group)?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(topic, partition);
    let committed = offsets
        .consumer
        .committed_offsets(tpl, OFFSETS_TIMEOUT)
        .map_err(|e| err(format!("committed offset of {topic:?}/{partition}"), e))?;
    Ok(committed
        .find_partition(topic, partition)
        .and_then(|e| match e.offset() {
            Offset::Offset(o) => Some(o),
            _ => None,
        }))
}
