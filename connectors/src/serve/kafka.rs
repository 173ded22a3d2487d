//! The Kafka source: a librdkafka consumer with auto-commit off. Partitions are assigned
//! explicitly (every partition of every configured topic) at the offsets stored in the
//! checkpoint, or at the beginning on a first start; offsets are committed to the
//! consumer group only as progress reports (rule 5). Messages are decoded straight into
//! Arrow builders and cut into batches by `max_batch_rows` / `max_batch_delay`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::time::{Duration, Instant};

use ldpstream_config::{KafkaConfig, StreamConfig};
use ldpstream_engine::mechanism::Mechanism;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use tracing::{debug, info, warn};

use super::checkpoint::Position;
use super::metrics::Metrics;
use super::SourceBatch;
use crate::decode::{Decoded, MessageDecoder, BAD_MESSAGE};
use crate::error::ConnectorError;

/// Defaults tuned for throughput on large fetch responses (see the README); any of them
/// can be overridden through `options`.
const DEFAULTS: [(&str, &str); 4] = [
    ("fetch.queue.backoff.ms", "10"),
    ("queued.min.messages", "500000"),
    ("session.timeout.ms", "6000"),
    ("auto.offset.reset", "earliest"),
];

fn kafka_err(what: &str, e: impl std::fmt::Display) -> ConnectorError {
    ConnectorError::Invalid(format!("Kafka {what}: {e}"))
}

fn key(topic: &str, partition: i32) -> String {
    format!("{topic}/{partition}")
}

const ENDED: &str = "/ended";

