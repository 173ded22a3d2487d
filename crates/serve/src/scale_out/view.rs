//! The merge's view of the partials topic: the newest usable value of every key it uses.
//!
//! Fold values are used batch by batch. Each fold transaction writes a partition's
//! changed panes and then its progress, tagged alike with the input offset the batch
//! ends at; a pane value is used only once the progress that ends its batch is read, so
//! a batch cut by a kill is never half used. Whether the batch's transaction committed
//! is not asked: on Tansu 0.6.0 neither `read_committed` nor the consumer group's
//! committed offsets say it reliably (it shows aborted transactions to `read_committed`
//! readers, and leaves a transaction's offsets unapplied while another producer's
//! transaction on the same partition is open, which every fold transaction here is:
//! benches/RESULTS.md, "Scale-out stress"). None is needed: a complete batch holds the
//! partition's state after its first `tag` reports, which is the same whichever
//! instance folded them, so an aborted batch holds no report that is not in the input.
//! What must not happen is a report counted twice or a pane value going back in time,
//! and both are kept out per partition: a batch tagged below the newest one used (a new
//! owner that resumed from an older state and reads the same reports again) is
//! dropped, and a pane the retired sketch holds takes no value any more. A fold
//! take-over's [`Resumed`] message drops the partition's values of a batch its previous
//! owner never finished. The merge's own values are taken only if their tag is at or
//! below the merge group's committed offset, so that a final record a consumer of the
//! results topic may not see is never taken for emitted.

use std::collections::BTreeMap;

use ldpstream_engine::stream::longest_window;
use ldpstream_engine::window::{merge_grouped, Grouped, PaneStore, RestoredPanes};

use super::stream::ScaleOutStream;
use super::topic_values::{decode_json, decode_tagged_pane, Emitted, Key, Pane, Progress, Resumed};
use crate::error::Error;

/// Which of the merge's own values (emitted, retired) [`PartialsView::apply`] takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OwnValues {
    /// Catching up: those whose tag is at or below this offset, the merge group's
    /// committed one after the previous owner was fenced (None: nothing committed).
    CommittedThrough(Option<i64>),
    /// Owning: none. The values read are this owner's own, applied when their transaction
    /// committed; the consumer reaches them a round or two later, and taking an older one
    /// back would emit its windows a second time.
    Ignore,
}

/// A pane value read before the progress that ends its batch.
#[derive(Debug, Clone)]
struct Pending {
    partition: i32,
    tag: i64,
    pane: Pane,
    grouped: Grouped,
}

#[derive(Debug, Clone)]
enum FoldValue {
    Pane(Pane, Grouped),
    Progress(Progress),
}

/// The newest usable value of every key of the partials topic that the merge uses.
#[derive(Default)]
pub(super) struct PartialsView {
    pub(super) panes: BTreeMap<(Pane, i32), Grouped>,
    pub(super) progress: BTreeMap<i32, Progress>,
    pub(super) emitted: Option<Emitted>,
    pub(super) retired: Grouped,
    /// Pane values read, in log order, whose batch's progress is not read yet.
    pending: Vec<Pending>,
    /// Per partition, the tag of the newest batch used.
    used_through: BTreeMap<i32, i64>,
    /// The last final records are out ([`Key::Done`]).
    pub(super) done: bool,
}

