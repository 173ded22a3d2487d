use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use ldpstream_config::WindowConfig;

use super::spec::{pane_start, windows_of_pane, Bounds, EVENT_TIME_MS};
use crate::error::EngineError;
use crate::sketch::Sketch;

/// A group's key: one value per `group_by` column (None for a null).
pub type GroupKey = Vec<Option<String>>;
/// Per-group sketches; the key is empty when the stream is not grouped.
pub type Grouped = BTreeMap<GroupKey, Sketch>;

/// The value of every column of the group that reports beyond a stream's `max_groups`
/// share.
pub const OTHER_GROUP: &str = "__other__";

/// The key of the shared overflow group for keys of `columns` values.
pub fn other_key(columns: usize) -> GroupKey {
    vec![Some(OTHER_GROUP.to_string()); columns]
}

/// Whether `key` is the overflow group's.
pub fn is_other(key: &GroupKey) -> bool {
    !key.is_empty() && key.iter().all(|v| v.as_deref() == Some(OTHER_GROUP))
}

/// [`merge_grouped`] for a `from` that is not needed afterwards: the sketches of groups
/// `into` lacks are moved, not copied, so adding a delta never holds it twice (at d = 2^24
/// a group's table is megabytes).
pub fn absorb_grouped(into: &mut Grouped, from: Grouped) -> Result<(), EngineError> {
    // Into nothing, the merge is the other side itself: no key is looked up or moved.
    if into.is_empty() {
        *into = from;
        return Ok(());
    }
    for (key, sketch) in from {
        match into.get_mut(&key) {
            Some(existing) => existing.merge(&sketch)?,
            None => {
                into.insert(key, sketch);
            }
        }
    }
    Ok(())
}

/// The merge of `parts`, borrowing the only one instead of copying it.
fn merged<'a>(
    mut parts: impl Iterator<Item = &'a Grouped>,
) -> Result<Cow<'a, Grouped>, EngineError> {
    let Some(first) = parts.next() else {
        return Ok(Cow::Owned(Grouped::new()));
    };
    let mut out = Cow::Borrowed(first);
    for part in parts {
        merge_grouped(out.to_mut(), part)?;
    }
    Ok(out)
}

/// Merges `from` into `into` exactly, group by group.
pub fn merge_grouped(into: &mut Grouped, from: &Grouped) -> Result<(), EngineError> {
    for (key, sketch) in from {
        match into.get_mut(key) {
            Some(existing) => existing.merge(sketch)?,
            None => {
                into.insert(key.clone(), sketch.clone());
            }
        }
    }
    Ok(())
}

/// The panes of one stream, its watermark and its late-report count.
///
/// Folding happens elsewhere, into a delta per pane; [`PaneStore::merge_pane`] adds a
/// delta. A snapshot ([`PaneStore::window`], [`PaneStore::everything`]) copies the panes'
/// sketches and leaves the store untouched (ARCHITECTURE.md invariant 3: snapshot is not emit).
#[derive(Debug, Clone)]
pub struct PaneStore {
    width: i64,
    lateness: i64,
    max_event: Option<i64>,
    /// Set once a bounded input is exhausted: every pane is then closed.
    finished: bool,
    panes: BTreeMap<i64, Grouped>,
    /// Panes no bounded window needs any more, merged; cumulative and global windows
    /// still include them. Reports without event time land here directly.
    retired: Grouped,
    first_pane: Option<i64>,
    late: u64,
    /// Bounded windows ending at or before this have had their final result.
    finalized_through: Option<i64>,
    /// The cardinality cap: groups beyond it are merged into [`other_key`].
    max_groups: usize,
    /// Every group the store holds, to decide whether a new one still fits under the cap.
    known: BTreeSet<GroupKey>,
    /// Reports of groups beyond the cap, folded into the overflow group since this store
    /// was made (not checkpointed: a process-lifetime counter).
    overflowed_reports: u64,
}

