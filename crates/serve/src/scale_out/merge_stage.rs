//! Stage 2 of the scale-out mode: the one instance that owns the partials topic (its single
//! partition, through the consumer group `<group_id>-merge`) keeps the newest partial of
//! every (input partition, pane) from a finished fold batch ([`PartialsView`]), merges
//! them exactly, and runs the tests. A window is final once every input partition's
//! watermark has passed its end; its final records go to `results_topic` in the same transaction as the
//! emitted-through marker (written to the partials topic itself) and the merge group's
//! offset on the partials topic. A new owner reads the partials topic from its start up
//! to a marker of its own (after fencing the previous owner), so it knows what was
//! emitted and emits each final record exactly once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ldpstream_connectors::kafka::committed::committed_offset;
use ldpstream_connectors::kafka::transactions::{
    new_nonce, Outgoing, PartitionTail, TxnOffsets, TxnProducer, MARKER_KEY,
};
use ldpstream_connectors::kafka::{
    record_key, GroupConsumer, Isolation, PartitionHandler, StartAt,
};
use ldpstream_connectors::position::{KafkaPosition, TopicPartition};
use ldpstream_connectors::ConnectorError;
use ldpstream_engine::record::TestRecord;
use ldpstream_engine::stream::{evaluate_snapshot, take_due, Private, SequentialLatches};
use ldpstream_jobs::parallel_groups::RayonGroups;
use tracing::{error, info, warn};

use super::stream::{lock, ScaleOutStream};
use super::topic_values::{encode_json, encode_pane, Emitted, Key, Pane};
use super::view::{OwnValues, PartialsView};
use crate::error::Error;
use crate::shared::Shared;

/// The merge's view of the partials topic, while this instance owns it.
struct MergeState {
    producer: TxnProducer,
    /// The marker this owner wrote; until it is read back, the view may be missing
    /// emitted markers, so nothing is emitted.
    nonce: Vec<u8>,
    caught_up: bool,
    since: Instant,
    /// The merge group's committed offset on the partials topic once the previous owner
    /// was fenced: its emitted and retired values tagged above it did not commit.
    committed: Option<i64>,
    /// The partials-topic offset after the last message applied.
    read: Option<i64>,
    /// The tag of this owner's last transaction, committed or not (at first: `committed`).
    last_tag: Option<i64>,
    view: PartialsView,
}

/// The merge's [`PartitionHandler`]: whether this instance owns the partials topic.
struct MergeHandler {
    stream: Arc<ScaleOutStream>,
    state: Mutex<Option<MergeState>>,
    failure: Mutex<Option<Error>>,
}

impl MergeHandler {
    fn take_over(&self) -> Result<MergeState, Error> {
        let s = &self.stream;
        let group = merge_group(s);
        let producer = TxnProducer::open(&s.kafka, &group)?;
        let nonce = new_nonce(producer.id());
        producer.commit(
            &[s.to_partials(MARKER_KEY.to_vec(), Some(nonce.clone()))],
            None,
        )?;
        // After the fencing above no merge transaction is open: this offset is final.
        let committed = committed_offset(&s.kafka, &group, &s.partials, 0)?;
        Ok(MergeState {
            producer,
            nonce,
            caught_up: false,
            since: Instant::now(),
            committed,
            read: None,
            last_tag: committed,
            view: PartialsView::default(),
        })
    }
}

/// The merge's consumer group, which is also its `transactional.id`.
fn merge_group(s: &ScaleOutStream) -> String {
    format!("{}-merge", s.app)
}