impl PartialsView {
    /// Applies one message of the partials topic.
    pub(super) fn apply(
        &mut self,
        s: &ScaleOutStream,
        key: &[u8],
        payload: Option<&[u8]>,
        own: OwnValues,
    ) -> Result<(), Error> {
        let Some(key) = Key::decode(key) else {
            return Ok(());
        };
        let name = &s.config.name;
        match (key, payload) {
            (Key::Pane { partition, pane }, Some(p)) => {
                let (grouped, tag) = decode_tagged_pane(&s.config, pane, p)?;
                self.pending.push(Pending {
                    partition,
                    tag: batch_tag(tag),
                    pane,
                    grouped,
                });
            }
            (Key::Progress { partition }, Some(p)) => {
                let progress: Progress = decode_json(p, name, "progress")?;
                self.end_batch(s, partition, progress);
            }
            (Key::Resumed { partition }, Some(p)) => {
                // Decoded to refuse a damaged message; what it says is not needed.
                let _: Resumed = decode_json(p, name, "resumed")?;
                self.pending.retain(|v| v.partition != partition);
            }
            (Key::Emitted, Some(p)) => {
                let emitted: Emitted = decode_json(p, name, "emitted")?;
                if own.takes(emitted.read) {
                    self.emitted = Some(emitted);
                    self.forget_retired(s);
                }
            }
            (Key::Retired, Some(p)) => {
                let (retired, tag) = decode_tagged_pane(&s.config, Pane::Untimed, p)?;
                if own.takes(tag) {
                    self.retired = retired;
                }
            }
            // Written only once the last final records' transaction committed, so it is
            // true whatever became of its own transaction.
            (Key::Done, Some(_)) => self.done = true,
            // Tombstones are the merge's, for compaction: a pane leaves the view when a
            // committed emitted value retires it, never on a tombstone that an aborted
            // merge transaction may have left visible without its retired sketch.
            (_, None) => {}
        }
        Ok(())
    }

    /// The progress that ends a batch of `partition`: its pane values tagged at or below
    /// the batch's tag are used, in log order, unless a newer batch was used already
    /// (then the whole batch is an older state of the partition, dropped). After a
    /// compaction a batch's older values may come before it without their own progress:
    /// they are still the partition's state at this tag. Values tagged above it are from
    /// a batch not finished yet, or never.
    fn end_batch(&mut self, s: &ScaleOutStream, partition: i32, progress: Progress) {
        let tag = batch_tag(progress.next);
        let older = self.used_through.get(&partition).is_some_and(|&u| tag < u);
        let (batch, rest): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|v| v.partition == partition && v.tag <= tag);
        self.pending = rest;
        if older {
            return;
        }
        for v in batch {
            self.take(s, partition, FoldValue::Pane(v.pane, v.grouped));
        }
        self.take(s, partition, FoldValue::Progress(progress));
        self.used_through.insert(partition, tag);
    }

    fn take(&mut self, s: &ScaleOutStream, partition: i32, v: FoldValue) {
        match v {
            FoldValue::Pane(pane, g) => {
                if !self.is_retired(s, pane) {
                    self.panes.insert((pane, partition), g);
                }
            }
            FoldValue::Progress(p) => {
                self.progress.insert(partition, p);
            }
        }
    }

    /// The panes no bounded window needs after windows through `through` are emitted.
    fn retired_by(s: &ScaleOutStream, pane: Pane, through: i64) -> bool {
        if through == i64::MAX || through == i64::MIN {
            return false;
        }
        let keep = longest_window(&s.config).max(s.width);
        matches!(pane, Pane::At(t) if t.saturating_add(keep) <= through)
    }

    /// A pane the retired sketch already counts.
    fn is_retired(&self, s: &ScaleOutStream, pane: Pane) -> bool {
        self.emitted
            .is_some_and(|e| Self::retired_by(s, pane, e.finalized_through))
    }

    /// Drops the panes the emitted value retired (the retired sketch counts them).
    pub(super) fn forget_retired(&mut self, s: &ScaleOutStream) {
        let Some(e) = self.emitted else { return };
        self.panes
            .retain(|(pane, _), _| !Self::retired_by(s, *pane, e.finalized_through));
    }

    /// Every partition's partials merged, with the watermark every partition has passed.
    pub(super) fn merged_store(&self, s: &ScaleOutStream) -> Result<PaneStore, Error> {
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
    /// more (as `PaneStore::mark_finalized` retires them): the new retired sketch and the
    /// partials it absorbs. Every partition's watermark has passed these panes, so no
    /// instance publishes them again, and the partials topic forgets them.
    #[allow(clippy::type_complexity)]
    pub(super) fn retiring(
        &self,
        s: &ScaleOutStream,
        through: i64,
    ) -> Result<(Grouped, Vec<(Pane, i32)>), Error> {
        let stale: Vec<(Pane, i32)> = self
            .panes
            .keys()
            .filter(|(pane, _)| Self::retired_by(s, *pane, through))
            .copied()
            .collect();
        let mut retired = self.retired.clone();
        for k in &stale {
            if let Some(g) = self.panes.get(k) {
                merge_grouped(&mut retired, g)?;
            }
        }
        Ok((retired, stale))
    }
}

