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
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ldpstream_connectors::kafka::transactions::{
    new_nonce, read_to_marker, KeyedPayload, TxnOffsets, TxnProducer, MARKER_KEY,
};
use ldpstream_connectors::kafka::{GroupMetadata, PartitionHandler, PartitionedSource, StartAt};
use ldpstream_connectors::position::{KafkaPosition, TopicPartition};
use ldpstream_connectors::{ConnectorError, Position, SourceBatch, SourceEvents};
use ldpstream_engine::stream::{fold_paned_batch, PanedDelta};
use ldpstream_engine::window::{Grouped, PaneStore, RestoredPanes};
use tracing::{debug, error, info, warn};

use super::stream::{lock, ScaleOutStream};
use super::topic_values::{
    decode_json, decode_tagged_pane, encode_json, encode_pane, Key, Pane, Progress, Resumed,
};
use crate::error::Error;
use crate::fold_counters::{export_fold, rejected_counts};
use crate::metrics::Metrics;
use ldpstream_jobs::Error as JobsError;

/// How long a take-over may spend reading a changelog partition back.
const RESTORE_TIMEOUT: Duration = Duration::from_secs(120);

/// One input partition this instance owns.
struct Owned {
    producer: TxnProducer,
    store: PaneStore,
    /// The offset after the last message taken, once one was.
    next: Option<i64>,
    /// The input offset the partition's last finished batch ends at (where it resumed,
    /// then where its last transaction ended).
    committed: Option<i64>,
    /// Panes changed since the last commit.
    dirty: BTreeSet<Pane>,
    /// Closed panes dropped from the store, still to be deleted from the changelog.
    dropped: Vec<i64>,
    ended: bool,
    /// Something to commit: reports, offsets or the end of input.
    changed: bool,
}

/// The fold's [`PartitionHandler`]: what this instance owns of the input.
struct FoldHandler {
    stream: Arc<ScaleOutStream>,
    owned: Mutex<BTreeMap<i32, Owned>>,
    /// A take-over that failed: the instance stops, and the group gives the partition to
    /// another.
    failure: Mutex<Option<Error>>,
    events: Arc<dyn SourceEvents>,
    assigned_once: AtomicBool,
}

impl FoldHandler {
    /// Fences the partition's previous owner, then rebuilds its store from the changelog.
    fn take_over(&self, partition: i32) -> Result<Owned, Error> {
        let s = &self.stream;
        let t0 = Instant::now();
        let producer = TxnProducer::open(&s.kafka, &format!("{}-fold-{partition}", s.app))?;
        let nonce = new_nonce(producer.id());
        producer.commit(
            &[s.to_changelog(partition, MARKER_KEY.to_vec(), Some(nonce.clone()))],
            None,
        )?;
        let messages = read_to_marker(&s.kafka, &s.changelog, partition, &nonce, RESTORE_TIMEOUT)?;
        let read = messages.len();
        let (mut parts, progress, skipped) = restore_partition(s, partition, messages)?;
        // The restored state is the changelog's last finished batch, which says itself
        // which input offset it ends at. The group's committed offset is not asked: Tansu
        // 0.6.0 does not always apply a transaction's offsets (benches/RESULTS.md).
        let committed = progress.next;
        // Tells the merge that values of the partition's unfinished batch it has read
        // will never be finished.
        let resumed = Resumed { committed };
        producer.commit(
            &[s.to_partials(
                Key::Resumed { partition }.encode(),
                Some(encode_json(&resumed)),
            )],
            None,
        )?;
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
            resumes_at_offset = ?committed,
            unfinished_values_skipped = skipped,
            secs = t0.elapsed().as_secs_f64(),
            "took the partition over: state restored from the changelog"
        );
        // Its first transaction publishes the whole state again: a kill between the
        // changelog's and the partials topic's messages of one transaction can leave the
        // partials topic without the batch restored here.
        let mut dirty: BTreeSet<Pane> = store.panes().keys().map(|&t| Pane::At(t)).collect();
        dirty.insert(Pane::Untimed);
        Ok(Owned {
            producer,
            store,
            next: None,
            committed,
            dirty,
            dropped: Vec::new(),
            ended: progress.ended,
            changed: true,
        })
    }

    /// Takes the newly assigned partitions over; each resumes exactly where the state it
    /// was restored to ends.
    fn take_over_all(&self, wanted: &[i32]) -> BTreeMap<i32, StartAt> {
        let mut owned = lock(&self.owned);
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
        owned
            .iter()
            .filter_map(|(p, o)| Some((*p, StartAt::Offset(o.committed?))))
            .collect()
    }
}