impl PaneStore {
    pub fn new(width_ms: i64, lateness_ms: i64) -> Self {
        PaneStore {
            width: width_ms.max(1),
            lateness: lateness_ms.max(0),
            max_event: None,
            finished: false,
            panes: BTreeMap::new(),
            retired: Grouped::new(),
            first_pane: None,
            late: 0,
            finalized_through: None,
            max_groups: usize::MAX,
            known: BTreeSet::new(),
            overflowed_reports: 0,
        }
    }

    /// Keeps at most `max_groups` groups apart; later ones share the overflow group.
    pub fn with_max_groups(mut self, max_groups: usize) -> Self {
        self.max_groups = max_groups.max(1);
        self
    }

    /// Reports of groups beyond the cap that this store folded into the overflow group.
    pub fn overflowed_reports(&self) -> u64 {
        self.overflowed_reports
    }

    /// The groups kept apart under the cap.
    pub fn groups_kept(&self) -> usize {
        self.known.len()
    }

    /// Whether any pane holds the overflow group: more groups arrived than `max_groups`
    /// (here or, in `batch`, already when the folded deltas were merged), or a group's
    /// values are literally `"__other__"`.
    pub fn holds_overflow(&self) -> bool {
        self.panes
            .values()
            .chain(std::iter::once(&self.retired))
            .any(|g| g.keys().any(is_other))
    }

    /// `delta` with the groups that do not fit under the cap merged into the overflow group.
    /// Groups are admitted in the order they first arrive (key order within one delta).
    fn admit(&mut self, delta: Grouped) -> Result<Grouped, EngineError> {
        let admitted = if delta.keys().all(|k| self.known.contains(k) || is_other(k)) {
            delta
        } else if self.known.len().saturating_add(delta.len()) <= self.max_groups {
            // Every new key fits under the cap: the delta stays as it is (`cap` would
            // rebuild it entry by entry to the same map).
            if self.known.is_empty() {
                // In key order: the set is built in one pass.
                self.known = delta.keys().filter(|k| !is_other(k)).cloned().collect();
            } else {
                for key in delta.keys().filter(|k| !is_other(k)) {
                    if !self.known.contains(key) {
                        self.known.insert(key.clone());
                    }
                }
            }
            delta
        } else {
            self.cap(delta)?
        };
        // Counted here, whether the delta was capped by the store or already by its fold
        // (PanedDelta::cap_groups).
        self.overflowed_reports += admitted
            .iter()
            .filter(|(k, _)| is_other(k))
            .map(|(_, s)| s.n())
            .sum::<u64>();
        Ok(admitted)
    }

    fn cap(&mut self, delta: Grouped) -> Result<Grouped, EngineError> {
        let mut out = Grouped::new();
        let mut other = GroupKey::new();
        for (key, sketch) in delta {
            if other.len() != key.len() {
                other = other_key(key.len());
            }
            // The overflow group is not one of the `max_groups`: it is where they overflow to.
            let fits =
                key == other || self.known.contains(&key) || self.known.len() < self.max_groups;
            let key = if fits {
                if key != other {
                    self.known.insert(key.clone());
                }
                key
            } else {
                other.clone()
            };
            match out.get_mut(&key) {
                Some(existing) => existing.merge(&sketch)?,
                None => {
                    out.insert(key, sketch);
                }
            }
        }
        Ok(out)
    }

    /// A store with this one's pane width and watermark but no panes: enough to route a
    /// batch's rows to their panes while the real store stays unlocked.
    pub fn watermark_view(&self) -> PaneStore {
        PaneStore {
            max_event: self.max_event,
            finished: self.finished,
            ..PaneStore::new(self.width, self.lateness)
        }
    }

    pub fn width(&self) -> i64 {
        self.width
    }