impl PartitionHandler for MergeHandler {
    fn assigned(&self, partitions: &[TopicPartition]) -> Vec<StartAt> {
        let name = &self.stream.config.name;
        // Nothing (more) to own: under the eager protocol the revocation before this
        // already dropped the state; under the cooperative one an owner keeps its own.
        if partitions.is_empty() {
            return Vec::new();
        }
        match self.take_over() {
            Ok(state) => *lock(&self.state) = Some(state),
            Err(e) => {
                error!(stream = %name, error = %e, "merge: taking the partials topic over failed");
                lock(&self.failure).get_or_insert(e);
            }
        }
        info!(stream = %name, "merge: this instance owns the partials topic; reading it back");
        // The whole compacted topic, every time: the merge's state is all of it.
        vec![StartAt::Beginning; partitions.len()]
    }

    fn revoked(&self, _partitions: &[TopicPartition], _read: &KafkaPosition) {
        *lock(&self.state) = None;
        info!(stream = %self.stream.config.name, "merge: the partials topic moved to another instance");
    }

    fn assign_failed(&self, error: ConnectorError) {
        lock(&self.failure).get_or_insert(Error::from(error));
    }
}

impl MergeState {
    fn apply(
        &mut self,
        s: &ScaleOutStream,
        key: &[u8],
        payload: Option<&[u8]>,
        offset: i64,
    ) -> Result<(), Error> {
        self.read = Some(offset.saturating_add(1));
        if key == MARKER_KEY {
            if payload == Some(self.nonce.as_slice()) && !self.caught_up {
                self.caught_up = true;
                info!(
                    stream = %s.config.name,
                    partials = self.view.panes.len(),
                    emitted_through = ?self.view.emitted.map(|e| e.finalized_through),
                    secs = self.since.elapsed().as_secs_f64(),
                    "merge: partials read back; emitting from here"
                );
            }
            return Ok(());
        }
        let own = if self.caught_up {
            OwnValues::Ignore
        } else {
            OwnValues::CommittedThrough(self.committed)
        };
        self.view.apply(s, key, payload, own)
    }

    /// Every input partition has ended and the final records of every window are out.
    fn ended(&self) -> bool {
        self.caught_up
            && (self.view.done
                || self
                    .view
                    .emitted
                    .is_some_and(|e| e.finalized_through == i64::MAX))
    }
}

/// Runs stage 2 until `stop`; `on_end` is called once, when every input partition has
/// ended and the last final records are out (seen by the owner, or by the instance that
/// takes the merge over after that).
pub(super) fn run(
    s: Arc<ScaleOutStream>,
    stop: Arc<AtomicBool>,
    shared: Arc<Shared>,
    snapshot_interval: Duration,
    on_end: impl Fn(),
) -> Result<(), Error> {
    let handler = MergeHandler {
        stream: s.clone(),
        state: Mutex::new(None),
        failure: Mutex::new(None),
    };
    // Uncommitted too: the view tells committed values from the others by their tags, so
    // an open transaction need not hold the read up. Under read_committed a new owner
    // once never reached its marker on Tansu 0.6.0 (over 2 min after a fold-only kill,
    // scripts/scale_out_stress.sh): the last stable offset stayed behind some
    // transaction.
    let consumer = GroupConsumer::subscribe(
        &s.kafka,
        (&s.config.name, &merge_group(&s), &s.partials),
        Isolation::Uncommitted,
        handler,
        None,
    )?;
    // Every instance watches the partials topic for the owner's `done`, and leaves on it:
    // leaving on taking the merge over after the owner left needs a rebalance, which on
    // Tansu 0.6.0 sometimes never assigns the topic again (2 of 20 stress runs kept
    // running, benches/RESULTS.md).
    let done_watch = PartitionTail::open(&s.kafka, &s.partials, 0)?;
    let mut ownership = Ownership::new(&s, &shared);
    let mut latches = SequentialLatches::default();
    let mut last_round = Instant::now();
    let mut ended = false;
    while !stop.load(Ordering::Acquire) {
        if let Some(e) = lock(&consumer.handler().failure).take() {
            return Err(e);
        }
        if last_round.elapsed() >= snapshot_interval {
            last_round = Instant::now();
            let merge = Merge {
                s: &s,
                consumer: &consumer,
                shared: &shared,
            };
            if merge.round(&mut latches)? && !ended {
                ended = true;
                info!(stream = %s.config.name, "merge: every input partition ended and every final record is out; stopping (end_marker)");
                on_end();
            }
        }
        if !ended && saw_done(&s, &done_watch) {
            ended = true;
            info!(stream = %s.config.name, "merge: the owner says every final record is out; stopping (end_marker)");
            on_end();
        }
        ownership.observe(lock(&consumer.handler().state).is_some());
        let Some(message) = consumer.next_message(Duration::from_millis(50)) else {
            continue;
        };
        let mut state = lock(&consumer.handler().state);
        if let Some(state) = state.as_mut() {
            state.apply(&s, message.key(), message.payload(), message.offset())?;
        }
    }
    Ok(())
}

