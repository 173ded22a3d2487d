//! What a fold hands on: per-pane, per-group sketches ([`PanedDelta`]) with their exact
//! merge and the group cap. Apart from the folds that fill it ([`super::group_fold`],
//! [`super::paned`]) so that neither fold module depends on the other.

use std::collections::{BTreeMap, BTreeSet};

use super::error::StreamError;
use crate::error::EngineError;
use crate::window::{absorb_grouped, other_key, GroupKey, Grouped, PaneStore};

/// What one or more batches folded to, before it is merged into a [`PaneStore`].
#[derive(Debug, Default)]
pub struct PanedDelta {
    pub panes: BTreeMap<i64, Grouped>,
    /// Reports of batches without an event-time column.
    pub untimed: Grouped,
    /// Reports whose pane had closed (a null event time goes to `untimed`).
    pub late: u64,
    pub max_ts: Option<i64>,
    /// The stream's `max_groups`, once a batch has been folded into this delta.
    pub max_groups: Option<usize>,
}

impl PanedDelta {
    /// Keeps at most `max_groups` groups apart across all panes: the ones with the smallest
    /// keys, the rest merged into the overflow group. "The smallest keys of the union" does
    /// not depend on the order deltas are merged in, so a parallel fold keeps the same
    /// groups and the same counts however its work was split.
    pub(crate) fn cap_groups(&mut self) -> Result<(), StreamError> {
        let Some(max) = self.max_groups else {
            return Ok(());
        };
        let entries: usize = self
            .panes
            .values()
            .chain(std::iter::once(&self.untimed))
            .map(BTreeMap::len)
            .sum();
        if entries <= max {
            return Ok(());
        }
        let Some(width) = self
            .panes
            .values()
            .chain(std::iter::once(&self.untimed))
            .find_map(|g| g.keys().next().map(Vec::len))
        else {
            return Ok(());
        };
        let other = other_key(width);
        let keys: BTreeSet<&GroupKey> = self
            .panes
            .values()
            .chain(std::iter::once(&self.untimed))
            .flat_map(|g| g.keys())
            .filter(|k| **k != other)
            .collect();
        let Some(&last_kept) = keys.iter().nth(max.saturating_sub(1)) else {
            return Ok(());
        };
        let last_kept = last_kept.clone();
        for grouped in self
            .panes
            .values_mut()
            .chain(std::iter::once(&mut self.untimed))
        {
            let beyond: Vec<GroupKey> = grouped
                .keys()
                .filter(|k| **k > last_kept && **k != other)
                .cloned()
                .collect();
            for key in beyond {
                if let Some(sketch) = grouped.remove(&key) {
                    match grouped.get_mut(&other) {
                        Some(o) => o.merge(&sketch)?,
                        None => {
                            grouped.insert(other.clone(), sketch);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    pub fn merge(&mut self, other: PanedDelta) -> Result<(), StreamError> {
        self.max_groups = match (self.max_groups, other.max_groups) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        for (pane, grouped) in other.panes {
            absorb_grouped(self.panes.entry(pane).or_default(), grouped)?;
        }
        absorb_grouped(&mut self.untimed, other.untimed)?;
        // Sketch files are input: a crafted late count must not wrap.
        self.late = self.late.checked_add(other.late).ok_or_else(|| {
            EngineError::Corrupt(format!(
                "merging overflows the late report count ({} + {})",
                self.late, other.late
            ))
        })?;
        self.max_ts = match (self.max_ts, other.max_ts) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self.cap_groups()
    }

    /// Adds this delta to `store` (moving its sketches in) and advances its watermark.
    pub fn apply(self, store: &mut PaneStore) -> Result<(), StreamError> {
        for (pane, grouped) in self.panes {
            store.merge_pane(pane, grouped)?;
        }
        if !self.untimed.is_empty() {
            store.merge_untimed(self.untimed)?;
        }
        store.add_late(self.late);
        if let Some(t) = self.max_ts {
            store.observe(t);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::stream::{fold_paned_batch, ReportLayout};
    use arrow_array::RecordBatch;
    use arrow_schema::DataType;

    // The probe's merge_crafted: late_reports of crafted sketch files wrapped to
    // 18446744073709551614 when merged.
    #[test]
    fn a_late_count_that_would_overflow_is_refused() {
        let mut a = PanedDelta {
            late: u64::MAX,
            ..PanedDelta::default()
        };
        let b = PanedDelta {
            late: 1,
            ..PanedDelta::default()
        };
        let e = a.merge(b).unwrap_err();
        assert!(e.to_string().contains("late report count"), "{e}");
    }

    use std::sync::Arc;

    use crate::mechanism::Mechanism;
    use arrow_array::{ArrayRef, StringArray, TimestampMillisecondArray, UInt32Array};
    use arrow_schema::{Field, Schema, TimeUnit};
    use ldpstream_config::MechanismConfig;

    use super::*;

    fn layout(group_by: Vec<String>) -> ReportLayout {
        ReportLayout {
            mechanism: Mechanism::from_config(&MechanismConfig::Raw { domain: 3 }).unwrap(),
            report: "report".into(),
            index: None,
            group_by,
            ts: "ts".into(),
            block_sizes: Vec::new(),
            max_groups: usize::MAX,
            max_group_value_bytes: usize::MAX,
        }
    }

    fn batch(reports: Vec<u32>, ts: Vec<Option<i64>>, groups: Option<Vec<&str>>) -> RecordBatch {
        let mut fields = vec![
            Field::new("report", DataType::UInt32, false),
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
                true,
            ),
        ];
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(UInt32Array::from(reports)),
            Arc::new(TimestampMillisecondArray::from(ts).with_timezone("UTC")),
        ];
        if let Some(g) = groups {
            fields.push(Field::new("group", DataType::Utf8, false));
            cols.push(Arc::new(StringArray::from(g)));
        }
        RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap()
    }

    /// A report stamped outside years 1..9999 is counted as late and moves no watermark:
    /// one at i64::MAX made every later report late.
    #[test]
    fn event_times_outside_the_calendar_are_late_and_move_no_watermark() {
        let b = batch(
            vec![0, 1, 2],
            vec![Some(i64::MAX), Some(1010), Some(i64::MIN + 1)],
            None,
        );
        let mut out = PanedDelta::default();
        let store = PaneStore::new(1000, 0);
        fold_paned_batch(
            &b,
            &layout(vec![]),
            "t",
            Some("ts"),
            &|t| store.open_pane_of(t),
            &mut out,
        )
        .unwrap();
        assert_eq!(out.late, 2);
        assert_eq!(out.max_ts, Some(1010));
        assert_eq!(out.panes[&1000][&Vec::new()].n(), 1);
    }

    #[test]
    fn rows_land_in_their_panes_and_late_rows_are_counted() {
        let b = batch(
            vec![0, 1, 2, 0, 1, 2],
            vec![Some(10), Some(1010), Some(20), None, Some(2500), Some(5)],
            Some(vec!["a", "b", "a", "a", "b", "b"]),
        );
        let mut out = PanedDelta::default();
        let store = {
            let mut s = PaneStore::new(1000, 0);
            s.observe(1500); // closes pane [0, 1000)
            s
        };
        let l = layout(vec!["group".into()]);
        fold_paned_batch(
            &b,
            &l,
            "t",
            Some("ts"),
            &|t| store.open_pane_of(t),
            &mut out,
        )
        .unwrap();
        // rows at 10, 20, 5 are late (pane 0 closed); the null one has no event time and
        // goes to the untimed sketches (global and cumulative windows only)
        assert_eq!(out.late, 3);
        let a_key = vec![Some("a".to_string())];
        assert_eq!(out.untimed[&a_key].n(), 1);
        assert_eq!(out.untimed.len(), 1);
        assert_eq!(out.max_ts, Some(2500));
        assert_eq!(
            out.panes.keys().copied().collect::<Vec<_>>(),
            vec![1000, 2000]
        );
        let b_key = vec![Some("b".to_string())];
        assert_eq!(out.panes[&1000][&b_key].n(), 1);
        assert_eq!(out.panes[&2000][&b_key].n(), 1);
    }

    #[test]
    fn the_group_cap_keeps_the_smallest_keys_whatever_the_merge_order() {
        let mut l = layout(vec!["group".into()]);
        l.max_groups = 2;
        let fold = |reports: Vec<u32>, groups: Vec<&str>| {
            let n = reports.len();
            let b = batch(reports, vec![Some(10); n], Some(groups));
            let mut d = PanedDelta::default();
            fold_paned_batch(&b, &l, "t", Some("ts"), &|t| Some(t - t % 1000), &mut d).unwrap();
            d
        };
        // One batch alone: five groups, two kept, three folded (first arrival within it).
        let one = fold(vec![0, 1, 2, 0, 1], vec!["e", "d", "c", "b", "a"]);
        assert_eq!(one.panes[&0].len(), 3);
        assert_eq!(one.panes[&0].values().map(|s| s.n()).sum::<u64>(), 5);
        // Across batches the kept groups are the smallest keys of the union, in any order.
        let parts = || {
            vec![
                fold(vec![0, 1], vec!["z", "c"]),
                fold(vec![2, 2], vec!["a", "y"]),
                fold(vec![1], vec!["b"]),
            ]
        };
        let mut forward = PanedDelta::default();
        for d in parts() {
            forward.merge(d).unwrap();
        }
        let mut backward = PanedDelta::default();
        for d in parts().into_iter().rev() {
            backward.merge(d).unwrap();
        }
        assert_eq!(forward.panes, backward.panes);
        let keys: Vec<String> = forward.panes[&0]
            .keys()
            .map(|k| k[0].clone().unwrap_or_default())
            .collect();
        assert_eq!(keys, vec!["__other__", "a", "b"]);
        let other = vec![Some("__other__".to_string())];
        assert_eq!(forward.panes[&0][&other].n(), 3, "z, c and y");
    }

    #[test]
    fn split_folds_equal_a_single_pass_per_pane() {
        let reports: Vec<u32> = (0..1000).map(|i| (i * 7 % 3) as u32).collect();
        let ts: Vec<Option<i64>> = (0..1000).map(|i| Some((i * 37 % 5000) as i64)).collect();
        let whole = batch(reports.clone(), ts.clone(), None);
        let l = layout(Vec::new());
        let mut one = PanedDelta::default();
        fold_paned_batch(
            &whole,
            &l,
            "t",
            Some("ts"),
            &|t| Some(t - t % 1000),
            &mut one,
        )
        .unwrap();
        let mut parts = PanedDelta::default();
        for k in 0..4 {
            let part = whole.slice(k * 250, 250);
            let mut d = PanedDelta::default();
            fold_paned_batch(&part, &l, "t", Some("ts"), &|t| Some(t - t % 1000), &mut d).unwrap();
            parts.merge(d).unwrap();
        }
        assert_eq!(one.panes, parts.panes);
        assert_eq!(one.panes.len(), 5);
        let total: u64 = one
            .panes
            .values()
            .flat_map(|g| g.values())
            .map(|s| s.n())
            .sum();
        assert_eq!(total, 1000);
    }
}