    /// Largest event time seen minus the allowed lateness; `i64::MAX` once the input ended.
    pub fn watermark(&self) -> Option<i64> {
        if self.finished {
            return Some(i64::MAX);
        }
        self.max_event.map(|t| t.saturating_sub(self.lateness))
    }

    pub fn max_event(&self) -> Option<i64> {
        self.max_event
    }

    /// The pane an event time falls into, or None when that pane is already closed (the
    /// report is late).
    pub fn open_pane_of(&self, ts_ms: i64) -> Option<i64> {
        let pane = pane_start(ts_ms, self.width);
        match self.watermark() {
            Some(wm) if pane.saturating_add(self.width) <= wm => None,
            _ => Some(pane),
        }
    }

    /// Advances the watermark after a batch whose largest event time was `ts_ms`.
    pub fn observe(&mut self, ts_ms: i64) {
        self.max_event = Some(self.max_event.map_or(ts_ms, |m| m.max(ts_ms)));
    }

    /// Closes every pane: the input is exhausted.
    pub fn finish(&mut self) {
        self.finished = true;
    }

    /// Counts late reports; saturating, since a count past 2⁶⁴ can only come from crafted
    /// input (merges refuse it first).
    pub fn add_late(&mut self, n: u64) {
        self.late = self.late.saturating_add(n);
    }

    /// Reports not folded because their pane had closed.
    pub fn late(&self) -> u64 {
        self.late
    }

    pub fn merge_pane(&mut self, pane: i64, delta: Grouped) -> Result<(), EngineError> {
        self.first_pane = Some(self.first_pane.map_or(pane, |f| f.min(pane)));
        let delta = self.admit(delta)?;
        absorb_grouped(self.panes.entry(pane).or_default(), delta)
    }

    /// Reports of a stream without event time: they belong to no pane, only to the
    /// cumulative and global windows.
    pub fn merge_untimed(&mut self, delta: Grouped) -> Result<(), EngineError> {
        let delta = self.admit(delta)?;
        absorb_grouped(&mut self.retired, delta)
    }

