//! The grouped, paned fold of decoded batches in one pass: each row's group becomes a
//! dense id ([`super::keys`]), and its report is counted straight into a flat (group ×
//! cell) table of its pane, so a batch costs a few passes over its rows however many
//! groups it holds: no sketch, key or map lookup per (batch, group).
//!
//! Count-table mechanisms (GenRR, raw, matrix channel with a dense table) use the flat
//! tables; the others keep one sketch per (pane, group) slot and run their kernel once per
//! (batch, pane, group) on that group's rows, gathered once per batch. The sketches a fold
//! hands on ([`GroupFold::into_delta`]) equal the ones the per-group reference fold
//! ([`super::grouped::fold_record_batch`]) makes, count for count and reason for reason,
//! and so do the groups kept under `max_groups` (the smallest keys of all the fold met).

use std::collections::BTreeMap;

use arrow_array::RecordBatch;
use arrow_array::{Array, ArrayRef, BooleanArray, TimestampMillisecondArray, UInt32Array};
use arrow_buffer::NullBuffer;
use arrow_cast::cast;
use arrow_schema::{DataType, TimeUnit};
use arrow_select::filter::filter_record_batch;

use super::error::StreamError;
use super::key_columns::{key_ids, DictCache};
use super::keys::{KeyTable, OTHER_ID};
use super::layout::ReportLayout;
use super::paned_delta::PanedDelta;
use super::sketch_rows::{fold_sketch_rows, SketchRowsError};
use crate::kernels::{count_categories, fold_batch};
use crate::mechanism::Mechanism;
use crate::sketch::counts::TableMut;
use crate::sketch::{CountSketch, RejectReason, Sketch};
use crate::window::{GroupKey, Grouped, EVENT_TIME_MS};
use crate::EngineError;

/// No slot yet for this key id in this pane.
const NO_SLOT: u32 = u32::MAX;
/// Up to this many cells a table is counted with the laned kernel (four interleaved
/// copies, `count_categories`), which keeps runs of one cell from serializing.
const LANED_CELLS: usize = 4096;

/// How one pane's groups hold their counts.
#[derive(Debug, Clone)]
enum Cells {
    /// A dense count table per slot, `width = d + 2`: the d categories, then the reports
    /// out of domain, then the nulls (the reasons `fold_categories` records).
    Counts { d: usize, cells: Vec<u64> },
    /// One sketch per slot.
    Sketches(Vec<Sketch>),
}

/// The groups one pane (or the untimed reports) holds: a slot per group that has a row
/// there, in arrival order.
#[derive(Debug, Clone)]
struct Slots {
    /// Key id → slot, or NO_SLOT.
    slot_of: Vec<u32>,
    /// Slot → key id.
    key_of: Vec<u32>,
    cells: Cells,
}

impl Slots {
    fn new(mode: &Mode) -> Self {
        Slots {
            slot_of: Vec::new(),
            key_of: Vec::new(),
            cells: match mode {
                Mode::Counts { d } => Cells::Counts {
                    d: *d,
                    cells: Vec::new(),
                },
                Mode::Sketches(_) => Cells::Sketches(Vec::new()),
            },
        }
    }

    /// The slot of key `id`, made (empty) on first use.
    fn slot(&mut self, id: u32, mechanism: &Mechanism) -> usize {
        let i = id as usize;
        if i >= self.slot_of.len() {
            self.slot_of.resize(i + 1, NO_SLOT);
        }
        match self.slot_of[i] {
            NO_SLOT => self.new_slot(id, mechanism),
            s => s as usize,
        }
    }

