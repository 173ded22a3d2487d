//! The Kafka source: a librdkafka consumer in the configured consumer group, auto-commit
//! off. The group assigns partitions; each starts at the offset stored in the checkpoint
//! (or at the beginning, for a partition no checkpoint has seen), and offsets are
//! committed to the group only as progress reports (ARCHITECTURE.md invariant 5). Messages are decoded straight
//! into Arrow builders and cut into batches by `max_batch_rows` / `max_batch_delay`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ldpstream_config::{KafkaConfig, StreamConfig};
use ldpstream_engine::mechanism::Mechanism;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer as _};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{Offset, TopicPartitionList};
use tracing::{debug, info, warn};

use super::client::{client_config, librdkafka_build, security_of};
use super::dead_letter::DeadLetters;
use super::group::GroupContext;
use super::resume::ResumeFrom;
use crate::emit::{SourceBatch, SourceEvents};
use crate::error::ConnectorError;
use crate::messages::{Decoded, MessageDecoder};
use crate::position::{KafkaPosition, Position, TopicPartition};

/// Defaults tuned for throughput on large fetch responses (see the README); any of them
/// can be overridden through `options`.
pub(crate) const DEFAULTS: [(&str, &str); 5] = [
    ("fetch.queue.backoff.ms", "10"),
    ("queued.min.messages", "500000"),
    ("session.timeout.ms", "6000"),
    ("auto.offset.reset", "earliest"),
    // Feeds `ldpstream_kafka_consumer_lag` (see `GroupContext::stats`).
    ("statistics.interval.ms", "5000"),
];

/// The source's consumer: its rebalances go to the one group dispatch, and from there to
/// [`ResumeFrom`].
type Consumer = BaseConsumer<GroupContext<ResumeFrom>>;

/// How often offsets are committed to the group.
const PROGRESS_INTERVAL: Duration = Duration::from_secs(5);

fn kafka_err(what: &str, source: rdkafka::error::KafkaError) -> ConnectorError {
    ConnectorError::Kafka {
        context: what.to_string(),
        source,
    }
}

/// Next offsets of the messages taken since the last batch cut, without a string key or
/// a map insert per message: a slot per (topic, partition), keyed only at the cut.
#[derive(Default)]
struct TakenOffsets {
    topics: Vec<String>,
    next: Vec<Vec<Option<u64>>>,
    ended: Vec<TopicPartition>,
}

impl TakenOffsets {
    /// With one subscribed topic every message is from it, and the topic name (a UTF-8
    /// check of a C string per message in rdkafka) need not be read.
    fn single(topic: &str) -> Self {
        TakenOffsets {
            topics: vec![topic.to_string()],
            next: vec![Vec::new()],
            ended: Vec::new(),
        }
    }

    fn note(&mut self, topic: &str, partition: i32, next: u64) {
        let t = match self.topics.iter().position(|x| x == topic) {
            Some(t) => t,
            None => {
                self.topics.push(topic.to_string());
                self.next.push(Vec::new());
                self.topics.len() - 1
            }
        };
        self.note_at(t, partition, next);
    }

    fn note_at(&mut self, t: usize, partition: i32, next: u64) {
        let Ok(p) = usize::try_from(partition) else {
            return;
        };
        let slots = &mut self.next[t];
        if slots.len() <= p {
            slots.resize(p + 1, None);
        }
        slots[p] = Some(next);
    }

    fn is_empty(&self) -> bool {
        self.ended.is_empty() && self.next.iter().flatten().all(Option::is_none)
    }

    fn take(&mut self) -> KafkaPosition {
        let mut out = KafkaPosition {
            ended: std::mem::take(&mut self.ended).into_iter().collect(),
            ..KafkaPosition::default()
        };
        for (topic, slots) in self.topics.iter().zip(&mut self.next) {
            for (p, slot) in slots.iter_mut().enumerate() {
                if let Some(next) = slot.take() {
                    out.next.insert((topic.clone(), p as i32), next);
                }
            }
        }
        out
    }
}

