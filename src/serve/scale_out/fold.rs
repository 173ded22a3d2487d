//! Stage 1 of the scale-out mode: this instance's share of the input partitions, each
//! folded into its own pane store. Every `commit_interval`, per owned partition and in one
//! Kafka transaction, the panes that changed go to the changelog (the partition's own
//! partition of it) and to the partials topic, with the partition's progress, and the
//! consumed offsets are committed. A partition the group assigns here, from any machine,
//! is restored from its changelog partition before any of its messages is read, and read
//! from the offset its last transaction committed: nothing is lost or counted twice.
//!
//! Each input partition has its own `transactional.id`: the instance that takes a
//! partition over fences the one that had it, whose open transaction is aborted then,
//! not at its timeout (the Kafka Streams "exactly_once" pattern).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ldpstream_connectors::kafka::dead_letter::DeadLetters;
use ldpstream_connectors::kafka::transactions::{
    consumer_config, new_nonce, read_to_marker, Outgoing, TxnProducer, MARKER_KEY,
};
use ldpstream_connectors::kafka::{Decoded, MessageDecoder};
use ldpstream_connectors::{ConnectorError, SourceEvents};
use ldpstream_engine::stream::{fold_paned_batch, PanedDelta};
use ldpstream_engine::window::{PaneStore, RestoredPanes};
use rdkafka::client::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::message::Message;
use rdkafka::topic_partition_list::TopicPartitionList;
use rdkafka::types::RDKafkaRespErr;
use rdkafka::Offset;
use tracing::{debug, error, info, warn};

use super::partial::{decode_json, decode_pane, encode_json, encode_pane, Key, Pane, Progress};
use super::stream::ScaleOutStream;
use crate::error::Error;
use crate::serve::fold_counters::{export_fold, rejected_counts};
use crate::serve::metrics::Metrics;

/// How long a take-over may spend reading a changelog partition back.
const RESTORE_TIMEOUT: Duration = Duration::from_secs(120);

/// One input partition this instance owns.
struct Owned {
    producer: TxnProducer,
    store: PaneStore,
    decoder: MessageDecoder,
    /// The offset after the last message taken, once one was.
    next: Option<i64>,
    /// Panes changed since the last commit.
    dirty: BTreeSet<Pane>,
    /// Closed panes dropped from the store, still to be deleted from the changelog.
    dropped: Vec<i64>,
    ended: bool,
    /// Something to commit: reports, offsets or the end of input.
    changed: bool,
}