/// Whether the messages of the partials topic read since the last call include the
/// owner's `done`. Reads what has arrived, without waiting, at most a bounded number.
fn saw_done(s: &ScaleOutStream, watch: &PartitionTail) -> bool {
    let done = Key::Done.encode();
    for _ in 0..10_000 {
        match watch.next(Duration::ZERO) {
            Ok(Some((key, _))) if key == done => return true,
            Ok(Some(_)) => {}
            Ok(None) => return false,
            Err(e) => {
                warn!(stream = %s.config.name, error = %e, "merge: reading the partials topic for the end failed; trying again");
                return false;
            }
        }
    }
    false
}

/// Who owns the merge, as the gauge, the log and the HTTP API say.
struct Ownership<'a> {
    s: &'a ScaleOutStream,
    shared: &'a Shared,
    owning: bool,
}

impl<'a> Ownership<'a> {
    fn new(s: &'a ScaleOutStream, shared: &'a Shared) -> Self {
        shared
            .metrics
            .scale_out_merge_owner
            .with_label_values(&[&s.config.name])
            .set(0);
        Ownership {
            s,
            shared,
            owning: false,
        }
    }

    /// Records a change of owner. A former owner withdraws its records from
    /// `/api/v1/results`: they are provisional ones the new owner supersedes, and would
    /// otherwise be served stale for ever.
    fn observe(&mut self, owning: bool) {
        if owning == self.owning {
            return;
        }
        self.owning = owning;
        let name = &self.s.config.name;
        self.shared
            .metrics
            .scale_out_merge_owner
            .with_label_values(&[name])
            .set(i64::from(owning));
        if owning {
            info!(stream = %name, "merge owner: this instance took the merge over");
        } else {
            self.shared
                .results
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|(stream, _, _), _| stream != name);
            info!(stream = %name, "merge owner: this instance lost the merge; its records are withdrawn from /api/v1/results");
        }
    }
}

/// What a merge round needs besides the state.
struct Merge<'a> {
    s: &'a ScaleOutStream,
    consumer: &'a GroupConsumer<MergeHandler>,
    shared: &'a Shared,
}