/// A fold value's batch tag. Untagged: nothing of the partition was consumed when it was
/// written (a new owner that restored no finished batch), older than any tagged batch, so
/// that such an owner's first batch cannot take a watermark back.
fn batch_tag(tag: Option<i64>) -> i64 {
    tag.unwrap_or(-1)
}

impl OwnValues {
    fn takes(self, tag: Option<i64>) -> bool {
        match (self, tag) {
            (OwnValues::Ignore, _) => false,
            // Written before values were tagged: as before, taken.
            (OwnValues::CommittedThrough(_), None) => true,
            (OwnValues::CommittedThrough(c), Some(t)) => c.is_some_and(|c| t <= c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scale_out::stream::tests::{pane, stream};
    use crate::scale_out::topic_values::{encode_json, encode_pane};
    use ldpstream_engine::stream::take_due;

    const MINUTE: i64 = 60_000;
    const CATCHING_UP: OwnValues = OwnValues::CommittedThrough(None);

    /// Partition `partition`'s pane at `t`, from a transaction committing `tag`.
    fn put_pane(
        v: &mut PartialsView,
        s: &ScaleOutStream,
        (partition, t, tag): (i32, i64, Option<i64>),
        g: &Grouped,
    ) {
        let key = Key::Pane {
            partition,
            pane: Pane::At(t),
        };
        let bytes = encode_pane(&s.config, Pane::At(t), g, tag.map(|t| ("in", partition, t)));
        v.apply(s, &key.encode(), Some(&bytes), CATCHING_UP)
            .unwrap();
    }

    /// Partition `partition`'s progress: its newest event time, late count and whether
    /// it ended, from a transaction committing `tag`.
    fn put_progress(
        v: &mut PartialsView,
        s: &ScaleOutStream,
        (partition, tag): (i32, Option<i64>),
        (max_event, late, ended): (Option<i64>, u64, bool),
    ) {
        let p = Progress {
            next: tag,
            max_event,
            late,
            ended,
        };
        let key = Key::Progress { partition }.encode();
        v.apply(s, &key, Some(&encode_json(&p)), CATCHING_UP)
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
        put_pane(&mut v, &s, (0, 0, None), &pane(&s, 1, 3));
        put_pane(&mut v, &s, (1, 0, None), &pane(&s, 2, 4));
        put_progress(&mut v, &s, (0, None), (Some(2 * MINUTE), 1, false));
        // Partition 1 has published no progress: nothing may close.
        assert_eq!(finals(&s, &v), vec![]);
        put_progress(&mut v, &s, (1, None), (Some(MINUTE - 1), 0, false));
        // The slower partition holds the first minute open.
        assert_eq!(finals(&s, &v), vec![]);
        put_progress(&mut v, &s, (1, None), (Some(MINUTE), 2, false));
        assert_eq!(finals(&s, &v), vec![(Some(0), 7)]);
        assert_eq!(v.merged_store(&s).unwrap().late(), 3);
        // Both ended: the cumulative window is final too.
        for p in 0..2 {
            put_progress(&mut v, &s, (p, None), (Some(MINUTE), 0, true));
        }
        assert_eq!(finals(&s, &v), vec![(Some(0), 7), (Some(0), 7)]);
    }

    fn n_of(v: &PartialsView, partition: i32) -> Option<u64> {
        v.panes
            .get(&(Pane::At(0), partition))
            .map(|g| g.values().map(|k| k.n()).sum())
    }

    /// Issue 34, item 9: a fold instance killed mid-transaction left partition 1's pane
    /// and watermark in the partials topic; the merge closed the window on them and
    /// counted the pane, whose reports the partition's next owner then read and counted
    /// again. A finished batch is the partition's state after its first `tag` reports
    /// whoever folded it, committed or not; a cut batch is never used, and the older
    /// states a new owner publishes while it reads the same reports again are dropped.
    #[test]
    fn a_resumed_partition_counts_no_report_twice_and_a_cut_batch_is_never_used() {
        let s = stream();
        let mut v = PartialsView::default();
        put_pane(&mut v, &s, (0, 0, Some(100)), &pane(&s, 1, 3));
        put_progress(&mut v, &s, (0, Some(100)), (Some(2 * MINUTE), 0, false));
        put_pane(&mut v, &s, (1, 0, Some(50)), &pane(&s, 2, 4));
        put_progress(&mut v, &s, (1, Some(50)), (Some(MINUTE - 1), 0, false));
        // A batch cut by a kill: its pane value waits for a progress that never comes.
        put_pane(&mut v, &s, (1, 0, Some(60)), &pane(&s, 2, 5));
        assert_eq!(n_of(&v, 1), Some(4));
        assert_eq!(finals(&s, &v), vec![]);
        // The next owner resumes from 50: the cut value is dropped.
        let resumed = encode_json(&Resumed {
            committed: Some(50),
        });
        v.apply(
            &s,
            &Key::Resumed { partition: 1 }.encode(),
            Some(&resumed),
            CATCHING_UP,
        )
        .unwrap();
        // It finishes a batch through 80 (aborted or not: 9 reports, watermark past the
        // minute), and the window closes on it.
        put_pane(&mut v, &s, (1, 0, Some(80)), &pane(&s, 2, 9));
        put_progress(&mut v, &s, (1, Some(80)), (Some(2 * MINUTE), 0, false));
        assert_eq!(finals(&s, &v), vec![(Some(0), 12)]);
        // Killed; the owner after it resumed from 50 and publishes its state there, then
        // through 70: older states of the partition, dropped.
        for (tag, n, max_event) in [(50, 4, MINUTE - 1), (70, 7, MINUTE + 1)] {
            put_pane(&mut v, &s, (1, 0, Some(tag)), &pane(&s, 2, n));
            put_progress(&mut v, &s, (1, Some(tag)), (Some(max_event), 0, false));
            assert_eq!(n_of(&v, 1), Some(9), "tag {tag}");
            assert_eq!(finals(&s, &v), vec![(Some(0), 12)], "tag {tag}");
        }
        // An owner that restored no finished batch publishes an untagged state: older
        // than any batch, it takes no watermark or pane back.
        put_pane(&mut v, &s, (1, 0, None), &pane(&s, 2, 0));
        put_progress(&mut v, &s, (1, None), (None, 0, false));
        assert_eq!(n_of(&v, 1), Some(9));
        assert_eq!(finals(&s, &v), vec![(Some(0), 12)]);
        // Past 80 its batches are used again.
        put_pane(&mut v, &s, (1, 0, Some(90)), &pane(&s, 2, 10));
        put_progress(&mut v, &s, (1, Some(90)), (Some(3 * MINUTE), 0, false));
        assert_eq!(finals(&s, &v), vec![(Some(0), 13)]);
    }

    /// The owner writes `done` only after the last final records' transaction
    /// committed, so a new owner (and every instance watching) takes it from any
    /// transaction, even while catching up with nothing committed.
    #[test]
    fn done_is_taken_whatever_its_transaction() {
        let s = stream();
        let mut v = PartialsView::default();
        assert!(!v.done);
        v.apply(&s, &Key::Done.encode(), Some(b"{}"), CATCHING_UP)
            .unwrap();
        assert!(v.done);
    }

    /// The merge's own values are tagged with the merge group's offset their transaction
    /// committed; a new owner takes none of an aborted merge transaction.
    #[test]
    fn a_new_owner_takes_no_emitted_or_retired_value_of_an_aborted_merge_transaction() {
        let s = stream();
        let emitted = |through: i64, read: i64| {
            encode_json(&Emitted {
                finalized_through: through,
                first_pane: Some(0),
                read: Some(read),
            })
        };
        let retired = |n: usize, read: i64| {
            encode_pane(
                &s.config,
                Pane::Untimed,
                &pane(&s, 1, n),
                Some(("g-partials", 0, read)),
            )
        };
        let mut v = PartialsView::default();
        let own = OwnValues::CommittedThrough(Some(400));
        for (through, n, read) in [(MINUTE, 3, 300), (2 * MINUTE, 5, 400), (3 * MINUTE, 8, 500)] {
            v.apply(
                &s,
                &Key::Emitted.encode(),
                Some(&emitted(through, read)),
                own,
            )
            .unwrap();
            v.apply(&s, &Key::Retired.encode(), Some(&retired(n, read)), own)
                .unwrap();
        }
        assert_eq!(v.emitted.map(|e| e.finalized_through), Some(2 * MINUTE));
        assert_eq!(v.retired.values().map(|k| k.n()).sum::<u64>(), 5);
        // Nothing committed by the merge group: no tagged value is taken.
        let mut fresh = PartialsView::default();
        fresh
            .apply(
                &s,
                &Key::Emitted.encode(),
                Some(&emitted(MINUTE, 1)),
                CATCHING_UP,
            )
            .unwrap();
        assert_eq!(fresh.emitted, None);
    }

    #[test]
    fn retired_panes_leave_the_view_but_stay_in_the_cumulative_window() {
        let s = stream();
        let mut v = PartialsView::default();
        for (p, t, n) in [(0, 0, 3), (1, 0, 4), (0, MINUTE, 5), (1, 2 * MINUTE, 6)] {
            put_pane(&mut v, &s, (p, t, None), &pane(&s, 0, n));
        }
        for p in 0..2 {
            put_progress(&mut v, &s, (p, None), (Some(3 * MINUTE), 0, false));
        }
        let (retired, stale) = v.retiring(&s, 2 * MINUTE).unwrap();
        assert_eq!(
            stale,
            vec![(Pane::At(0), 0), (Pane::At(0), 1), (Pane::At(MINUTE), 0)]
        );
        assert_eq!(retired.values().map(|k| k.n()).sum::<u64>(), 12);
        // What the round does once the transaction committed.
        v.emitted = Some(Emitted {
            finalized_through: 2 * MINUTE,
            first_pane: Some(0),
            read: None,
        });
        v.retired = retired;
        v.forget_retired(&s);
        assert_eq!(v.panes.len(), 1);
        // A value of a retired pane read later (a tombstone ignored, a late copy) is not
        // counted a second time.
        put_pane(&mut v, &s, (1, 0, None), &pane(&s, 0, 4));
        assert_eq!(v.panes.len(), 1);
        for p in 0..2 {
            put_progress(&mut v, &s, (p, None), (Some(3 * MINUTE), 0, true));
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
                read: None,
            })
        };
        // Catching up: the previous owner's markers, in order.
        for through in [MINUTE, 2 * MINUTE] {
            v.apply(
                &s,
                &Key::Emitted.encode(),
                Some(&marker(through)),
                CATCHING_UP,
            )
            .unwrap();
        }
        assert_eq!(v.emitted.map(|e| e.finalized_through), Some(2 * MINUTE));
        // Owning: this owner committed 3 and 4 minutes, then reads its 3-minute marker.
        v.emitted = Some(Emitted {
            finalized_through: 4 * MINUTE,
            first_pane: Some(0),
            read: None,
        });
        v.apply(
            &s,
            &Key::Emitted.encode(),
            Some(&marker(3 * MINUTE)),
            OwnValues::Ignore,
        )
        .unwrap();
        assert_eq!(v.emitted.map(|e| e.finalized_through), Some(4 * MINUTE));
        let before = v.retired.clone();
        let stale = encode_pane(&s.config, Pane::Untimed, &pane(&s, 1, 9), None);
        v.apply(&s, &Key::Retired.encode(), Some(&stale), OwnValues::Ignore)
            .unwrap();
        assert_eq!(
            v.retired, before,
            "its own older retired sketch is not taken back"
        );
    }
}