    /// The exact merge of the panes inside `bounds`: borrowed when one pane holds it all.
    pub fn window(&self, bounds: Bounds) -> Result<Cow<'_, Grouped>, EngineError> {
        merged(self.panes.range(bounds.start..bounds.end).map(|(_, p)| p))
    }

    /// Everything folded so far: retired panes plus open ones (cumulative and global);
    /// borrowed when it is all in one place (`batch` over input without event time).
    pub fn everything(&self) -> Result<Cow<'_, Grouped>, EngineError> {
        let retired = (!self.retired.is_empty()).then_some(&self.retired);
        merged(retired.into_iter().chain(self.panes.values()))
    }

    /// Bounds of the cumulative window: first pane's start to the latest pane's end.
    pub fn cumulative_bounds(&self) -> Option<Bounds> {
        let first = self.first_pane?;
        let last = self
            .panes
            .keys()
            .next_back()
            .copied()
            .unwrap_or(first)
            .max(first);
        Some(Bounds {
            start: first,
            end: last + self.width,
        })
    }

    /// The bounded windows of kind `window` that hold at least one stored pane.
    pub fn windows(&self, window: &WindowConfig) -> BTreeSet<Bounds> {
        self.panes
            .keys()
            .flat_map(|&p| windows_of_pane(window, p))
            .collect()
    }

    /// Whether the watermark has passed the end of `bounds`.
    pub fn is_closed(&self, bounds: Bounds) -> bool {
        self.watermark().is_some_and(|wm| bounds.end <= wm)
    }

    /// Whether the final result of `bounds` is still to be emitted.
    pub fn awaits_final(&self, bounds: Bounds) -> bool {
        self.is_closed(bounds) && self.finalized_through.is_none_or(|f| bounds.end > f)
    }

    /// Records that every window closed by the current watermark has had its final result,
    /// and retires panes that no bounded window of at most `keep_ms` can need any more.
    pub fn mark_finalized(&mut self, keep_ms: i64) -> Result<(), EngineError> {
        let Some(wm) = self.watermark() else {
            return Ok(());
        };
        self.finalized_through = Some(wm);
        let keep = keep_ms.max(self.width);
        let stale: Vec<i64> = self
            .panes
            .keys()
            .copied()
            .filter(|&p| p.saturating_add(keep) <= wm)
            .collect();
        for p in stale {
            if let Some(pane) = self.panes.remove(&p) {
                absorb_grouped(&mut self.retired, pane)?;
            }
        }
        Ok(())
    }

    /// Removes the panes the watermark has closed, which no report can change any more,
    /// and returns their starts. For a store whose closed panes are kept elsewhere: the
    /// scale-out mode's per-partition stores, whose panes live on in the partials topic.
    pub fn take_closed(&mut self) -> Vec<i64> {
        let Some(wm) = self.watermark() else {
            return Vec::new();
        };
        let closed: Vec<i64> = self
            .panes
            .keys()
            .copied()
            .filter(|&p| p.saturating_add(self.width) <= wm)
            .collect();
        for p in &closed {
            self.panes.remove(p);
        }
        closed
    }

    /// The stored panes, for checkpoints.
    pub fn panes(&self) -> &BTreeMap<i64, Grouped> {
        &self.panes
    }

    pub fn retired(&self) -> &Grouped {
        &self.retired
    }

    pub fn finalized_through(&self) -> Option<i64> {
        self.finalized_through
    }

    /// Rebuilds a store from a checkpoint's parts.
    pub fn restore(
        width_ms: i64,
        lateness_ms: i64,
        max_groups: usize,
        parts: RestoredPanes,
    ) -> Result<Self, EngineError> {
        check_restored_times(&parts)?;
        let mut store = PaneStore::new(width_ms, lateness_ms).with_max_groups(max_groups);
        store.known = parts
            .panes
            .values()
            .chain(std::iter::once(&parts.retired))
            .flat_map(|g| g.keys())
            .filter(|k| !is_other(k))
            .cloned()
            .collect();
        store.max_event = parts.max_event;
        store.late = parts.late;
        store.finalized_through = parts.finalized_through;
        store.retired = parts.retired;
        store.first_pane = parts.first_pane;
        for (pane, grouped) in parts.panes {
            if pane_start(pane, store.width) != pane {
                return Err(EngineError::Corrupt(format!(
                    "checkpoint pane {pane} is not aligned to the configured pane width {} ms",
                    store.width
                )));
            }
            store.panes.insert(pane, grouped);
        }
        Ok(store)
    }

    pub fn first_pane(&self) -> Option<i64> {
        self.first_pane
    }
}

/// Refuses event times no input can have produced: a largest event time outside
/// [`EVENT_TIME_MS`] (the fold never records one) would make every later report late, and a
/// finalized-through time past year 9999 would suppress every window's final record.
/// `i64::MAX` there is legitimate: the input had ended.
fn check_restored_times(parts: &RestoredPanes) -> Result<(), EngineError> {
    let corrupt = |what: &str, t: i64| {
        EngineError::Corrupt(format!(
            "checkpoint {what} {t} ms is not an event time ldpstream records (years 1 to \
             9999)"
        ))
    };
    if let Some(t) = parts.max_event.filter(|t| !EVENT_TIME_MS.contains(t)) {
        return Err(corrupt("largest event time", t));
    }
    match parts.finalized_through {
        Some(f) if f != i64::MAX && f > *EVENT_TIME_MS.end() => {
            Err(corrupt("finalized-through time", f))
        }
        _ => Ok(()),
    }
}

/// The state of a [`PaneStore`] as read back from a checkpoint.
#[derive(Debug, Clone, Default)]
pub struct RestoredPanes {
    pub max_event: Option<i64>,
    pub late: u64,
    pub finalized_through: Option<i64>,
    pub first_pane: Option<i64>,
    pub retired: Grouped,
    pub panes: BTreeMap<i64, Grouped>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mechanism::Mechanism;
    use ldpstream_config::{DurationMs, MechanismConfig};