impl PartitionHandler for FoldHandler {
    fn assigned(&self, partitions: &[TopicPartition]) -> Vec<StartAt> {
        let wanted: Vec<i32> = partitions.iter().map(|(_, p)| *p).collect();
        let starts = self.take_over_all(&wanted);
        info!(stream = %self.stream.config.name, partitions = ?wanted, "input partitions assigned to this instance");
        if !self.assigned_once.swap(true, Ordering::AcqRel) {
            self.events.connected();
        }
        wanted
            .iter()
            .map(|p| starts.get(p).copied().unwrap_or(StartAt::Committed))
            .collect()
    }

    /// Reports folded since the last commit are dropped with the partition: its next owner
    /// reads them again from the committed offset.
    fn revoked(&self, partitions: &[TopicPartition], _read: &KafkaPosition) {
        let mut owned = lock(&self.owned);
        let gone: Vec<i32> = partitions.iter().map(|(_, p)| *p).collect();
        owned.retain(|p, _| !gone.contains(p));
        drop(owned);
        for p in &gone {
            self.events.partition_revoked(&self.stream.topic, *p);
        }
        info!(stream = %self.stream.config.name, partitions = ?gone, "input partitions revoked");
    }

    fn assign_failed(&self, error: ConnectorError) {
        lock(&self.failure).get_or_insert(Error::from(error));
    }
}

/// One changelog message of a partition's batch.
enum Change {
    Put(Pane, Grouped, Option<i64>),
    Delete(i64),
}

/// A partition's state from its changelog messages, in log order: the state the last
/// finished batch left, where a batch is the messages up to a progress, which each fold
/// transaction writes last. A batch a kill cut has no progress, and an earlier take-over's
/// marker says it never will. Whether a finished batch's transaction committed does not
/// matter: it holds the state after the first `progress.next` reports of the partition,
/// and the fold resumes right there. Returns the state, the progress, and how many values
/// were left out (an unfinished batch's, or tagged past their batch's end).
fn restore_partition(
    s: &ScaleOutStream,
    partition: i32,
    messages: Vec<KeyedPayload>,
) -> Result<(RestoredPanes, Progress, usize), Error> {
    let mut parts = RestoredPanes::default();
    let mut progress = Progress::default();
    let mut batch: Vec<Change> = Vec::new();
    let mut skipped = 0usize;
    for (key, payload) in messages {
        if key == MARKER_KEY {
            skipped += batch.len();
            batch.clear();
            continue;
        }
        let Some(key) = Key::decode(&key) else {
            continue;
        };
        match (key, payload) {
            (Key::Pane { partition: p, pane }, Some(bytes)) if p == partition => {
                let (g, tag) = decode_tagged_pane(&s.config, pane, &bytes)?;
                batch.push(Change::Put(pane, g, tag));
            }
            (
                Key::Pane {
                    partition: p,
                    pane: Pane::At(t),
                },
                None,
            ) if p == partition => batch.push(Change::Delete(t)),
            (Key::Progress { partition: p }, Some(bytes)) if p == partition => {
                let read: Progress = decode_json(&bytes, &s.config.name, "progress")?;
                skipped += apply_batch(&mut parts, batch.drain(..), read.next);
                progress = read;
            }
            _ => {}
        }
    }
    skipped += batch.len();
    parts.first_pane = parts.panes.keys().next().copied();
    Ok((parts, progress, skipped))
}

/// Applies a finished batch that ends at input offset `through`, in log order. A value
/// tagged past it is left out (a cut batch's, followed by a batch of an owner that
/// resumed from further back); an older one is still the state (after a compaction its
/// own batch's progress is gone). Returns how many were left out.
fn apply_batch(
    parts: &mut RestoredPanes,
    batch: impl Iterator<Item = Change>,
    through: Option<i64>,
) -> usize {
    let mut skipped = 0;
    for change in batch {
        match change {
            Change::Put(pane, g, tag) => {
                let past = match (tag, through) {
                    (Some(t), Some(end)) => t > end,
                    (Some(_), None) => true,
                    (None, _) => false,
                };
                if past {
                    skipped += 1;
                    continue;
                }
                match pane {
                    Pane::At(t) => {
                        parts.panes.insert(t, g);
                    }
                    Pane::Untimed => parts.retired = g,
                }
            }
            Change::Delete(t) => {
                parts.panes.remove(&t);
            }
        }
    }
    skipped
}