    /// The slots of the keys `ids`, appended to `out`: the keys new to this pane get
    /// their slots first, then the rows are one gather from the table, sized once for the
    /// batch.
    fn slots_of(
        &mut self,
        ids: impl Iterator<Item = u32> + Clone,
        keys: usize,
        mechanism: &Mechanism,
        out: &mut Vec<u32>,
    ) {
        if self.slot_of.len() < keys {
            self.slot_of.resize(keys, NO_SLOT);
        }
        for id in ids.clone() {
            if self.slot_of[id as usize] == NO_SLOT {
                self.slot(id, mechanism);
            }
        }
        let slot_of = &self.slot_of;
        out.extend(ids.map(|id| slot_of[id as usize]));
    }

    #[cold]
    fn new_slot(&mut self, id: u32, mechanism: &Mechanism) -> usize {
        let s = self.key_of.len();
        self.slot_of[id as usize] = s as u32;
        self.key_of.push(id);
        match &mut self.cells {
            Cells::Counts { d, cells } => cells.resize(cells.len() + *d + 2, 0),
            Cells::Sketches(v) => v.push(mechanism.new_sketch()),
        }
        s
    }

    /// Adds `other`'s slot `from` into this pane's slot for key `id`.
    fn absorb_slot(
        &mut self,
        id: u32,
        other: &mut Cells,
        from: usize,
        mechanism: &Mechanism,
    ) -> Result<(), EngineError> {
        let to = self.slot(id, mechanism);
        match (&mut self.cells, other) {
            (Cells::Counts { d, cells }, Cells::Counts { cells: theirs, .. }) => {
                let w = *d + 2;
                let mine = &mut cells[to * w..(to + 1) * w];
                let theirs = &theirs[from * w..(from + 1) * w];
                if mine
                    .iter()
                    .zip(theirs)
                    .any(|(a, b)| a.checked_add(*b).is_none())
                {
                    return Err(EngineError::Corrupt("merging overflows a count".into()));
                }
                for (a, b) in mine.iter_mut().zip(theirs) {
                    *a += b;
                }
            }
            (Cells::Sketches(mine), Cells::Sketches(theirs)) => {
                let sketch = std::mem::replace(&mut theirs[from], mechanism.new_sketch());
                mine[to].merge(&sketch)?;
            }
            _ => {
                return Err(EngineError::Corrupt(
                    "merging folds of different mechanisms".into(),
                ))
            }
        }
        Ok(())
    }

    /// This pane with key ids renamed through `remap` (old id → new id); slots whose keys
    /// now share an id (evicted keys, all sent to the overflow group) are added together.
    fn remap(self, remap: &[u32], mechanism: &Mechanism) -> Result<Slots, EngineError> {
        let mut out = Slots {
            slot_of: Vec::new(),
            key_of: Vec::with_capacity(self.key_of.len()),
            cells: match &self.cells {
                Cells::Counts { d, .. } => Cells::Counts {
                    d: *d,
                    cells: Vec::with_capacity(self.key_of.len() * (d + 2)),
                },
                Cells::Sketches(_) => Cells::Sketches(Vec::with_capacity(self.key_of.len())),
            },
        };
        let mut cells = self.cells;
        for (slot, &id) in self.key_of.iter().enumerate() {
            out.absorb_slot(remap[id as usize], &mut cells, slot, mechanism)?;
        }
        Ok(out)
    }

    /// The slots as sketches keyed by their groups' values. The (key, sketch) pairs are
    /// made in key order and the fold's own table is dropped before the map is built from
    /// them in one bulk pass, which fills the map's nodes: inserted one by one in key
    /// order, every node was split half full: at 10⁵ groups the map took 34 MB (heaptrack)
    /// where full nodes hold the same in about 13.
    fn into_grouped(self, keys: &KeyTable, mechanism: &Mechanism) -> Grouped {
        let mut order: Vec<(GroupKey, u32)> = self
            .key_of
            .iter()
            .enumerate()
            .map(|(slot, &id)| (keys.key(id), slot as u32))
            .collect();
        order.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let pairs: Vec<(GroupKey, Sketch)> = match self.cells {
            Cells::Counts { d, cells } => order
                .into_iter()
                .map(|(key, slot)| {
                    let c = &cells[slot as usize * (d + 2)..(slot as usize + 1) * (d + 2)];
                    (key, counts_sketch(mechanism, &c[..d], c[d], c[d + 1]))
                })
                .collect(),
            Cells::Sketches(sketches) => {
                let mut sketches: Vec<Option<Sketch>> = sketches.into_iter().map(Some).collect();
                order
                    .into_iter()
                    .filter_map(|(key, slot)| Some((key, sketches[slot as usize].take()?)))
                    .collect()
            }
        };
        // Sorted and distinct already: the map's sort finds one run and builds it bottom up.
        pairs.into_iter().collect()
    }
}