    fn mechanism() -> Mechanism {
        Mechanism::from_config(&MechanismConfig::Raw { domain: 4 }).unwrap()
    }

    /// A delta holding `n` reports of category `x` in the ungrouped key.
    fn delta(m: &Mechanism, x: u32, n: usize) -> Grouped {
        let mut s = m.new_sketch();
        let reports = arrow_array::UInt32Array::from(vec![x; n]);
        crate::kernels::fold_batch(m, &mut s, &reports, None).unwrap();
        Grouped::from([(Vec::new(), s)])
    }

    fn n(g: &Grouped) -> u64 {
        g.values().map(Sketch::n).sum()
    }

    #[test]
    fn take_closed_removes_exactly_the_panes_the_watermark_closed() {
        let m = mechanism();
        let mut store = PaneStore::new(1_000, 500);
        for pane in [0, 1_000, 2_000, 3_000] {
            store.merge_pane(pane, delta(&m, 1, 2)).unwrap();
        }
        assert_eq!(store.take_closed(), Vec::<i64>::new(), "no watermark yet");
        // Watermark 3_000 - 500: panes ending at or before 2_500 are closed.
        store.observe(3_000);
        assert_eq!(store.take_closed(), vec![0, 1_000]);
        assert_eq!(
            store.panes().keys().copied().collect::<Vec<_>>(),
            vec![2_000, 3_000]
        );
        assert_eq!(
            store.open_pane_of(1_500),
            None,
            "a report for a closed pane is late"
        );
        store.finish();
        assert_eq!(store.take_closed(), vec![2_000, 3_000]);
        assert!(store.panes().is_empty());
    }

    #[test]
    fn windows_are_exact_merges_of_their_panes() {
        let m = mechanism();
        let mut store = PaneStore::new(1000, 0);
        let mut single = m.new_sketch();
        for (i, t) in [0i64, 500, 1500, 2100, 3999, 4000].iter().enumerate() {
            let pane = store.open_pane_of(*t).unwrap();
            let d = delta(&m, (i % 4) as u32, i + 1);
            if (2000..4000).contains(t) {
                single.merge(&d[&Vec::new()]).unwrap();
            }
            store.merge_pane(pane, d).unwrap();
        }
        let w = store
            .window(Bounds {
                start: 2000,
                end: 4000,
            })
            .unwrap();
        assert_eq!(w[&Vec::new()], single);
        assert_eq!(n(&store.everything().unwrap()), 21);
        let tumbling = WindowConfig::Tumbling {
            size: DurationMs(2000),
        };
        let ws: Vec<Bounds> = store.windows(&tumbling).into_iter().collect();
        assert_eq!(
            ws,
            vec![
                Bounds {
                    start: 0,
                    end: 2000
                },
                Bounds {
                    start: 2000,
                    end: 4000
                },
                Bounds {
                    start: 4000,
                    end: 6000
                }
            ]
        );
        assert_eq!(
            store.cumulative_bounds(),
            Some(Bounds {
                start: 0,
                end: 5000
            })
        );
    }

    fn grouped(m: &Mechanism, groups: &[&str]) -> Grouped {
        groups
            .iter()
            .map(|g| {
                let mut s = m.new_sketch();
                let reports = arrow_array::UInt32Array::from(vec![1u32]);
                crate::kernels::fold_batch(m, &mut s, &reports, None).unwrap();
                (vec![Some(g.to_string())], s)
            })
            .collect()
    }