/// The time, read from the OS only every few hundred messages while messages stream in:
/// at a million messages a second a clock read per message is a tenth of the source's
/// time. [`refresh`](Self::refresh) reads it for real whenever the source is about to
/// wait, so batch-delay decisions are never more than a few hundred messages stale.
struct CoarseClock {
    now: Instant,
    since_read: u32,
}

impl CoarseClock {
    const STRIDE: u32 = 256;

    fn new() -> Self {
        CoarseClock {
            now: Instant::now(),
            since_read: 0,
        }
    }

    fn tick(&mut self) -> Instant {
        self.since_read += 1;
        if self.since_read >= Self::STRIDE {
            self.refresh();
        }
        self.now
    }

    fn refresh(&mut self) -> Instant {
        self.since_read = 0;
        self.now = Instant::now();
        self.now
    }
}

/// The topic's metadata, the first request to the brokers. Retried for up to 30 s while
/// the brokers may still come up, but a TLS or SASL failure is final at once, and the
/// error names the brokers, the security settings and what librdkafka reported.
fn first_metadata(
    consumer: &Consumer,
    topic: &str,
    kafka: &KafkaConfig,
    config: &ClientConfig,
) -> Result<rdkafka::metadata::Metadata, ConnectorError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let err = match consumer.fetch_metadata(Some(topic), Duration::from_secs(2)) {
            Ok(md) => return Ok(md),
            Err(e) => e,
        };
        // Client errors reach the context only while the consumer is polled (nothing is
        // subscribed yet, so this takes no message); the wait also paces the retries.
        let paced = Instant::now() + Duration::from_millis(200);
        while Instant::now() < paced {
            let _ = consumer.poll(Duration::from_millis(50));
        }
        let reported = consumer.context().last_error();
        let settled = reported.as_ref().is_some_and(|(_, settled)| *settled);
        if settled || Instant::now() >= deadline {
            let reported = reported
                .map(|(reason, _)| format!("; librdkafka reported: {reason}"))
                .unwrap_or_default();
            return Err(ConnectorError::Unreachable {
                message: format!(
                    "Kafka brokers {} ({}): reading the metadata of topic {topic:?}: {err}{reported}",
                    kafka.brokers,
                    security_of(config)
                ),
            });
        }
    }
}

/// The source's consumer, not subscribed yet, and every partition of its topics. Fails
/// early, naming the topic, rather than waiting forever in a group with nothing to assign.
fn open_consumer(
    stream: &StreamConfig,
    kafka: &KafkaConfig,
    resume: &KafkaPosition,
    events: &Arc<dyn SourceEvents>,
) -> Result<(Consumer, Vec<TopicPartition>), ConnectorError> {
    let mut config = client_config(
        &DEFAULTS,
        &kafka.options,
        &kafka.options_from_env,
        &format!("stream {:?}", stream.name),
    )?;
    config
        .set("bootstrap.servers", &kafka.brokers)
        .set("group.id", &kafka.group_id)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false");
    let handler = ResumeFrom::new(&stream.name, resume, events.clone());
    let consumer: Consumer = config
        .create_with_context(GroupContext::new(
            &stream.name,
            handler,
            Some(events.clone()),
        ))
        .map_err(|e| kafka_err("consumer configuration", e))?;
    let mut all_partitions = Vec::new();
    let (version, features) = librdkafka_build();
    info!(stream = %stream.name, librdkafka = %version, builtin_features = %features, security = %security_of(&config), "Kafka client");
    for topic in &kafka.topics {
        let md = first_metadata(&consumer, topic, kafka, &config)?;
        let t = md
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .filter(|t| !t.partitions().is_empty())
            .ok_or_else(|| ConnectorError::NoSuchTopic {
                topic: topic.clone(),
                brokers: kafka.brokers.clone(),
            })?;
        all_partitions.extend(t.partitions().iter().map(|p| (topic.clone(), p.id())));
    }
    Ok((consumer, all_partitions))
}