/// The count sketch `fold_categories` would have made of these counts.
fn counts_sketch(mechanism: &Mechanism, counts: &[u64], out_of_domain: u64, nulls: u64) -> Sketch {
    let mut sketch = mechanism.new_sketch();
    if let Sketch::Counts(s) = &mut sketch {
        fill_counts(s, counts);
        s.rejected_mut()
            .add(RejectReason::OutOfDomain, out_of_domain);
        s.rejected_mut().add(RejectReason::Null, nulls);
    }
    sketch
}

fn fill_counts(sketch: &mut CountSketch, counts: &[u64]) {
    let (table, n) = sketch.table_mut();
    if let TableMut::Dense(cells) = table {
        cells.copy_from_slice(counts);
        *n = counts.iter().sum();
    }
}

/// How this fold's mechanism is counted.
#[derive(Debug, Clone)]
enum Mode {
    /// A dense count table of d categories: flat tables.
    Counts { d: usize },
    /// Any other sketch, through its kernel.
    Sketches(()),
}

/// Where a row of a batch goes.
const LATE: u32 = u32::MAX;
const UNTIMED: u32 = u32::MAX - 1;

/// The reports of any number of batches, folded by pane and group; merged exactly with
/// other folds of the same stream and turned into a [`PanedDelta`] at the end.
#[derive(Debug, Clone)]
pub struct GroupFold {
    mechanism: Mechanism,
    mode: Mode,
    report: String,
    index: Option<String>,
    key_columns: Vec<String>,
    ts_column: String,
    max_groups: usize,
    max_value_bytes: usize,
    keys: KeyTable,
    cache: DictCache,
    panes: BTreeMap<i64, Slots>,
    untimed: Option<Slots>,
    late: u64,
    max_ts: Option<i64>,
    /// Scratch reused across batches: each row's key id, pane and slot.
    ids: Vec<u32>,
    dest: Vec<u32>,
    slots: Vec<u32>,
}

impl GroupFold {
    /// An empty fold of a stream with this layout.
    pub fn new(layout: &ReportLayout) -> Self {
        let key_columns = layout.key_columns();
        let mode = match layout.mechanism.new_sketch() {
            Sketch::Counts(s) if !s.is_sparse() => Mode::Counts { d: s.domain() },
            _ => Mode::Sketches(()),
        };
        GroupFold {
            mechanism: layout.mechanism.clone(),
            mode,
            report: layout.report.clone(),
            index: layout.index.clone(),
            keys: KeyTable::new(key_columns.len()),
            key_columns,
            ts_column: layout.ts.clone(),
            max_groups: layout.max_groups,
            max_value_bytes: layout.max_group_value_bytes,
            cache: DictCache::default(),
            panes: BTreeMap::new(),
            untimed: None,
            late: 0,
            max_ts: None,
            ids: Vec::new(),
            dest: Vec::new(),
            slots: Vec::new(),
        }
    }