/// Consumes until `stop`, or (with `end_marker`) until every partition delivered its end
/// marker. Returns true when the input ended.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_kafka(
    stream: &StreamConfig,
    kafka: &KafkaConfig,
    mechanism: &Mechanism,
    resume: &Position,
    metrics: &Metrics,
    connected: &dyn Fn(),
    stop: &AtomicBool,
    out: &SyncSender<SourceBatch>,
) -> Result<bool, ConnectorError> {
    let mut config = ClientConfig::new();
    for (k, v) in DEFAULTS {
        config.set(k, v);
    }
    for (k, v) in &kafka.options {
        config.set(k, v);
    }
    for (k, var) in &kafka.options_from_env {
        let value = std::env::var(var).map_err(|_| {
            ConnectorError::Invalid(format!(
                "stream {:?}: Kafka option {k:?} comes from environment variable {var}, which is not set",
                stream.name
            ))
        })?;
        config.set(k, value);
    }
    config
        .set("bootstrap.servers", &kafka.brokers)
        .set("group.id", &kafka.group_id)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false");
    let consumer: BaseConsumer = config
        .create()
        .map_err(|e| kafka_err("consumer configuration", e))?;

    let mut assignment = TopicPartitionList::new();
    let mut partitions = Vec::new();
    for topic in &kafka.topics {
        let md = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(30))
            .map_err(|e| kafka_err(&format!("metadata of topic {topic:?}"), e))?;
        let t = md
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .filter(|t| !t.partitions().is_empty())
            .ok_or_else(|| {
                ConnectorError::Invalid(format!(
                    "Kafka topic {topic:?} does not exist (or has no partitions) on {}",
                    kafka.brokers
                ))
            })?;
        for p in t.partitions() {
            let k = key(topic, p.id());
            let offset = resume
                .get(&k)
                .map_or(Offset::Beginning, |&o| Offset::Offset(o as i64));
            assignment
                .add_partition_offset(topic, p.id(), offset)
                .map_err(|e| kafka_err("assignment", e))?;
            partitions.push((topic.clone(), p.id()));
        }
    }
    let mut ended: BTreeSet<String> = partitions
        .iter()
        .map(|(t, p)| key(t, *p))
        .filter(|k| resume.contains_key(&format!("{k}{ENDED}")))
        .collect();
    if kafka.end_marker && ended.len() == partitions.len() {
        connected();
        return Ok(true);
    }
    consumer
        .assign(&assignment)
        .map_err(|e| kafka_err("assign", e))?;
    info!(stream = %stream.name, partitions = partitions.len(), "Kafka partitions assigned");
    connected();

    let mut decoder = MessageDecoder::new(stream, mechanism, kafka.format);
    let mut position = Position::new();
    let mut batch_started: Option<Instant> = None;
    let mut last_commit = Instant::now();
    let mut last_lag = Instant::now();
    let delay = stream.max_batch_delay.as_std();
    let bad = metrics
        .rejected
        .with_label_values(&[stream.name.as_str(), BAD_MESSAGE]);
    let mut committed: BTreeMap<String, u64> = BTreeMap::new();
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        let done = kafka.end_marker && ended.len() == partitions.len();
        let full = decoder.rows() >= stream.max_batch_rows;
        let due = batch_started.is_some_and(|t| t.elapsed() >= delay);
        if (full || due || stopping || done) && (decoder.rows() > 0 || !position.is_empty()) {
            let batch = decoder.finish()?;
            let sent = std::mem::take(&mut position);
            for (k, v) in &sent {
                committed.insert(k.clone(), *v);
            }
            if out
                .send(SourceBatch {
                    batch,
                    position: sent,
                })
                .is_err()
            {
                return Ok(false);
            }
            batch_started = None;
        }
        if stopping {
            return Ok(false);
        }
        if done {
            return Ok(true);
        }
        if last_commit.elapsed() >= Duration::from_secs(5) && !committed.is_empty() {
            commit_progress(&consumer, &committed);
            last_lag = report_lag(&consumer, &partitions, &committed, metrics, last_lag);
            last_commit = Instant::now();
        }
        let timeout = match batch_started {
            Some(t) => delay
                .saturating_sub(t.elapsed())
                .min(Duration::from_millis(100)),
            None => Duration::from_millis(100),
        };
        let Some(message) = consumer.poll(timeout) else {
            continue;
        };
        let message = match message {
            Ok(m) => m,
            Err(e) => {
                warn!(stream = %stream.name, error = %e, "Kafka consumer error");
                continue;
            }
        };
        let k = key(message.topic(), message.partition());
        let next = (message.offset() + 1).max(0) as u64;
        position.insert(k.clone(), next);
        if batch_started.is_none() {
            batch_started = Some(Instant::now());
        }
        match decoder.push(message.payload().unwrap_or_default()) {
            Ok(Decoded::Report) => {}
            Ok(Decoded::EndMarker) if kafka.end_marker => {
                position.insert(format!("{k}{ENDED}"), 1);
                ended.insert(k);
            }
            Ok(Decoded::EndMarker) => {}
            Err(reason) => {
                bad.inc();
                debug!(stream = %stream.name, partition = %k, offset = message.offset(), %reason, "bad message");
            }
        }
    }
}

fn commit_progress(consumer: &BaseConsumer, positions: &BTreeMap<String, u64>) {
    let mut tpl = TopicPartitionList::new();
    for (k, &offset) in positions {
        let Some((topic, partition)) = k.rsplit_once('/') else {
            continue;
        };
        let Ok(partition) = partition.parse::<i32>() else {
            continue;
        };
        let _ = tpl.add_partition_offset(topic, partition, Offset::Offset(offset as i64));
    }
    if let Err(e) = consumer.commit(&tpl, CommitMode::Async) {
        debug!(error = %e, "progress commit failed (harmless: the checkpoint holds the offsets)");
    }
}

fn report_lag(
    consumer: &BaseConsumer,
    partitions: &[(String, i32)],
    positions: &BTreeMap<String, u64>,
    metrics: &Metrics,
    last: Instant,
) -> Instant {
    for (topic, p) in partitions {
        if let Ok((_, high)) = consumer.fetch_watermarks(topic, *p, Duration::from_millis(500)) {
            let at = positions.get(&key(topic, *p)).copied().unwrap_or(0) as i64;
            metrics
                .kafka_lag
                .with_label_values(&[topic.as_str(), &p.to_string()])
                .set((high - at).max(0));
        }
    }
    let _ = last;
    Instant::now()
}