/// The next message. What is already fetched is taken without a timed wait (no clock
/// reads); only when the queue is empty is the clock read and the wait at most until the
/// batch is due. None: nothing came in time, or a consumer error (logged; librdkafka
/// retries on its own).
#[inline]
fn next_message<'c>(
    consumer: &'c Consumer,
    clock: &mut CoarseClock,
    batch_started: Option<Instant>,
    delay: Duration,
    stream: &str,
) -> Option<BorrowedMessage<'c>> {
    let message = match consumer.poll(Duration::ZERO) {
        Some(m) => m,
        None => {
            let now = clock.refresh();
            let timeout = match batch_started {
                Some(t) => delay
                    .saturating_sub(now.duration_since(t))
                    .min(Duration::from_millis(100)),
                None => Duration::from_millis(100),
            };
            consumer.poll(timeout)?
        }
    };
    match message {
        Ok(m) => {
            // One relaxed load per message; it ends an outage that no statistics
            // callback has ended yet.
            consumer.context().reached();
            Some(m)
        }
        Err(e) => {
            warn!(stream, error = %e, "Kafka consumer error");
            None
        }
    }
}

/// Consumes until `stop`, or (with `end_marker`) until every assigned partition delivered
/// its end marker. Returns true when the input ended.
pub fn run_kafka(
    stream: &StreamConfig,
    kafka: &KafkaConfig,
    mechanism: &Mechanism,
    resume: &Position,
    events: Arc<dyn SourceEvents>,
    stop: &AtomicBool,
    out: &SyncSender<SourceBatch>,
) -> Result<bool, ConnectorError> {
    let resume = resume.kafka();
    let (consumer, all_partitions) = open_consumer(stream, kafka, &resume, &events)?;
    let mut ended: std::collections::BTreeSet<TopicPartition> = all_partitions
        .iter()
        .filter(|tp| resume.ended.contains(tp))
        .cloned()
        .collect();
    if kafka.end_marker && ended.len() == all_partitions.len() {
        events.connected();
        return Ok(true);
    }
    let topics: Vec<&str> = kafka.topics.iter().map(String::as_str).collect();
    consumer
        .subscribe(&topics)
        .map_err(|e| kafka_err("subscribe", e))?;
    info!(stream = %stream.name, group = %kafka.group_id, topics = ?kafka.topics, "joining the consumer group");

    let mut dead_letters = kafka
        .dead_letter_topic
        .as_deref()
        .map(|t| DeadLetters::open(kafka, t))
        .transpose()?;
    let mut decoder =
        MessageDecoder::new(stream, mechanism, kafka.format).with_event_time(kafka.event_time);
    let single_topic = match kafka.topics.as_slice() {
        [only] => Some(only.as_str()),
        _ => None,
    };
    let mut taken = single_topic.map_or_else(TakenOffsets::default, TakenOffsets::single);
    let mut assigned: Vec<(String, i32)> = Vec::new();
    let mut joined = false;
    // Every assigned partition has sent its end marker (kept current at the two places
    // that change it, not recomputed per message).
    let mut all_ended = false;
    // For the throughput figure in the log: when reading started, and messages read.
    let mut read_since: Option<(Instant, u64)> = None;
    let mut clock = CoarseClock::new();
    let mut batch_started: Option<Instant> = None;
    let mut last_progress = clock.now;
    let delay = stream.max_batch_delay.as_std();
    let mut committed: BTreeMap<TopicPartition, u64> = BTreeMap::new();
    loop {
        if let Some(now) = consumer.context().take_assignment() {
            assigned = now;
            all_ended = all_assigned_ended(&assigned, &ended);
            if !joined {
                joined = true;
                events.connected();
                read_since = Some((Instant::now(), 0));
            }
        }
        let now = clock.tick();
        let stopping = stop.load(Ordering::Relaxed);
        let done = kafka.end_marker && all_ended;
        let full = decoder.rows() >= stream.max_batch_rows;
        let due = batch_started.is_some_and(|t| now.duration_since(t) >= delay);
        if (full || due || stopping || done) && (decoder.rows() > 0 || !taken.is_empty()) {
            let batch = decoder.finish()?;
            let sent = taken.take();
            for (k, v) in &sent.next {
                committed.insert(k.clone(), *v);
            }
            if out
                .send(SourceBatch {
                    batch,
                    position: Position::Kafka(sent),
                })
                .is_err()
            {
                return Ok(false);
            }
            batch_started = None;
            clock.refresh();
            if let Some(dl) = &mut dead_letters {
                events.dead_letters_failed(dl.poll());
            }
        }
        if done || stopping {
            if let Some(dl) = &mut dead_letters {
                events.dead_letters_failed(dl.flush());
            }
        }
        if done {
            if let Some((since, messages)) = read_since {
                let secs = since.elapsed().as_secs_f64();
                info!(stream = %stream.name, messages, secs, rate = messages as f64 / secs.max(1e-9), "Kafka input ended: messages read since the group assigned the partitions");
            }
            return Ok(true);
        }
        if stopping {
            return Ok(false);
        }
        if now.duration_since(last_progress) >= PROGRESS_INTERVAL {
            if !committed.is_empty() {
                commit_progress(&consumer, &committed);
            }
            last_progress = clock.refresh();
        }
        let Some(message) = next_message(&consumer, &mut clock, batch_started, delay, &stream.name)
        else {
            continue;
        };
        if let Some((_, n)) = &mut read_since {
            *n += 1;
        }
        let next = (message.offset() + 1).max(0) as u64;
        match single_topic {
            Some(_) => taken.note_at(0, message.partition(), next),
            None => taken.note(message.topic(), message.partition(), next),
        }
        if batch_started.is_none() {
            batch_started = Some(clock.now);
        }
        match decoder.push_with_time(
            message.payload().unwrap_or_default(),
            message.timestamp().to_millis(),
        ) {
            Ok(Decoded::Report) => {}
            // Folded anyway: the fold rejects it and counts it in the record by reason.
            Ok(Decoded::Invalid(reason)) => {
                set_aside(&dead_letters, &message, single_topic, reason.name(), stream)
            }
            Ok(Decoded::EndMarker) if kafka.end_marker => {
                let k = (
                    single_topic.unwrap_or_else(|| message.topic()).to_string(),
                    message.partition(),
                );
                taken.ended.push(k.clone());
                ended.insert(k);
                all_ended = all_assigned_ended(&assigned, &ended);
            }
            Ok(Decoded::EndMarker) => {}
            Err(bad) => {
                events.bad_message(bad.reason);
                set_aside(&dead_letters, &message, single_topic, &bad.detail, stream);
            }
        }
    }
}

/// A message the fold will reject, or that did not decode: dead-lettered when configured.
fn set_aside(
    dead_letters: &Option<DeadLetters>,
    message: &BorrowedMessage<'_>,
    single_topic: Option<&str>,
    reason: &str,
    stream: &StreamConfig,
) {
    if let Some(dl) = dead_letters {
        dl.send_message(message, single_topic, reason);
    }
    debug!(stream = %stream.name, topic = message.topic(), partition = message.partition(), offset = message.offset(), reason, "report set aside");
}

fn commit_progress(consumer: &Consumer, positions: &BTreeMap<TopicPartition, u64>) {
    let mut tpl = TopicPartitionList::new();
    for ((topic, partition), &offset) in positions {
        let _ = tpl.add_partition_offset(topic, *partition, Offset::Offset(offset as i64));
    }
    if let Err(e) = consumer.commit(&tpl, CommitMode::Async) {
        debug!(error = %e, "progress commit failed (harmless: the checkpoint holds the offsets)");
    }
}

fn all_assigned_ended(
    assigned: &[TopicPartition],
    ended: &std::collections::BTreeSet<TopicPartition>,
) -> bool {
    !assigned.is_empty() && assigned.iter().all(|tp| ended.contains(tp))
}