struct FoldContext {
    stream: Arc<ScaleOutStream>,
    owned: Mutex<BTreeMap<i32, Owned>>,
    /// A take-over that failed: the instance stops, and the group gives the partition to
    /// another.
    failure: Mutex<Option<Error>>,
    events: Arc<dyn SourceEvents>,
    assigned_once: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl FoldContext {
    /// Fences the partition's previous owner, then rebuilds its store from the changelog.
    fn take_over(&self, partition: i32) -> Result<Owned, Error> {
        let s = &self.stream;
        let t0 = Instant::now();
        let producer = TxnProducer::open(&s.kafka, &format!("{}-fold-{partition}", s.app))?;
        let nonce = new_nonce(producer.id());
        producer.commit(
            &[Outgoing {
                topic: s.changelog.clone(),
                partition: Some(partition),
                key: MARKER_KEY.to_vec(),
                payload: Some(nonce.clone()),
            }],
            None,
        )?;
        let messages = read_to_marker(&s.kafka, &s.changelog, partition, &nonce, RESTORE_TIMEOUT)?;
        let read = messages.len();
        let mut latest: BTreeMap<Key, Vec<u8>> = BTreeMap::new();
        for (key, payload) in messages {
            let Some(key) = Key::decode(&key) else {
                continue;
            };
            match payload {
                Some(p) => latest.insert(key, p),
                None => latest.remove(&key),
            };
        }
        let mut parts = RestoredPanes::default();
        let mut progress = Progress::default();
        for (key, payload) in &latest {
            match key {
                Key::Pane {
                    partition: p,
                    pane: Pane::At(t),
                } if *p == partition => {
                    let g = decode_pane(&s.config, Pane::At(*t), payload)?;
                    parts.first_pane = Some(parts.first_pane.map_or(*t, |f: i64| f.min(*t)));
                    parts.panes.insert(*t, g);
                }
                Key::Pane {
                    partition: p,
                    pane: Pane::Untimed,
                } if *p == partition => {
                    parts.retired = decode_pane(&s.config, Pane::Untimed, payload)?;
                }
                Key::Progress { partition: p } if *p == partition => {
                    progress = decode_json(payload, &s.config.name, "progress")?;
                }
                _ => {}
            }
        }
        parts.max_event = progress.max_event;
        parts.late = progress.late;
        let mut store = PaneStore::restore(s.width, s.lateness, s.config.max_groups, parts)?;
        if progress.ended {
            store.finish();
        }
        info!(
            stream = %s.config.name,
            partition,
            changelog_messages = read,
            panes = store.panes().len(),
            ended = progress.ended,
            secs = t0.elapsed().as_secs_f64(),
            "took the partition over: state restored from the changelog"
        );
        Ok(Owned {
            producer,
            store,
            decoder: MessageDecoder::new(&s.config, &s.mechanism, s.kafka.format)
                .with_event_time(s.kafka.event_time),
            next: None,
            dirty: BTreeSet::new(),
            dropped: Vec::new(),
            ended: progress.ended,
            changed: false,
        })
    }

    fn assign(&self, consumer: &BaseConsumer<Self>, tpl: &TopicPartitionList) {
        let wanted: Vec<i32> = tpl.elements().iter().map(|e| e.partition()).collect();
        let mut owned = lock(&self.owned);
        owned.retain(|p, _| wanted.contains(p));
        let new: Vec<i32> = wanted
            .iter()
            .filter(|p| !owned.contains_key(p))
            .copied()
            .collect();
        // In parallel: a take-over mostly waits on the broker (fencing, the marker's
        // round trip), and the group waits for the slowest instance's callback.
        let restored: Vec<(i32, Result<Owned, Error>)> = std::thread::scope(|scope| {
            let handles: Vec<_> = new
                .iter()
                .map(|&p| (p, scope.spawn(move || self.take_over(p))))
                .collect();
            handles
                .into_iter()
                .map(|(p, h)| {
                    let result = h.join().unwrap_or_else(|_| {
                        Err(Error::ScaleOut {
                            stream: self.stream.config.name.clone(),
                            message: format!("taking partition {p} over panicked"),
                        })
                    });
                    (p, result)
                })
                .collect()
        });
        for (p, result) in restored {
            match result {
                Ok(o) => {
                    owned.insert(p, o);
                }
                Err(e) => {
                    error!(stream = %self.stream.config.name, partition = p, error = %e, "taking the partition over failed");
                    lock(&self.failure).get_or_insert(e);
                }
            }
        }
        drop(owned);
        // Offsets unset: each partition resumes at the offset its last transaction
        // committed, which the fencing above made final.
        if let Err(e) = consumer.assign(tpl) {
            lock(&self.failure).get_or_insert(Error::Connector(ConnectorError::Kafka {
                context: "assigning the partitions".into(),
                source: e,
            }));
        }
        info!(stream = %self.stream.config.name, partitions = ?wanted, "input partitions assigned to this instance");
        if !self.assigned_once.swap(true, Ordering::AcqRel) {
            self.events.connected();
        }
    }

    /// Reports folded since the last commit are dropped with the partition: its next owner
    /// reads them again from the committed offset.
    fn revoke(&self, consumer: &BaseConsumer<Self>) {
        let gone: Vec<i32> = std::mem::take(&mut *lock(&self.owned))
            .into_keys()
            .collect();
        if let Err(e) = consumer.unassign() {
            warn!(stream = %self.stream.config.name, error = %e, "unassign failed");
        }
        for p in &gone {
            self.events.partition_revoked(&self.stream.topic, *p);
        }
        info!(stream = %self.stream.config.name, partitions = ?gone, "input partitions revoked");
    }
}

impl ClientContext for FoldContext {}

impl ConsumerContext for FoldContext {
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => self.assign(consumer, tpl),
            _ => self.revoke(consumer),
        }
    }
}

