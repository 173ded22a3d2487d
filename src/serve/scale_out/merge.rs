//! Stage 2 of the scale-out mode: the one instance that owns the partials topic (its single
//! partition, through the consumer group `<group_id>-merge`) keeps the newest partial of
//! every (input partition, pane), merges them exactly, and runs the tests. A window is
//! final once every input partition's watermark has passed its end; its final records go
//! to `results_topic` in the same transaction as the emitted-through marker, written to
//! the partials topic itself. A new owner reads the partials topic from its start up to a
//! marker of its own (after fencing the previous owner), so it knows what was emitted and
//! emits each final record exactly once.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ldpstream_connectors::kafka::transactions::{new_nonce, Outgoing, TxnProducer, MARKER_KEY};
use ldpstream_connectors::kafka::{record_key, GroupConsumer, PartitionHandler, StartAt};
use ldpstream_connectors::position::{KafkaPosition, TopicPartition};
use ldpstream_connectors::ConnectorError;
use ldpstream_engine::record::TestRecord;
use ldpstream_engine::stream::{
    evaluate_snapshot, longest_window, take_due, Private, SequentialLatches,
};
use ldpstream_engine::window::{merge_grouped, Grouped, PaneStore, RestoredPanes};
use tracing::{error, info, warn};

use super::partial::{
    decode_json, decode_pane, encode_json, encode_pane, Emitted, Key, Pane, Progress,
};
use super::stream::{lock, ScaleOutStream};
use crate::error::Error;
use crate::serve::shared::Shared;

/// The merge's view of the partials topic, while this instance owns it.
struct MergeState {
    producer: TxnProducer,
    /// The marker this owner wrote; until it is read back, the view may be missing
    /// emitted markers, so nothing is emitted.
    nonce: Vec<u8>,
    caught_up: bool,
    since: Instant,
    view: PartialsView,
}

/// The newest value of every key of the partials topic that the merge uses.
#[derive(Default)]
struct PartialsView {
    panes: BTreeMap<(Pane, i32), Grouped>,
    progress: BTreeMap<i32, Progress>,
    emitted: Option<Emitted>,
    retired: Grouped,
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
        let producer = TxnProducer::open(&s.kafka, &format!("{}-merge", s.app))?;
        let nonce = new_nonce(producer.id());
        producer.commit(
            &[s.to_partials(MARKER_KEY.to_vec(), Some(nonce.clone()))],
            None,
        )?;
        Ok(MergeState {
            producer,
            nonce,
            caught_up: false,
            since: Instant::now(),
            view: PartialsView::default(),
        })
    }
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
        lock(&self.failure).get_or_insert(Error::Connector(error));
    }
}

impl MergeState {
    fn apply(
        &mut self,
        s: &ScaleOutStream,
        key: &[u8],
        payload: Option<&[u8]>,
    ) -> Result<(), Error> {
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
        self.view.apply(s, key, payload, self.caught_up)
    }
}

impl PartialsView {
    /// Applies one message of the partials topic. Once `owning` (this instance has read
    /// the topic back and is the only one writing the merge's keys), the emitted and
    /// retired values read are this owner's own, already applied when their transaction
    /// committed: the consumer may reach them a round or two later, and taking an older
    /// one back would emit its windows a second time.
    fn apply(
        &mut self,
        s: &ScaleOutStream,
        key: &[u8],
        payload: Option<&[u8]>,
        owning: bool,
    ) -> Result<(), Error> {
        let Some(key) = Key::decode(key) else {
            return Ok(());
        };
        if owning && matches!(key, Key::Emitted | Key::Retired) {
            return Ok(());
        }
        match (key, payload) {
            (Key::Pane { partition, pane }, Some(p)) => {
                let g = decode_pane(&s.config, pane, p)?;
                self.panes.insert((pane, partition), g);
            }
            (Key::Pane { partition, pane }, None) => {
                self.panes.remove(&(pane, partition));
            }
            (Key::Progress { partition }, Some(p)) => {
                self.progress
                    .insert(partition, decode_json(p, &s.config.name, "progress")?);
            }
            (Key::Emitted, Some(p)) => {
                self.emitted = Some(decode_json(p, &s.config.name, "emitted")?);
            }
            (Key::Retired, Some(p)) => {
                self.retired = decode_pane(&s.config, Pane::Untimed, p)?;
            }
            (Key::Progress { .. } | Key::Emitted | Key::Retired, None) => {}
        }
        Ok(())
    }