/// Folds a batch of the partition's reports into its store, and takes its position: the
/// offset its next transaction commits, and the end of its input.
fn fold_batch(
    s: &ScaleOutStream,
    partition: i32,
    o: &mut Owned,
    batch: SourceBatch,
    metrics: &Metrics,
) -> Result<(), Error> {
    o.changed = true;
    let Position::Kafka(position) = batch.position else {
        return Ok(());
    };
    let tp = (s.topic.clone(), partition);
    if let Some(&next) = position.next.get(&tp) {
        o.next = Some(next as i64);
    }
    let batch = batch.batch;
    if batch.num_rows() > 0 {
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
        // Exported unconditionally: private tests, whose counts would leak, are refused in
        // scale-out mode.
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
    if position.ended.contains(&tp) {
        o.ended = true;
        o.store.finish();
        info!(stream = %s.config.name, partition, "end marker: the partition's input ended");
    }
    Ok(())
}

/// Publishes the partition's changed panes and progress and commits its offset, in one
/// transaction; then forgets the panes its watermark closed (they live on in the
/// partials topic, where the merge needs them).
fn commit_partition(
    s: &ScaleOutStream,
    partition: i32,
    o: &mut Owned,
    group: &GroupMetadata,
) -> Result<(), Error> {
    if !o.changed && o.dropped.is_empty() {
        return Ok(());
    }
    let mut messages = Vec::new();
    let both = |messages: &mut Vec<_>, key: Key, payload: Option<Vec<u8>>| {
        messages.push(s.to_changelog(partition, key.encode(), payload.clone()));
        messages.push(s.to_partials(key.encode(), payload));
    };
    // Every value says which input offset its transaction commits.
    let tag = o.next.or(o.committed);
    for pane in &o.dirty {
        let grouped = match pane {
            Pane::Untimed => Some(o.store.retired()),
            Pane::At(t) => o.store.panes().get(t),
        };
        if let Some(g) = grouped {
            let tagged = tag.map(|t| (s.topic.as_str(), partition, t));
            both(
                &mut messages,
                Key::Pane {
                    partition,
                    pane: *pane,
                },
                Some(encode_pane(&s.config, *pane, g, tagged)),
            );
        }
    }
    for t in &o.dropped {
        let pane = Key::Pane {
            partition,
            pane: Pane::At(*t),
        };
        messages.push(s.to_changelog(partition, pane.encode(), None));
    }
    // Last: the progress ends the batch; a reader uses none of it before (restore_partition,
    // PartialsView).
    let progress = Progress {
        max_event: o.store.max_event(),
        late: o.store.late(),
        ended: o.ended,
        next: tag,
    };
    both(
        &mut messages,
        Key::Progress { partition },
        Some(encode_json(&progress)),
    );
    let offsets = o.next.map(|next| TxnOffsets {
        group,
        topic: &s.topic,
        partition,
        next,
    });
    o.producer.commit(&messages, offsets)?;
    debug!(stream = %s.config.name, partition, messages = messages.len(), next = ?o.next, "partition committed");
    o.dirty.clear();
    o.changed = false;
    o.committed = tag;
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
    let handler = FoldHandler {
        stream: s.clone(),
        owned: Mutex::new(BTreeMap::new()),
        failure: Mutex::new(None),
        events: events.clone(),
        assigned_once: AtomicBool::new(false),
    };
    let mut source =
        PartitionedSource::subscribe(&s.config, &s.kafka, &s.mechanism, &s.topic, handler, events)?;
    info!(stream = %s.config.name, group = %s.kafka.group_id, topic = %s.topic, "scale-out: joining the consumer group");
    let interval = s.scale_out.commit_interval.as_std();
    let mut last_commit = Instant::now();
    loop {
        if let Some(e) = lock(&source.handler().failure).take() {
            return Err(e);
        }
        let stopping = stop.load(Ordering::Acquire);
        if stopping || last_commit.elapsed() >= interval {
            commit_all(&s, &source, &metrics)?;
            last_commit = Instant::now();
            source.serve_dead_letters(stopping);
        }
        if stopping {
            return Ok(());
        }
        let Some((partition, batch)) = source.next(Duration::from_millis(50))? else {
            continue;
        };
        if let Some(o) = lock(&source.handler().owned).get_mut(&partition) {
            fold_batch(&s, partition, o, batch, &metrics)?;
        }
    }
}

fn commit_all(
    s: &ScaleOutStream,
    source: &PartitionedSource<FoldHandler>,
    metrics: &Metrics,
) -> Result<(), Error> {
    let Some(group) = source.group_metadata() else {
        return Ok(());
    };
    let pending = source.flush()?;
    let mut owned = lock(&source.handler().owned);
    for (p, batch) in pending {
        if let Some(o) = owned.get_mut(&p) {
            fold_batch(s, p, o, batch, metrics)?;
        }
    }
    let mut failed = Vec::new();
    for (p, o) in owned.iter_mut() {
        match commit_partition(s, *p, o, &group) {
            Ok(()) => {}
            Err(Error::Jobs(JobsError::Connector(ConnectorError::Fenced { .. }))) => {
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
        let restored = source.handler().take_over(p)?;
        let start = restored
            .committed
            .map_or(StartAt::Beginning, StartAt::Offset);
        owned.insert(p, restored);
        source.rewind(p, start)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scale_out::stream::tests::{pane, stream};

    fn value(s: &ScaleOutStream, t: i64, n: usize, tag: i64) -> KeyedPayload {
        let key = Key::Pane {
            partition: 1,
            pane: Pane::At(t),
        };
        let g = pane(s, 0, n);
        (
            key.encode(),
            Some(encode_pane(
                &s.config,
                Pane::At(t),
                &g,
                Some(("in", 1, tag)),
            )),
        )
    }

    fn progress(max_event: i64, tag: i64) -> KeyedPayload {
        let p = Progress {
            max_event: Some(max_event),
            late: 0,
            ended: false,
            next: Some(tag),
        };
        (
            Key::Progress { partition: 1 }.encode(),
            Some(encode_json(&p)),
        )
    }

    fn n(parts: &RestoredPanes, t: i64) -> u64 {
        parts.panes[&t].values().map(|k| k.n()).sum()
    }

    fn tombstone(t: i64) -> KeyedPayload {
        let key = Key::Pane {
            partition: 1,
            pane: Pane::At(t),
        };
        (key.encode(), None)
    }

    fn restored(s: &ScaleOutStream, messages: &[KeyedPayload]) -> (RestoredPanes, Progress, usize) {
        restore_partition(s, 1, messages.to_vec()).unwrap()
    }

    /// Issue 34, items 9-10: Tansu 0.6.0 shows aborted transactions and does not always
    /// report a transaction's committed offsets, so the restore takes the state the last
    /// finished batch left (it says which offset it ends at), never a cut batch's values.
    #[test]
    fn the_restore_takes_the_last_finished_batch_and_nothing_of_a_cut_one() {
        let s = stream();
        let mut messages = vec![
            value(&s, 0, 3, 100),
            progress(10, 100),
            // Through offset 250: the pane grew, a second one appeared.
            value(&s, 0, 5, 250),
            value(&s, 60_000, 2, 250),
            progress(60_010, 250),
            // The owner is killed mid-commit: no progress ends this batch.
            value(&s, 0, 9, 400),
            // Another partition's key and an unknown key are not this partition's state.
            (
                Key::Progress { partition: 0 }.encode(),
                Some(b"not json".to_vec()),
            ),
            (b"something/else".to_vec(), Some(b"x".to_vec())),
        ];
        let (parts, read, skipped) = restored(&s, &messages);
        assert_eq!((n(&parts, 0), n(&parts, 60_000)), (5, 2));
        assert_eq!(
            (read.max_event, read.next, skipped),
            (Some(60_010), Some(250), 1)
        );
        // Finished, the batch is the state (whether its transaction committed or not: it
        // holds the partition's first 400 reports, and the fold resumes at 400).
        let mut finished = messages.clone();
        finished.push(progress(70_000, 400));
        let (parts, read, skipped) = restored(&s, &finished);
        assert_eq!(n(&parts, 0), 9);
        assert_eq!(
            (read.max_event, read.next, skipped),
            (Some(70_000), Some(400), 0)
        );
        // The next owner's marker, then its own batch from 250: the cut value never joins
        // a later batch.
        messages.push((MARKER_KEY.to_vec(), Some(b"earlier owner".to_vec())));
        messages.push(value(&s, 0, 7, 300));
        messages.push(progress(60_020, 300));
        let (parts, read, skipped) = restored(&s, &messages);
        assert_eq!((n(&parts, 0), read.next, skipped), (7, Some(300), 1));
        // Without the marker (compacted away), a value tagged past its batch is left out.
        let unmarked = vec![
            value(&s, 0, 9, 400),
            value(&s, 0, 6, 300),
            progress(60_020, 300),
        ];
        let (parts, _, skipped) = restored(&s, &unmarked);
        assert_eq!((n(&parts, 0), skipped), (6, 1));
        // A tombstone counts once its batch is finished.
        let dropped = vec![value(&s, 0, 3, 100), tombstone(0), progress(10, 100)];
        assert!(restored(&s, &dropped).0.panes.is_empty());
        let cut = vec![value(&s, 0, 3, 100), progress(10, 100), tombstone(0)];
        assert_eq!(n(&restored(&s, &cut).0, 0), 3);
        // Nothing consumed yet: nothing tagged is state.
        let (parts, read, skipped) = restored(&s, &[value(&s, 0, 3, 100)]);
        assert!(parts.panes.is_empty());
        assert_eq!((read.next, skipped), (None, 1));
    }
}