    /// Folds `batch`. `ts` names the event-time column when the batch has one; `pane_of`
    /// maps an event time to its open pane, or None when the report is late.
    pub fn fold_batch(
        &mut self,
        batch: &RecordBatch,
        origin: &str,
        ts: Option<&str>,
        pane_of: &dyn Fn(i64) -> Option<i64>,
    ) -> Result<(), StreamError> {
        let arrow_err = |source| StreamError::Arrow {
            origin: origin.to_string(),
            source,
        };
        let mut panes: Vec<i64> = Vec::new();
        let mut dest = std::mem::take(&mut self.dest);
        dest.clear();
        let late = match ts.and_then(|c| batch.column_by_name(c)) {
            Some(ts_array) => self.route(ts_array, origin, pane_of, &mut panes, &mut dest)?,
            None => 0,
        };
        self.late += late as u64;
        let filtered;
        let batch = if late > 0 {
            // Late rows are in no group: their keys must not count towards the cap.
            let keep: BooleanArray = dest.iter().map(|&d| Some(d != LATE)).collect();
            filtered = filter_record_batch(batch, &keep).map_err(arrow_err)?;
            dest.retain(|&d| d != LATE);
            &filtered
        } else {
            batch
        };
        let result = self.fold_routed(batch, origin, &panes, &dest);
        self.dest = dest;
        result?;
        self.cap()
    }

    /// Each row's destination: the index of its pane in `panes`, UNTIMED for a row without
    /// event time, LATE for one whose pane had closed. Returns the late rows.
    fn route(
        &mut self,
        ts_array: &ArrayRef,
        origin: &str,
        pane_of: &dyn Fn(i64) -> Option<i64>,
        panes: &mut Vec<i64>,
        dest: &mut Vec<u32>,
    ) -> Result<usize, StreamError> {
        let ms = cast(
            ts_array.as_ref(),
            &DataType::Timestamp(TimeUnit::Millisecond, None),
        )
        .map_err(|source| StreamError::Arrow {
            origin: origin.to_string(),
            source,
        })?;
        let ms = ms
            .as_any()
            .downcast_ref::<TimestampMillisecondArray>()
            .ok_or_else(|| StreamError::WrongType {
                origin: origin.to_string(),
                column: self.ts_column.clone(),
                expected: "Timestamp (ms, UTC) or Int64 milliseconds".into(),
                found: ts_array.data_type().to_string(),
            })?;
        let mut last: Option<(i64, u32)> = None;
        let mut late = 0;
        dest.reserve(ms.len());
        for i in 0..ms.len() {
            // A report without event time is in no pane, yet it is a report of the stream:
            // the global and cumulative windows take it.
            if ms.is_null(i) {
                dest.push(UNTIMED);
                continue;
            }
            let t = ms.value(i);
            if !EVENT_TIME_MS.contains(&t) {
                dest.push(LATE);
                late += 1;
                continue;
            }
            self.max_ts = Some(self.max_ts.map_or(t, |m| m.max(t)));
            let Some(pane) = pane_of(t) else {
                dest.push(LATE);
                late += 1;
                continue;
            };
            // Rows of a live stream arrive mostly in time order: remember the last pane.
            let id = match last {
                Some((p, id)) if p == pane => id,
                _ => {
                    let id = match panes.iter().position(|&p| p == pane) {
                        Some(id) => id as u32,
                        None => {
                            panes.push(pane);
                            (panes.len() - 1) as u32
                        }
                    };
                    last = Some((pane, id));
                    id
                }
            };
            dest.push(id);
        }
        Ok(late)
    }