impl Merge<'_> {
    /// Evaluates every due window; the final records are emitted, once, in a transaction
    /// with the new emitted-through marker. A failed transaction is retried at the next
    /// round. True once every input partition has ended and the last finals are out.
    fn round(&self, latches: &mut SequentialLatches) -> Result<bool, Error> {
        let s = self.s;
        let mut guard = lock(&self.consumer.handler().state);
        let Some(state) = guard.as_mut() else {
            return Ok(false);
        };
        if !state.caught_up {
            return Ok(false);
        }
        if state.view.done {
            return Ok(true);
        }
        let t0 = Instant::now();
        let mut store = state.view.merged_store(s)?;
        let due = take_due(&s.config, &mut store, true)?;
        let mut noise = ldpstream_engine::curator::secure_rng();
        let mut private = Private {
            ledger: None,
            noise: &mut noise,
        };
        let mut records: Vec<TestRecord> = Vec::new();
        for snapshot in &due {
            records.extend(evaluate_snapshot(
                &s.config,
                &s.mechanism,
                snapshot,
                &mut private,
                &RayonGroups,
            )?);
        }
        latches.observe(&mut records);
        let through = store.finalized_through();
        let before = state.view.emitted.map(|e| e.finalized_through);
        let has_finals = records.iter().any(|r| r.is_final);
        if has_finals || (through.is_some() && through != before) {
            let emitted = Emitted {
                finalized_through: through.unwrap_or(i64::MIN),
                first_pane: store.first_pane(),
                // Set by `emit`, which tags the transaction.
                read: None,
            };
            match self.emit(state, &records, emitted) {
                Ok(true) => {}
                Ok(false) => records.retain(|r| !r.is_final),
                Err(Fenced) => {
                    warn!(stream = %s.config.name, "merge: fenced; another instance owns the partials topic now");
                    *guard = None;
                    return Ok(false);
                }
            }
        }
        let ended = state.ended();
        drop(guard);
        self.shared.publish(&records);
        self.shared
            .metrics
            .snapshot_seconds
            .observe(t0.elapsed().as_secs_f64());
        Ok(ended)
    }

    /// Commits the final records of `records`, the emitted marker, the retired sketch and
    /// the merge group's offset in one transaction, and applies them to the view. False:
    /// the transaction failed (aborted) and the next round retries.
    fn emit(
        &self,
        state: &mut MergeState,
        records: &[TestRecord],
        emitted: Emitted,
    ) -> Result<bool, Fenced> {
        let s = self.s;
        let Some(group) = self.consumer.group_metadata() else {
            return Ok(false);
        };
        let finals: Vec<&TestRecord> = records.iter().filter(|r| r.is_final).collect();
        let mut messages = Vec::with_capacity(finals.len() + 2);
        for r in &finals {
            let payload = match serde_json::to_vec(r) {
                Ok(p) => p,
                Err(e) => {
                    error!(stream = %s.config.name, error = %e, "merge: a final record does not serialize");
                    return Ok(false);
                }
            };
            messages.push(Outgoing {
                topic: s.scale_out.results_topic.clone(),
                partition: None,
                key: record_key(r).into_bytes(),
                payload: Some(payload),
            });
        }
        let (retired, stale) = match state.view.retiring(s, emitted.finalized_through) {
            Ok(r) => r,
            Err(e) => {
                error!(stream = %s.config.name, error = %e, "merge: retiring panes failed");
                return Ok(false);
            }
        };
        // The emitted marker and the retired sketch go together in every transaction,
        // tagged alike, so a new owner never pairs one with the other's predecessor.
        let next = next_tag(state.read, state.last_tag);
        state.last_tag = Some(next);
        let emitted = Emitted {
            read: Some(next),
            ..emitted
        };
        let tag = Some((s.partials.as_str(), 0, next));
        messages.push(s.to_partials(Key::Emitted.encode(), Some(encode_json(&emitted))));
        let retired_bytes = encode_pane(&s.config, Pane::Untimed, &retired, tag);
        messages.push(s.to_partials(Key::Retired.encode(), Some(retired_bytes)));
        for (pane, partition) in &stale {
            let key = Key::Pane {
                partition: *partition,
                pane: *pane,
            };
            messages.push(s.to_partials(key.encode(), None));
        }
        let offsets = Some(TxnOffsets {
            group: &group,
            topic: &s.partials,
            partition: 0,
            next,
        });
        match state.producer.commit(&messages, offsets) {
            Ok(()) => {
                state.view.emitted = Some(emitted);
                state.view.retired = retired;
                state.view.forget_retired(s);
                if emitted.finalized_through == i64::MAX {
                    info!(stream = %s.config.name, finals = finals.len(), "merge: every input partition ended; the last final records are out");
                    // Only now, after that commit: `done` is true whatever becomes of
                    // its own transaction.
                    let done = s.to_partials(Key::Done.encode(), Some(encode_json(&emitted)));
                    if let Err(e) = state.producer.commit(&[done], None) {
                        warn!(stream = %s.config.name, error = %e, "merge: writing done failed; the other instances leave when they take the merge over");
                    }
                }
                info!(stream = %s.config.name, finals = finals.len(), "merge: final records emitted");
                Ok(true)
            }
            Err(ConnectorError::Fenced { .. }) => Err(Fenced),
            Err(e) => {
                warn!(stream = %s.config.name, error = %e, "merge: emitting the final records failed; retrying at the next round");
                Ok(false)
            }
        }
    }
}