/// Folds what the partition's decoder holds into its store.
fn fold_pending(
    s: &ScaleOutStream,
    o: &mut Owned,
    metrics: &Metrics,
    exported: bool,
) -> Result<(), Error> {
    if o.decoder.rows() == 0 {
        return Ok(());
    }
    let batch = o.decoder.finish()?;
    let mut delta = PanedDelta::default();
    let origin = format!("stream {}", s.config.name);
    let store = &o.store;
    fold_paned_batch(
        &batch,
        &s.layout,
        &origin,
        Some(s.layout.ts.as_str()),
        &|t| store.open_pane_of(t),
        &mut delta,
    )?;
    o.dirty.extend(delta.panes.keys().map(|&t| Pane::At(t)));
    if !delta.untimed.is_empty() {
        o.dirty.insert(Pane::Untimed);
    }
    let rejected = rejected_counts(&delta);
    let late = delta.late;
    let before = o.store.overflowed_reports();
    delta.apply(&mut o.store)?;
    if exported {
        export_fold(
            metrics,
            &s.config.name,
            batch.num_rows() as u64,
            late,
            &rejected,
            o.store.groups_kept(),
            o.store.overflowed_reports() - before,
        );
    }
    o.changed = true;
    Ok(())
}

/// Publishes the partition's changed panes and progress and commits its offset, in one
/// transaction; then forgets the panes its watermark closed (they live on in the
/// partials topic, where the merge needs them).
fn commit_partition(
    s: &ScaleOutStream,
    partition: i32,
    o: &mut Owned,
    group: &rdkafka::consumer::ConsumerGroupMetadata,
) -> Result<(), Error> {
    if !o.changed && o.dropped.is_empty() {
        return Ok(());
    }
    let mut messages = Vec::new();
    let mut both = |key: Key, payload: Option<Vec<u8>>| {
        messages.push(Outgoing {
            topic: s.changelog.clone(),
            partition: Some(partition),
            key: key.encode(),
            payload: payload.clone(),
        });
        messages.push(Outgoing {
            topic: s.partials.clone(),
            partition: Some(0),
            key: key.encode(),
            payload,
        });
    };
    for pane in &o.dirty {
        let grouped = match pane {
            Pane::Untimed => Some(o.store.retired()),
            Pane::At(t) => o.store.panes().get(t),
        };
        if let Some(g) = grouped {
            both(
                Key::Pane {
                    partition,
                    pane: *pane,
                },
                Some(encode_pane(&s.config, *pane, g)),
            );
        }
    }
    let progress = Progress {
        max_event: o.store.max_event(),
        late: o.store.late(),
        ended: o.ended,
    };
    both(Key::Progress { partition }, Some(encode_json(&progress)));
    for t in &o.dropped {
        messages.push(Outgoing {
            topic: s.changelog.clone(),
            partition: Some(partition),
            key: Key::Pane {
                partition,
                pane: Pane::At(*t),
            }
            .encode(),
            payload: None,
        });
    }
    let offsets = match o.next {
        Some(next) => {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset(&s.topic, partition, Offset::Offset(next))
                .map_err(|e| ConnectorError::Kafka {
                    context: "offsets to commit".into(),
                    source: e,
                })?;
            Some(tpl)
        }
        None => None,
    };
    o.producer
        .commit(&messages, offsets.as_ref().map(|tpl| (tpl, group)))?;
    debug!(stream = %s.config.name, partition, messages = messages.len(), next = ?o.next, "partition committed");
    o.dirty.clear();
    o.dropped.clear();
    o.changed = false;
    o.dropped = o.store.take_closed();
    Ok(())
}