    /// Folds a batch without late rows; `dest` is each row's destination (empty: all
    /// untimed).
    fn fold_routed(
        &mut self,
        batch: &RecordBatch,
        origin: &str,
        panes: &[i64],
        dest: &[u32],
    ) -> Result<(), StreamError> {
        let rows = batch.num_rows();
        let report = column(batch, &self.report, origin)?;
        let index = self
            .index
            .as_ref()
            .map(|c| column(batch, c, origin))
            .transpose()?;
        let grouped = !self.key_columns.is_empty();
        if grouped {
            let names = self.key_columns.clone();
            let mut arrays = Vec::with_capacity(names.len());
            for name in &names {
                arrays.push(column(batch, name, origin)?);
            }
            let columns: Vec<(&str, &ArrayRef)> =
                names.iter().map(String::as_str).zip(&arrays).collect();
            let mut ids = std::mem::take(&mut self.ids);
            let read = key_ids(
                &mut self.keys,
                &mut self.cache,
                &columns,
                rows,
                self.max_value_bytes,
                &mut ids,
            );
            self.ids = ids;
            read.map_err(|e| e.into_stream(origin, self.max_value_bytes))?;
        }
        // Rows by destination: all of them when the batch has one (the usual case).
        let one = match (panes, dest.contains(&UNTIMED)) {
            (_, _) if dest.is_empty() => Some(None),
            ([], true) => Some(None),
            ([p], false) => Some(Some(*p)),
            _ => None,
        };
        if let Some(pane) = one {
            // A batch without rows still makes the ungrouped sketch, as the reference does.
            if rows == 0 && grouped {
                return Ok(());
            }
            return self.fold_rows(pane, None, &report, index.as_ref(), origin);
        }
        let buckets = panes.len() + 1;
        let bucket = |d: u32| {
            if d == UNTIMED {
                panes.len()
            } else {
                d as usize
            }
        };
        let mut starts = vec![0usize; buckets + 1];
        for &d in dest {
            starts[bucket(d) + 1] += 1;
        }
        for k in 1..starts.len() {
            starts[k] += starts[k - 1];
        }
        let mut cursor = starts.clone();
        let mut order = vec![0u32; rows];
        for (row, &d) in dest.iter().enumerate() {
            let b = bucket(d);
            order[cursor[b]] = row as u32;
            cursor[b] += 1;
        }
        for b in 0..buckets {
            let rows = &order[starts[b]..starts[b + 1]];
            if rows.is_empty() {
                continue;
            }
            let pane = panes.get(b).copied();
            self.fold_rows(pane, Some(rows), &report, index.as_ref(), origin)?;
        }
        Ok(())
    }

    /// Folds the rows `rows` (all rows when None) into `pane` (None: untimed). The key
    /// ids of every row of the batch are in `self.ids` when the stream is grouped.
    fn fold_rows(
        &mut self,
        pane: Option<i64>,
        rows: Option<&[u32]>,
        report: &ArrayRef,
        index: Option<&ArrayRef>,
        origin: &str,
    ) -> Result<(), StreamError> {
        let slots = match pane {
            Some(p) => self
                .panes
                .entry(p)
                .or_insert_with(|| Slots::new(&self.mode)),
            None => self.untimed.get_or_insert_with(|| Slots::new(&self.mode)),
        };
        let grouped = !self.key_columns.is_empty();
        let wrong_type = |e: EngineError| match e {
            EngineError::WrongArrayType { expected, found } => StreamError::WrongType {
                origin: origin.to_string(),
                column: self.report.clone(),
                expected,
                found,
            },
            other => StreamError::Engine(other),
        };
        let len = rows.map_or(report.len(), <[u32]>::len);
        // Each row's slot in this pane.
        let slot_of_rows = &mut self.slots;
        slot_of_rows.clear();
        if grouped {
            let (ids, keys) = (&self.ids, self.keys.len());
            slot_of_rows.reserve(len);
            match rows {
                None => slots.slots_of(ids.iter().copied(), keys, &self.mechanism, slot_of_rows),
                Some(rows) => slots.slots_of(
                    rows.iter().map(|&r| ids[r as usize]),
                    keys,
                    &self.mechanism,
                    slot_of_rows,
                ),
            }
        } else {
            let s = slots.slot(OTHER_ID, &self.mechanism) as u32;
            slot_of_rows.resize(len, s);
        }
        let single = !grouped;
        match &mut slots.cells {
            Cells::Counts { d, cells } => {
                let values = report
                    .as_any()
                    .downcast_ref::<UInt32Array>()
                    .ok_or_else(|| {
                        wrong_type(EngineError::WrongArrayType {
                            expected: "UInt32".into(),
                            found: report.data_type().to_string(),
                        })
                    })?;
                count_rows(*d, cells, values, rows, slot_of_rows, single);
            }
            Cells::Sketches(sketches) => {
                if single && rows.is_none() {
                    let s = slot_of_rows.first().map_or(0, |&s| s as usize);
                    let s = if sketches.is_empty() { 0 } else { s };
                    return fold_batch(
                        &self.mechanism,
                        &mut sketches[s],
                        report.as_ref(),
                        index.map(|a| a.as_ref()),
                    )
                    .map_err(wrong_type);
                }
                fold_sketch_rows(&self.mechanism, sketches, report, index, rows, slot_of_rows)
                    .map_err(|e| match e {
                        SketchRowsError::Engine(e) => wrong_type(e),
                        SketchRowsError::Arrow(source) => StreamError::Arrow {
                            origin: origin.to_string(),
                            source,
                        },
                    })?;
            }
        }
        Ok(())
    }