/// Another instance took the merge over.
struct Fenced;

/// The tag (and merge-group offset) of the next merge transaction: the partials offset
/// read so far, but always above the last transaction's, committed or aborted. A
/// transaction whose round only promoted fold values reads nothing new; tagged as the one
/// before it and cut by a kill, it would pass a new owner's check (tag at or below the
/// committed offset) and, on a broker that shows aborted transactions, its emitted marker
/// could be taken without its retired sketch, which loses the panes it retired (seen in
/// scripts/scale_out_stress.sh: a cumulative window 891 reports short). It stays below
/// the partials topic's end (each transaction appends two messages at least), so a later
/// owner's tags, which start past its own marker, are above every earlier owner's.
fn next_tag(read: Option<i64>, last: Option<i64>) -> i64 {
    let after_last = last.map_or(0, |l| l.saturating_add(1));
    read.unwrap_or(0).max(after_last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scale_out::stream::tests::stream;
    use crate::startup::shared_state;

    fn record(stream: &str, test: &str) -> TestRecord {
        serde_json::from_value(serde_json::json!({
            "stream": stream, "test": test, "method": "chi2", "mechanism": "grr",
            "n": 10, "reject": false, "alpha": 0.05,
            "estimate": [], "std_error": [], "mle": [], "mle_converged": true,
            "mle_iterations": 0, "privacy": {"kind": "grr"}, "calibration": "asymptotic",
            "rejected_reports": {}, "inconclusive": false,
        }))
        .unwrap()
    }

    #[test]
    fn every_merge_transaction_is_tagged_above_the_last_even_when_nothing_new_was_read() {
        // Taking over: nothing committed yet, then the group's committed offset 40.
        assert_eq!(next_tag(Some(10), None), 10);
        assert_eq!(next_tag(Some(30), Some(40)), 41);
        // Rounds that read nothing new still get a tag of their own.
        assert_eq!(next_tag(Some(50), Some(50)), 51);
        assert_eq!(next_tag(Some(50), Some(51)), 52);
        assert_eq!(next_tag(Some(90), Some(52)), 90);
        assert_eq!(next_tag(None, Some(i64::MAX)), i64::MAX);
    }

    /// Issue 34, item 10: a former merge owner kept serving its provisional records, and
    /// nothing said which instance owned the merge.
    #[test]
    fn a_former_owner_withdraws_its_records_and_the_gauge_follows_the_owner() {
        let s = stream();
        let config = ldpstream_config::Config {
            streams: vec![s.config.clone()],
            serve: Default::default(),
            max_state_memory: None,
            ledger: None,
        };
        let shared = shared_state(&config).unwrap();
        let gauge = || {
            shared
                .metrics
                .scale_out_merge_owner
                .with_label_values(&["k"])
                .get()
        };
        let mut ownership = Ownership::new(&s, &shared);
        assert_eq!(gauge(), 0);
        ownership.observe(true);
        assert_eq!(gauge(), 1);
        shared.publish(&[record("k", "minute"), record("other", "t")]);
        ownership.observe(true);
        assert_eq!(shared.results.lock().unwrap().len(), 2);
        ownership.observe(false);
        assert_eq!(gauge(), 0);
        let left: Vec<String> = shared
            .results
            .lock()
            .unwrap()
            .keys()
            .map(|k| k.0.clone())
            .collect();
        assert_eq!(
            left,
            vec!["other".to_string()],
            "only this stream's records go"
        );
    }
}