/// Runs stage 1 until `stop`, then commits what was folded. A partition whose transaction
/// fails is restored from its last commit and read again from there; an instance that
/// cannot take a partition over, or finds itself fenced, stops with the error.
pub(super) fn run(
    s: Arc<ScaleOutStream>,
    stop: Arc<AtomicBool>,
    metrics: Metrics,
    events: Arc<dyn SourceEvents>,
) -> Result<(), Error> {
    let context = FoldContext {
        stream: s.clone(),
        owned: Mutex::new(BTreeMap::new()),
        failure: Mutex::new(None),
        events: events.clone(),
        assigned_once: AtomicBool::new(false),
    };
    let consumer: BaseConsumer<FoldContext> = consumer_config(&s.kafka, &s.kafka.group_id)?
        .create_with_context(context)
        .map_err(|e| ConnectorError::Kafka {
            context: "stage-1 consumer".into(),
            source: e,
        })?;
    consumer
        .subscribe(&[s.topic.as_str()])
        .map_err(|e| ConnectorError::Kafka {
            context: format!("subscribing to {:?}", s.topic),
            source: e,
        })?;
    info!(stream = %s.config.name, group = %s.kafka.group_id, topic = %s.topic, "scale-out: joining the consumer group");
    let exported = !s.config.has_private_tests();
    // As in the single-instance source. Not part of the transaction: after a take-over a
    // re-read message can be dead-lettered a second time.
    let mut dead_letters = s
        .kafka
        .dead_letter_topic
        .as_deref()
        .map(|t| DeadLetters::open(&s.kafka, t))
        .transpose()?;
    let interval = s.scale_out.commit_interval.as_std();
    let mut last_commit = Instant::now();
    loop {
        if let Some(e) = lock(&consumer.context().failure).take() {
            return Err(e);
        }
        let stopping = stop.load(Ordering::Acquire);
        if stopping || last_commit.elapsed() >= interval {
            commit_all(&s, &consumer, &metrics, exported)?;
            last_commit = Instant::now();
            if let Some(dl) = &mut dead_letters {
                let failed = if stopping { dl.flush() } else { dl.poll() };
                events.dead_letters_failed(failed);
            }
        }
        if stopping {
            return Ok(());
        }
        let Some(message) = consumer.poll(Duration::from_millis(50)) else {
            continue;
        };
        let message = match message {
            Ok(m) => m,
            Err(e) => {
                warn!(stream = %s.config.name, error = %e, "Kafka consumer error");
                continue;
            }
        };
        let mut owned = lock(&consumer.context().owned);
        let Some(o) = owned.get_mut(&message.partition()) else {
            continue;
        };
        o.next = Some(message.offset() + 1);
        o.changed = true;
        match o.decoder.push_with_time(
            message.payload().unwrap_or_default(),
            message.timestamp().to_millis(),
        ) {
            Ok(Decoded::Report) => {}
            Ok(Decoded::Invalid(reason)) => {
                // Folded anyway: the fold rejects it and counts it in the record by reason.
                if let Some(dl) = &dead_letters {
                    dl.send_message(&message, Some(&s.topic), reason.name());
                }
            }
            Ok(Decoded::EndMarker) if s.kafka.end_marker => {
                fold_pending(&s, o, &metrics, exported)?;
                o.ended = true;
                o.store.finish();
                info!(stream = %s.config.name, partition = message.partition(), "end marker: the partition's input ended");
            }
            Ok(Decoded::EndMarker) => {}
            Err(reason) => {
                events.bad_message();
                if let Some(dl) = &dead_letters {
                    dl.send_message(&message, Some(&s.topic), &reason);
                }
            }
        }
        if o.decoder.rows() >= s.config.max_batch_rows {
            fold_pending(&s, o, &metrics, exported)?;
        }
    }
}

fn commit_all(
    s: &ScaleOutStream,
    consumer: &BaseConsumer<FoldContext>,
    metrics: &Metrics,
    exported: bool,
) -> Result<(), Error> {
    let Some(group) = consumer.group_metadata() else {
        return Ok(());
    };
    let mut owned = lock(&consumer.context().owned);
    let mut failed = Vec::new();
    for (p, o) in owned.iter_mut() {
        fold_pending(s, o, metrics, exported)?;
        match commit_partition(s, *p, o, &group) {
            Ok(()) => {}
            Err(Error::Connector(ConnectorError::Fenced { .. })) => {
                return Err(Error::ScaleOut {
                    stream: s.config.name.clone(),
                    message: format!(
                        "partition {p} was taken over by another instance while this one still \
                         read it (a pause longer than the session timeout?); stopping rather \
                         than counting its reports twice"
                    ),
                });
            }
            Err(e) => {
                warn!(stream = %s.config.name, partition = p, error = %e, "transaction failed (aborted); restoring the partition from its last commit");
                failed.push(*p);
            }
        }
    }
    // What the aborted transaction held is read again: the partition's state from the
    // changelog, its messages from the committed offset.
    for p in failed {
        let restored = consumer.context().take_over(p)?;
        owned.insert(p, restored);
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(&s.topic, p);
        let committed = consumer
            .committed_offsets(tpl, Duration::from_secs(30))
            .map_err(|e| ConnectorError::Kafka {
                context: format!("committed offset of {:?}/{p}", s.topic),
                source: e,
            })?;
        let offset = committed
            .find_partition(&s.topic, p)
            .map(|e| e.offset())
            .filter(|o| matches!(o, Offset::Offset(_)))
            .unwrap_or(Offset::Beginning);
        consumer
            .seek(&s.topic, p, offset, Duration::from_secs(30))
            .map_err(|e| ConnectorError::Kafka {
                context: format!("seeking {:?}/{p} back to its last commit", s.topic),
                source: e,
            })?;
    }
    Ok(())
}