    /// Adds `other` into this fold, exactly: the result is the fold of both folds' batches
    /// in any order.
    pub fn merge(&mut self, other: GroupFold) -> Result<(), StreamError> {
        let GroupFold {
            keys,
            mut panes,
            untimed,
            late,
            max_ts,
            ..
        } = other;
        if let Some(c) = keys.ceiling() {
            self.keys.lower_ceiling(c.clone());
        }
        let ids: Vec<u32> = (0..keys.len() as u32)
            .map(|id| self.keys.intern_from(&keys, id))
            .collect();
        let absorb = |into: &mut Slots, from: Slots| -> Result<(), EngineError> {
            let mut cells = from.cells;
            for (slot, &id) in from.key_of.iter().enumerate() {
                into.absorb_slot(ids[id as usize], &mut cells, slot, &self.mechanism)?;
            }
            Ok(())
        };
        for (pane, from) in std::mem::take(&mut panes) {
            let into = self
                .panes
                .entry(pane)
                .or_insert_with(|| Slots::new(&self.mode));
            absorb(into, from)?;
        }
        if let Some(from) = untimed {
            let into = self.untimed.get_or_insert_with(|| Slots::new(&self.mode));
            absorb(into, from)?;
        }
        self.late = self.late.checked_add(late).ok_or_else(|| {
            EngineError::Corrupt(format!(
                "merging overflows the late report count ({} + {late})",
                self.late
            ))
        })?;
        self.max_ts = match (self.max_ts, max_ts) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self.cap()
    }

    /// Keeps at most `max_groups` groups apart: the smallest keys of all this fold met,
    /// the rest merged into the overflow group in every pane, as
    /// [`PanedDelta`]'s cap does (so a split fold keeps the same groups).
    fn cap(&mut self) -> Result<(), StreamError> {
        if self.key_columns.is_empty() || self.keys.len() - 1 <= self.max_groups {
            return Ok(());
        }
        let mut all: Vec<(GroupKey, u32)> = (1..self.keys.len() as u32)
            .map(|id| (self.keys.key(id), id))
            .collect();
        let max = self.max_groups;
        let mut kept = vec![OTHER_ID];
        if max > 0 {
            all.select_nth_unstable_by(max - 1, |a, b| a.0.cmp(&b.0));
            kept.extend(all[..max].iter().map(|(_, id)| *id));
        }
        let mut remap = vec![OTHER_ID; self.keys.len()];
        for (new, &old) in kept.iter().enumerate() {
            remap[old as usize] = new as u32;
        }
        self.keys.retain(&kept);
        if max > 0 {
            let ceiling = std::mem::take(&mut all[max - 1].0);
            self.keys.lower_ceiling(ceiling);
        }
        self.cache.remap(&remap);
        for slots in self.panes.values_mut().chain(self.untimed.as_mut()) {
            let old = std::mem::replace(slots, Slots::new(&self.mode));
            *slots = old.remap(&remap, &self.mechanism)?;
        }
        Ok(())
    }