    /// Every partition's partials merged, with the watermark every partition has passed.
    fn merged_store(&self, s: &ScaleOutStream) -> Result<PaneStore, Error> {
        let mut parts = RestoredPanes {
            retired: self.retired.clone(),
            ..RestoredPanes::default()
        };
        for ((pane, _), g) in &self.panes {
            match pane {
                Pane::Untimed => merge_grouped(&mut parts.retired, g)?,
                Pane::At(t) => merge_grouped(parts.panes.entry(*t).or_default(), g)?,
            }
        }
        parts.first_pane = match (
            self.emitted.and_then(|e| e.first_pane),
            parts.panes.keys().next().copied(),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        parts.late = self.progress.values().map(|p| p.late).sum();
        parts.finalized_through = self.emitted.map(|e| e.finalized_through);
        let all: Vec<Option<&Progress>> = (0..s.input_partitions)
            .map(|p| self.progress.get(&p))
            .collect();
        let ended = all.iter().all(|p| p.is_some_and(|p| p.ended));
        // The slowest partition's watermark; none until every partition has one.
        let watermark = all
            .iter()
            .map(|p| match p {
                Some(p) if p.ended => Some(i64::MAX),
                Some(p) => p.max_event.map(|m| m.saturating_sub(s.lateness)),
                None => None,
            })
            .try_fold(i64::MAX, |acc, w| w.map(|w| acc.min(w)));
        // PaneStore's watermark is its max event minus the lateness.
        parts.max_event = match watermark {
            Some(w) if w < i64::MAX => Some(w.saturating_add(s.lateness)),
            _ => None,
        };
        let mut store = PaneStore::restore(s.width, s.lateness, usize::MAX, parts)?;
        if ended {
            store.finish();
        }
        Ok(store)
    }

    /// Once windows through `through` are emitted, the panes no bounded window needs any
    /// more (as `PaneStore::mark_finalized` retires them): the new retired sketches and
    /// the partials they absorb. Every partition's watermark has passed these panes, so
    /// no instance publishes them again, and the partials topic forgets them.
    #[allow(clippy::type_complexity)]
    fn retiring(
        &self,
        s: &ScaleOutStream,
        through: i64,
    ) -> Result<Option<(Grouped, Vec<(Pane, i32)>)>, Error> {
        if through == i64::MAX || through == i64::MIN {
            return Ok(None);
        }
        let keep = longest_window(&s.config).max(s.width);
        let stale: Vec<(Pane, i32)> = self
            .panes
            .keys()
            .filter(|(pane, _)| matches!(pane, Pane::At(t) if t.saturating_add(keep) <= through))
            .copied()
            .collect();
        if stale.is_empty() {
            return Ok(None);
        }
        let mut retired = self.retired.clone();
        for k in &stale {
            if let Some(g) = self.panes.get(k) {
                merge_grouped(&mut retired, g)?;
            }
        }
        Ok(Some((retired, stale)))
    }
}

/// Runs stage 2 until `stop`.
pub(super) fn run(
    s: Arc<ScaleOutStream>,
    stop: Arc<AtomicBool>,
    shared: Arc<Shared>,
    snapshot_interval: Duration,
) -> Result<(), Error> {
    let handler = MergeHandler {
        stream: s.clone(),
        state: Mutex::new(None),
        failure: Mutex::new(None),
    };
    let group = format!("{}-merge", s.app);
    let consumer =
        GroupConsumer::subscribe(&s.kafka, &s.config.name, &group, &s.partials, handler, None)?;
    let mut latches = SequentialLatches::default();
    let mut last_round = Instant::now();
    while !stop.load(Ordering::Acquire) {
        if let Some(e) = lock(&consumer.handler().failure).take() {
            return Err(e);
        }
        if last_round.elapsed() >= snapshot_interval {
            last_round = Instant::now();
            round(&s, &consumer, &shared, &mut latches)?;
        }
        let Some(message) = consumer.next_message(Duration::from_millis(50)) else {
            continue;
        };
        let mut state = lock(&consumer.handler().state);
        if let Some(state) = state.as_mut() {
            state.apply(&s, message.key(), message.payload())?;
        }
    }
    Ok(())
}

/// Evaluates every due window; the final records are emitted, once, in a transaction with
/// the new emitted-through marker. A failed transaction is retried at the next round.
fn round(
    s: &ScaleOutStream,
    consumer: &GroupConsumer<MergeHandler>,
    shared: &Shared,
    latches: &mut SequentialLatches,
) -> Result<(), Error> {
    let mut guard = lock(&consumer.handler().state);
    let Some(state) = guard.as_mut() else {
        return Ok(());
    };
    if !state.caught_up {
        return Ok(());
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
        )?);
    }
    latches.observe(&mut records);
    let through = store.finalized_through();
    let before = state.view.emitted.map(|e| e.finalized_through);
    let finals: Vec<&TestRecord> = records.iter().filter(|r| r.is_final).collect();
    if !finals.is_empty() || (through.is_some() && through != before) {
        let mut messages = Vec::with_capacity(finals.len() + 1);
        for r in &finals {
            messages.push(Outgoing {
                topic: s.scale_out.results_topic.clone(),
                partition: None,
                key: record_key(r).into_bytes(),
                payload: Some(serde_json::to_vec(r).map_err(ConnectorError::Serialize)?),
            });
        }
        let emitted = Emitted {
            finalized_through: through.unwrap_or(i64::MIN),
            first_pane: store.first_pane(),
        };
        messages.push(s.to_partials(Key::Emitted.encode(), Some(encode_json(&emitted))));
        let retiring = state.view.retiring(s, emitted.finalized_through)?;
        if let Some((retired, stale)) = &retiring {
            let retired = encode_pane(&s.config, Pane::Untimed, retired, None);
            messages.push(s.to_partials(Key::Retired.encode(), Some(retired)));
            for (pane, partition) in stale {
                let key = Key::Pane {
                    partition: *partition,
                    pane: *pane,
                };
                messages.push(s.to_partials(key.encode(), None));
            }
        }
        match state.producer.commit(&messages, None) {
            Ok(()) => {
                if emitted.finalized_through == i64::MAX {
                    info!(stream = %s.config.name, finals = finals.len(), "merge: every input partition ended; the last final records are out");
                }
                state.view.emitted = Some(emitted);
                if let Some((retired, stale)) = retiring {
                    state.view.retired = retired;
                    for k in stale {
                        state.view.panes.remove(&k);
                    }
                }
                info!(stream = %s.config.name, finals = finals.len(), "merge: final records emitted");
            }
            Err(ConnectorError::Fenced { .. }) => {
                warn!(stream = %s.config.name, "merge: fenced; another instance owns the partials topic now");
                *guard = None;
                return Ok(());
            }
            Err(e) => {
                warn!(stream = %s.config.name, error = %e, "merge: emitting the final records failed; retrying at the next round");
                records.retain(|r| !r.is_final);
            }
        }
    }
    drop(guard);
    shared.publish(&records);
    shared
        .metrics
        .snapshot_seconds
        .observe(t0.elapsed().as_secs_f64());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::scale_out::stream::tests::{pane, stream};

    const MINUTE: i64 = 60_000;

    fn put_pane(v: &mut PartialsView, s: &ScaleOutStream, partition: i32, t: i64, g: &Grouped) {
        let key = Key::Pane {
            partition,
            pane: Pane::At(t),
        };
        let bytes = encode_pane(&s.config, Pane::At(t), g, None);
        v.apply(s, &key.encode(), Some(&bytes), false).unwrap();
    }

    /// Partition `partition`'s progress: its newest event time, late count and whether
    /// it ended.
    fn put_progress(
        v: &mut PartialsView,
        s: &ScaleOutStream,
        partition: i32,
        (max_event, late, ended): (Option<i64>, u64, bool),
    ) {
        let p = Progress {
            next: None,
            max_event,
            late,
            ended,
        };
        v.apply(
            s,
            &Key::Progress { partition }.encode(),
            Some(&encode_json(&p)),
            false,
        )
        .unwrap();
    }

    fn finals(s: &ScaleOutStream, v: &PartialsView) -> Vec<(Option<i64>, u64)> {
        let mut store = v.merged_store(s).unwrap();
        take_due(&s.config, &mut store, false)
            .unwrap()
            .iter()
            .filter(|w| w.is_final)
            .map(|w| {
                (
                    w.bounds.map(|b| b.start),
                    w.sketches.values().map(|k| k.n()).sum(),
                )
            })
            .collect()
    }

    #[test]
    fn a_window_is_final_only_once_every_partition_has_passed_it() {
        let s = stream();
        let mut v = PartialsView::default();
        put_pane(&mut v, &s, 0, 0, &pane(&s, 1, 3));
        put_pane(&mut v, &s, 1, 0, &pane(&s, 2, 4));
        put_progress(&mut v, &s, 0, (Some(2 * MINUTE), 1, false));
        // Partition 1 has published no progress: nothing may close.
        assert_eq!(finals(&s, &v), vec![]);
        put_progress(&mut v, &s, 1, (Some(MINUTE - 1), 0, false));
        // The slower partition holds the first minute open.
        assert_eq!(finals(&s, &v), vec![]);
        put_progress(&mut v, &s, 1, (Some(MINUTE), 2, false));
        assert_eq!(finals(&s, &v), vec![(Some(0), 7)]);
        assert_eq!(v.merged_store(&s).unwrap().late(), 3);
        // Both ended: the cumulative window is final too.
        for p in 0..2 {
            put_progress(&mut v, &s, p, (Some(MINUTE), 0, true));
        }
        assert_eq!(finals(&s, &v), vec![(Some(0), 7), (Some(0), 7)]);
    }

    #[test]
    fn retired_panes_leave_the_view_but_stay_in_the_cumulative_window() {
        let s = stream();
        let mut v = PartialsView::default();
        for (p, t, n) in [(0, 0, 3), (1, 0, 4), (0, MINUTE, 5), (1, 2 * MINUTE, 6)] {
            put_pane(&mut v, &s, p, t, &pane(&s, 0, n));
        }
        for p in 0..2 {
            put_progress(&mut v, &s, p, (Some(3 * MINUTE), 0, false));
        }
        let (retired, stale) = v.retiring(&s, 2 * MINUTE).unwrap().unwrap();
        assert_eq!(
            stale,
            vec![(Pane::At(0), 0), (Pane::At(0), 1), (Pane::At(MINUTE), 0)]
        );
        assert_eq!(retired.values().map(|k| k.n()).sum::<u64>(), 12);
        // What the round does once the transaction committed.
        v.emitted = Some(Emitted {
            finalized_through: 2 * MINUTE,
            first_pane: Some(0),
        });
        v.retired = retired;
        for k in stale {
            v.panes.remove(&k);
        }
        for p in 0..2 {
            put_progress(&mut v, &s, p, (Some(3 * MINUTE), 0, true));
        }
        let mut store = v.merged_store(&s).unwrap();
        let due = take_due(&s.config, &mut store, false).unwrap();
        let cumulative = due.iter().find(|w| w.test == 1).unwrap();
        assert_eq!(cumulative.sketches.values().map(|k| k.n()).sum::<u64>(), 18);
        assert_eq!(
            cumulative.bounds.unwrap().start,
            0,
            "starts at the retired first pane"
        );
        // The window of the retired panes is not emitted again.
        let minutes: Vec<i64> = due
            .iter()
            .filter(|w| w.test == 0)
            .map(|w| w.bounds.unwrap().start)
            .collect();
        assert_eq!(minutes, vec![2 * MINUTE]);
    }

    /// The owner's consumer reaches its own emitted markers after it committed newer ones;
    /// taking an older one back emitted a window's final record twice (seen once in
    /// tests/kafka_scale_out.rs before this).
    #[test]
    fn the_owner_never_takes_back_an_older_emitted_marker_of_its_own() {
        let s = stream();
        let mut v = PartialsView::default();
        let marker = |through: i64| {
            encode_json(&Emitted {
                finalized_through: through,
                first_pane: Some(0),
            })
        };
        // Catching up: the previous owner's markers, in order.
        for through in [MINUTE, 2 * MINUTE] {
            v.apply(&s, &Key::Emitted.encode(), Some(&marker(through)), false)
                .unwrap();
        }
        assert_eq!(v.emitted.map(|e| e.finalized_through), Some(2 * MINUTE));
        // Owning: this owner committed 3 and 4 minutes, then reads its 3-minute marker.
        v.emitted = Some(Emitted {
            finalized_through: 4 * MINUTE,
            first_pane: Some(0),
        });
        v.apply(&s, &Key::Emitted.encode(), Some(&marker(3 * MINUTE)), true)
            .unwrap();
        assert_eq!(v.emitted.map(|e| e.finalized_through), Some(4 * MINUTE));
        let before = v.retired.clone();
        let stale = encode_pane(&s.config, Pane::Untimed, &pane(&s, 1, 9), None);
        v.apply(&s, &Key::Retired.encode(), Some(&stale), true)
            .unwrap();
        assert_eq!(
            v.retired, before,
            "its own older retired sketch is not taken back"
        );
    }
}