    /// Crafted times in a checkpoint are refused on restore, not obeyed (#34 nit): a
    /// largest event time of i64::MAX made every report late.
    #[test]
    fn restored_times_outside_what_the_fold_records_are_refused() {
        let at = |max_event: Option<i64>, finalized_through: Option<i64>| {
            PaneStore::restore(
                1000,
                0,
                10,
                RestoredPanes {
                    max_event,
                    finalized_through,
                    ..RestoredPanes::default()
                },
            )
        };
        let e = at(Some(i64::MAX), None).unwrap_err().to_string();
        assert!(e.contains("largest event time 9223372036854775807"), "{e}");
        let e = at(Some(5_000), Some(i64::MAX - 1)).unwrap_err().to_string();
        assert!(e.contains("finalized-through time"), "{e}");
        at(Some(5_000), Some(i64::MAX)).unwrap();
        at(Some(5_000), Some(4_000)).unwrap();
        at(None, None).unwrap();
    }

    #[test]
    fn groups_beyond_the_cap_share_the_overflow_group_and_no_report_is_lost() {
        let m = mechanism();
        let mut store = PaneStore::new(1000, 0).with_max_groups(2);
        store.merge_pane(0, grouped(&m, &["a", "b", "c"])).unwrap();
        store.merge_pane(1000, grouped(&m, &["d", "a"])).unwrap();
        store.merge_untimed(grouped(&m, &["e", "b"])).unwrap();
        let all = store.everything().unwrap();
        let keys: Vec<&GroupKey> = all.keys().collect();
        let other = other_key(1);
        assert_eq!(
            keys,
            vec![
                &vec![Some("__other__".to_string())],
                &vec![Some("a".to_string())],
                &vec![Some("b".to_string())]
            ]
        );
        assert_eq!(all[&other].n(), 3, "c, d and e");
        assert_eq!(n(&all), 7);
        // c, d and e overflowed, one report each.
        assert_eq!(store.overflowed_reports(), 3);
        // A restored store keeps the groups it had and still caps new ones.
        let parts = RestoredPanes {
            retired: store.retired().clone(),
            panes: store.panes().clone(),
            ..RestoredPanes::default()
        };
        let mut back = PaneStore::restore(1000, 0, 2, parts).unwrap();
        back.merge_pane(0, grouped(&m, &["a", "f"])).unwrap();
        let all = back.everything().unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(all[&other].n(), 4);
    }

    #[test]
    fn reports_behind_the_watermark_are_late() {
        let mut store = PaneStore::new(1000, 500);
        assert_eq!(store.watermark(), None);
        assert_eq!(store.open_pane_of(100), Some(0));
        store.observe(1400);
        // watermark 900: pane [0, 1000) is still open
        assert_eq!(store.open_pane_of(100), Some(0));
        store.observe(1500);
        // watermark 1000 closes pane [0, 1000)
        assert_eq!(store.watermark(), Some(1000));
        assert_eq!(store.open_pane_of(999), None);
        assert_eq!(store.open_pane_of(1000), Some(1000));
        // the watermark never moves back
        store.observe(10);
        assert_eq!(store.watermark(), Some(1000));
        store.finish();
        assert_eq!(store.open_pane_of(i64::MAX - 1), None);
    }

    #[test]
    fn finals_are_emitted_once_and_panes_retire_into_the_cumulative_window() {
        let m = mechanism();
        let mut store = PaneStore::new(1000, 0);
        let w = Bounds {
            start: 0,
            end: 1000,
        };
        store.merge_pane(0, delta(&m, 1, 5)).unwrap();
        store.observe(999);
        assert!(!store.awaits_final(w));
        store.observe(1000);
        store.merge_pane(1000, delta(&m, 2, 3)).unwrap();
        assert!(store.awaits_final(w));
        store.mark_finalized(1000).unwrap();
        assert!(!store.awaits_final(w));
        // pane 0 retired: no longer in bounded windows, still in everything()
        assert_eq!(n(&store.window(w).unwrap()), 0);
        assert_eq!(n(&store.everything().unwrap()), 8);
        assert_eq!(store.panes().len(), 1);
    }
}