    /// The folded sketches, keyed by group values in each pane.
    pub fn into_delta(self) -> Result<PanedDelta, StreamError> {
        let GroupFold {
            mechanism,
            keys,
            panes,
            untimed,
            late,
            max_ts,
            max_groups,
            ..
        } = self;
        let grouped = |slots: Slots| slots.into_grouped(&keys, &mechanism);
        Ok(PanedDelta {
            panes: panes.into_iter().map(|(p, s)| (p, grouped(s))).collect(),
            untimed: untimed.map(grouped).unwrap_or_default(),
            late,
            max_ts,
            max_groups: Some(max_groups),
        })
    }

    /// Drops the key cache: call when the batches to come no longer share the last
    /// batch's dictionaries, to release them.
    pub fn forget_dictionaries(&mut self) {
        self.cache.clear();
    }
}

/// Counts `values` (the rows `rows` of them, or all) into the flat table `cells`: row `i`
/// adds one to cell `slot[i]·(d + 2) + class`, where the class is the category, d for a
/// value out of domain, d + 1 for a null.
fn count_rows(
    d: usize,
    cells: &mut [u64],
    values: &UInt32Array,
    rows: Option<&[u32]>,
    slot: &[u32],
    single: bool,
) {
    let width = d + 2;
    let v = values.values();
    let nulls = values.nulls().filter(|n| n.null_count() > 0);
    if single && rows.is_none() && nulls.is_none() {
        // The ungrouped fast path: the kernel counts the values into the one slot.
        let s = slot.first().map_or(0, |&s| s as usize);
        if let Some(table) = cells.get_mut(s * width..(s + 1) * width) {
            let (counts, rest) = table.split_at_mut(d);
            rest[0] += count_categories(v, counts);
        }
        return;
    }
    if cells.len() <= LANED_CELLS {
        let mut index: Vec<u32> = Vec::with_capacity(slot.len());
        for_each_cell(d, v, rows, nulls, slot, |c| index.push(c as u32));
        count_categories(&index, cells);
    } else {
        for_each_cell(d, v, rows, nulls, slot, |c| cells[c] += 1);
    }
}

/// Calls `f` with each selected row's cell in a flat table of width d + 2, in one pass per
/// shape of the selection (no per-row test of the shape).
fn for_each_cell(
    d: usize,
    v: &[u32],
    rows: Option<&[u32]>,
    nulls: Option<&NullBuffer>,
    slot: &[u32],
    mut f: impl FnMut(usize),
) {
    let width = d + 2;
    let cell = |s: u32, x: u32| s as usize * width + (x as usize).min(d);
    match (rows, nulls) {
        (None, None) => slot.iter().zip(v).for_each(|(&s, &x)| f(cell(s, x))),
        (Some(rows), None) => slot
            .iter()
            .zip(rows)
            .for_each(|(&s, &r)| f(cell(s, v[r as usize]))),
        (rows, Some(n)) => {
            for (k, &s) in slot.iter().enumerate() {
                let r = rows.map_or(k, |r| r[k] as usize);
                f(if n.is_null(r) {
                    s as usize * width + d + 1
                } else {
                    cell(s, v[r])
                });
            }
        }
    }
}

fn column(batch: &RecordBatch, name: &str, origin: &str) -> Result<ArrayRef, StreamError> {
    batch
        .column_by_name(name)
        .cloned()
        .ok_or_else(|| StreamError::MissingColumn {
            origin: origin.to_string(),
            column: name.to_string(),
            expected: "a column the schema check found".into(),
            available: batch
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect::<Vec<_>>()
                .join(", "),
        })
}
