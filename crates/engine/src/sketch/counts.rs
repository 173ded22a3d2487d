use std::borrow::Cow;

use super::codec::{write_header, Reader};
use super::table::{add_checked, check_add, checked_n};
use super::{checked_sum, Rejections};
use crate::error::EngineError;

/// Above this domain a count table starts sparse: only its non-zero cells are kept, so a
/// large domain costs memory in proportion to the distinct values seen, not to d.
pub const SPARSE_FROM_DOMAIN: usize = 1 << 16;
/// What a sparse cell costs in memory for estimates: a u32 category and a u64 count in two
/// sorted arrays (12 B), plus the slack of their growth.
pub const SPARSE_CELL_BYTES: usize = 16;

/// The cells of a count table. Which one a table uses depends only on d and the number of
/// non-zero cells (dense when d ≤ [`SPARSE_FROM_DOMAIN`] or more than a quarter of the
/// cells are non-zero, where the dense table is the smaller), and the non-zero count only
/// grows under folds and merges: so the form, and the serialized bytes, do not depend on
/// the order reports were folded or sketches merged in.
#[derive(Debug, Clone)]
enum Table {
    Dense(Vec<u64>),
    /// Boxed: a grouped window holds a sketch per group, nearly all of them dense, and
    /// inline the sparse form's four fields made every sketch 24 bytes larger.
    Sparse(Box<Sparse>),
}

/// The non-zero cells in two sorted arrays (12 B a cell, no per-cell allocation), and the
/// values a fold added since the last [`Sparse::compact`]; outside a fold `pending` is
/// empty.
#[derive(Debug, Clone)]
struct Sparse {
    d: usize,
    index: Vec<u32>,
    count: Vec<u64>,
    pending: Vec<(u32, u64)>,
}

impl Sparse {
    fn new(d: usize) -> Self {
        Sparse {
            d,
            index: Vec::new(),
            count: Vec::new(),
            pending: Vec::new(),
        }
    }

    fn cells(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.index.iter().copied().zip(self.count.iter().copied())
    }

    /// Adds the sorted, distinct-category cells `other` into these (a linear merge).
    fn add_sorted(&mut self, other: impl Iterator<Item = (u32, u64)>) {
        let mut index = Vec::with_capacity(self.index.len());
        let mut count = Vec::with_capacity(self.count.len());
        {
            let mut mine = self.cells().peekable();
            let mut theirs = other.peekable();
            loop {
                let next = match (mine.peek(), theirs.peek()) {
                    (Some(&(a, x)), Some(&(b, y))) if a == b => {
                        mine.next();
                        theirs.next();
                        (a, x + y)
                    }
                    (Some(&(a, _)), Some(&(b, _))) if b < a => theirs.next().unwrap_or_default(),
                    (Some(_), _) => mine.next().unwrap_or_default(),
                    (None, Some(_)) => theirs.next().unwrap_or_default(),
                    (None, None) => break,
                };
                index.push(next.0);
                count.push(next.1);
            }
        }
        index.shrink_to_fit();
        count.shrink_to_fit();
        self.index = index;
        self.count = count;
    }

    /// Folds `pending` into the sorted cells.
    fn compact(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let mut pending = std::mem::take(&mut self.pending);
        pending.sort_unstable_by_key(|&(j, _)| j);
        let mut coalesced: Vec<(u32, u64)> = Vec::with_capacity(pending.len());
        for (j, c) in pending {
            match coalesced.last_mut() {
                Some((last, total)) if *last == j => *total += c,
                _ => coalesced.push((j, c)),
            }
        }
        self.add_sorted(coalesced.into_iter());
    }
}

/// A table of per-category counts plus `n`: the sufficient statistic of GenRR, raw and
/// matrix-channel reports. `n` is always the sum of the table.
#[derive(Debug, Clone)]
pub struct CountSketch {
    table: Table,
    n: u64,
    rejected: Rejections,
}

/// Equal when the counts are: the form (dense or sparse) is not part of the value.
impl PartialEq for CountSketch {
    fn eq(&self, other: &Self) -> bool {
        self.n == other.n
            && self.rejected == other.rejected
            && self.domain() == other.domain()
            && self.nonzero().eq(other.nonzero())
    }
}

impl Eq for CountSketch {}

/// A table being folded into: the dense slice, or the sparse cells.
pub(crate) enum TableMut<'a> {
    Dense(&'a mut [u64]),
    Sparse(SparseCells<'a>),
}

pub(crate) struct SparseCells<'a> {
    d: usize,
    pending: &'a mut Vec<(u32, u64)>,
}

impl SparseCells<'_> {
    /// Adds `count` to cell `value`; false (and nothing added) when it is outside the domain.
    /// The cells are sorted in when the fold calls [`CountSketch::settle`].
    pub(crate) fn add(&mut self, value: u32, count: u64) -> bool {
        if value as usize >= self.d {
            return false;
        }
        if count > 0 {
            self.pending.push((value, count));
        }
        true
    }
}

/// The non-zero cells of a dense table, as (category, count), in category order: the form
/// the statistics walk, so that dense and sparse tables share one code path.
pub fn nonzero_cells(counts: &[u64]) -> impl Iterator<Item = (usize, u64)> + '_ {
    counts
        .iter()
        .enumerate()
        .filter(|(_, &c)| c > 0)
        .map(|(j, &c)| (j, c))
}

fn dense_is_smaller(d: usize, nonzero: usize) -> bool {
    d <= SPARSE_FROM_DOMAIN || nonzero > d / 4
}

impl CountSketch {
    /// An empty sketch over `d` categories.
    pub fn new(d: usize) -> Self {
        let table = if dense_is_smaller(d, 0) {
            Table::Dense(vec![0; d])
        } else {
            Table::Sparse(Box::new(Sparse::new(d)))
        };
        CountSketch {
            table,
            n: 0,
            rejected: Rejections::default(),
        }
    }

    /// A sketch from a count table; `n` is its sum.
    pub fn from_counts(counts: Vec<u64>) -> Self {
        let n = counts.iter().sum();
        let mut s = CountSketch {
            table: Table::Dense(counts),
            n,
            rejected: Rejections::default(),
        };
        s.settle_form();
        s
    }

    /// The number of categories d.
    pub fn domain(&self) -> usize {
        match &self.table {
            Table::Dense(c) => c.len(),
            Table::Sparse(t) => t.d,
        }
    }

    /// Whether only the non-zero cells are kept.
    pub fn is_sparse(&self) -> bool {
        matches!(self.table, Table::Sparse(_))
    }

    /// The whole table of d counts: borrowed when dense, built (O(d)) when sparse. Called
    /// at snapshot time, where the statistics need every cell anyway.
    pub fn counts(&self) -> Cow<'_, [u64]> {
        match &self.table {
            Table::Dense(c) => Cow::Borrowed(c),
            Table::Sparse(t) => {
                let mut out = vec![0; t.d];
                for (j, c) in t.cells() {
                    out[j as usize] = c;
                }
                Cow::Owned(out)
            }
        }
    }

    /// The non-zero cells, as (category, count), in category order.
    pub fn nonzero(&self) -> Box<dyn Iterator<Item = (usize, u64)> + '_> {
        match &self.table {
            Table::Dense(c) => Box::new(nonzero_cells(c)),
            Table::Sparse(t) => Box::new(t.cells().map(|(j, v)| (j as usize, v))),
        }
    }

    /// The bytes the table holds on the heap.
    pub fn table_bytes(&self) -> usize {
        match &self.table {
            Table::Dense(c) => std::mem::size_of_val(c.as_slice()),
            Table::Sparse(t) => t.index.capacity() * 4 + t.count.capacity() * 8,
        }
    }

    /// Reports folded (rejected ones excluded).
    pub fn n(&self) -> u64 {
        self.n
    }

    pub fn rejected(&self) -> &Rejections {
        &self.rejected
    }

    pub fn rejected_mut(&mut self) -> &mut Rejections {
        &mut self.rejected
    }

    /// The table and `n`, for fold kernels: they add to the table and settle `n` once per
    /// batch, then call [`settle`](Self::settle).
    pub(crate) fn table_mut(&mut self) -> (TableMut<'_>, &mut u64) {
        let table = match &mut self.table {
            Table::Dense(c) => TableMut::Dense(c),
            Table::Sparse(t) => TableMut::Sparse(SparseCells {
                d: t.d,
                pending: &mut t.pending,
            }),
        };
        (table, &mut self.n)
    }

    /// Sorts the cells a fold added into a sparse table, and turns it dense once dense is
    /// the smaller.
    pub(crate) fn settle(&mut self) {
        if let Table::Sparse(t) = &mut self.table {
            t.compact();
            if dense_is_smaller(t.d, t.index.len()) {
                self.table = Table::Dense(self.counts().into_owned());
            }
        }
    }

    /// [`settle`](Self::settle), and a dense table that should be sparse made sparse: for
    /// tables that did not grow from an empty sketch (decoded, or given whole).
    fn settle_form(&mut self) {
        if let Table::Dense(c) = &self.table {
            let nonzero = c.iter().filter(|&&v| v > 0).count();
            if !dense_is_smaller(c.len(), nonzero) {
                let mut t = Sparse::new(c.len());
                for (j, &v) in c.iter().enumerate().filter(|(_, &v)| v > 0) {
                    t.index.push(j as u32);
                    t.count.push(v);
                }
                self.table = Table::Sparse(Box::new(t));
            }
        }
        self.settle();
    }

    /// Exact merge: counts, `n` and rejections add. Refused, leaving `self` unchanged, on
    /// another domain or an `n` past `u64::MAX` (a crafted sketch file). Every cell is at
    /// most its sketch's `n` (checked when a sketch is read), so a merged `n` that fits
    /// proves every merged cell fits too.
    pub fn merge(&mut self, other: &CountSketch) -> Result<(), EngineError> {
        if self.domain() != other.domain() {
            return Err(EngineError::ShapeMismatch {
                expected: self.domain(),
                found: other.domain(),
            });
        }
        let n = checked_n(self.n, other.n)?;
        self.rejected.check_merge(&other.rejected)?;
        match (&mut self.table, &other.table) {
            (Table::Dense(a), Table::Dense(b)) => {
                check_add(a, b, "counts")?;
                add_checked(a, b);
            }
            (Table::Dense(a), Table::Sparse(b)) => {
                for (j, c) in b.cells() {
                    a[j as usize] += c;
                }
            }
            (Table::Sparse(a), Table::Dense(b)) => {
                let mut dense = b.clone();
                for (j, c) in a.cells() {
                    dense[j as usize] += c;
                }
                self.table = Table::Dense(dense);
            }
            (Table::Sparse(a), Table::Sparse(b)) => a.add_sorted(b.cells()),
        }
        self.n = n;
        self.rejected.merge(&other.rejected);
        self.settle();
        Ok(())
    }

    /// Whether [`write_body`](Self::write_body) writes the sparse body.
    pub(crate) fn writes_sparse(&self) -> bool {
        self.is_sparse()
    }

    /// Body: d (u32), n (u64), then d counts (u64) when dense, or the number of non-zero
    /// cells (u32) and each cell's category (u32) and count (u64), in category order.
    pub(crate) fn write_body(&self, out: &mut Vec<u8>) {
        write_header(out, self.domain(), self.n);
        match &self.table {
            Table::Dense(c) => {
                for v in c {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
            Table::Sparse(t) => {
                out.extend_from_slice(&(t.index.len() as u32).to_le_bytes());
                for (j, v) in t.cells() {
                    out.extend_from_slice(&j.to_le_bytes());
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
        }
    }

    pub(crate) fn read_body(r: &mut Reader) -> Result<Self, EngineError> {
        let d = r.u32("domain")? as usize;
        let n = r.u64("n")?;
        let counts = r.u64s(d, "counts")?;
        let sum = checked_sum(&counts)?;
        if sum != n {
            return Err(EngineError::Corrupt(format!(
                "counts sum to {sum} but n = {n}"
            )));
        }
        let mut s = CountSketch {
            table: Table::Dense(counts),
            n,
            rejected: Rejections::default(),
        };
        s.settle_form();
        Ok(s)
    }

    pub(crate) fn read_sparse_body(r: &mut Reader) -> Result<Self, EngineError> {
        let d = r.u32("domain")? as usize;
        let n = r.u64("n")?;
        let len = r.u32("non-zero cells")? as usize;
        if len > d {
            return Err(EngineError::Corrupt(format!(
                "{len} non-zero cells in a domain of {d}"
            )));
        }
        let mut t = Sparse::new(d);
        let mut sum = 0u64;
        let mut previous: Option<u32> = None;
        for _ in 0..len {
            let j = r.u32("cell category")?;
            let c = r.u64("cell count")?;
            if j as usize >= d || previous.is_some_and(|p| j <= p) || c == 0 {
                return Err(EngineError::Corrupt(format!(
                    "sparse cell {j} (count {c}) is out of order, outside d = {d} or zero"
                )));
            }
            previous = Some(j);
            sum = sum
                .checked_add(c)
                .ok_or_else(|| EngineError::Corrupt("counts overflow u64".into()))?;
            t.index.push(j);
            t.count.push(c);
        }
        if sum != n {
            return Err(EngineError::Corrupt(format!(
                "counts sum to {sum} but n = {n}"
            )));
        }
        let mut s = CountSketch {
            table: Table::Sparse(Box::new(t)),
            n,
            rejected: Rejections::default(),
        };
        // A small domain, or a full table, is dense whatever form it was written in.
        if d <= SPARSE_FROM_DOMAIN {
            s.table = Table::Dense(s.counts().into_owned());
        }
        s.settle();
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sparse_of(d: usize, cells: &[(u32, u64)]) -> CountSketch {
        let mut s = CountSketch::new(d);
        {
            let (table, n) = s.table_mut();
            let TableMut::Sparse(mut t) = table else {
                panic!("d = {d} should start sparse")
            };
            for &(j, c) in cells {
                assert!(t.add(j, c));
                *n += c;
            }
        }
        s.settle();
        s
    }

    #[test]
    fn a_large_domain_starts_sparse_and_turns_dense_past_a_quarter() {
        let d = SPARSE_FROM_DOMAIN * 2;
        let mut s = sparse_of(d, &[(3, 2), (d as u32 - 1, 5)]);
        assert!(s.is_sparse());
        assert_eq!(s.table_bytes(), 2 * 12);
        let c = s.counts();
        assert_eq!((c.len(), c[3], c[d - 1], s.n()), (d, 2, 5, 7));
        // A quarter of the cells plus one makes the dense table the smaller.
        let many: Vec<(u32, u64)> = (0..(d / 4) as u32).map(|j| (j * 4 + 1, 1)).collect();
        s.merge(&sparse_of(d, &many)).unwrap();
        assert!(!s.is_sparse());
        assert_eq!(s.n(), 7 + (d / 4) as u64);
        assert!(!CountSketch::new(SPARSE_FROM_DOMAIN).is_sparse());
    }

    #[test]
    fn the_form_is_not_part_of_the_value() {
        let d = SPARSE_FROM_DOMAIN + 8;
        let sparse = sparse_of(d, &[(0, 1), (9, 4)]);
        let mut dense = vec![0u64; d];
        dense[0] = 1;
        dense[9] = 4;
        let given = CountSketch::from_counts(dense.clone());
        assert!(
            given.is_sparse(),
            "a mostly empty large table is kept sparse"
        );
        assert_eq!(given, sparse);
        // Dense + sparse and sparse + dense merge to the same counts.
        let mut full = vec![1u64; d];
        full[9] = 0;
        let full = CountSketch::from_counts(full);
        let mut a = full.clone();
        a.merge(&sparse).unwrap();
        let mut b = sparse.clone();
        b.merge(&full).unwrap();
        assert_eq!(a, b);
        assert!(!a.is_sparse() && !b.is_sparse());
        assert_eq!(a.counts()[9], 4);
        let mut wrong = sparse.clone();
        assert!(wrong.merge(&CountSketch::new(d + 1)).is_err());
    }

    fn fold(d: usize, values: &[u32]) -> CountSketch {
        let mut s = CountSketch::new(d);
        let array = arrow_array::UInt32Array::from(values.to_vec());
        crate::kernels::fold_categories(&array, &mut s);
        s
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
        /// Across the sparse-to-dense switch: any split of the reports, merged in any order,
        /// gives the counts of one pass, in the same form and to the same bytes.
        #[test]
        fn merge_equivalence_across_the_switch(
            values in proptest::collection::vec(0u32..(2 * SPARSE_FROM_DOMAIN as u32), 0..80_000),
            cuts in proptest::collection::vec(0usize..80_000, 0..5),
            reverse in proptest::prelude::any::<bool>(),
        ) {
            let d = 2 * SPARSE_FROM_DOMAIN;
            let whole = fold(d, &values);
            let mut reference = vec![0u64; d];
            for &v in &values {
                reference[v as usize] += 1;
            }
            proptest::prop_assert_eq!(&*whole.counts(), reference.as_slice());
            let mut bounds: Vec<usize> = cuts.iter().map(|&c| c.min(values.len())).collect();
            bounds.extend([0, values.len()]);
            bounds.sort_unstable();
            let mut shards: Vec<CountSketch> =
                bounds.windows(2).map(|w| fold(d, &values[w[0]..w[1]])).collect();
            if reverse {
                shards.reverse();
            }
            let mut merged = CountSketch::new(d);
            for s in &shards {
                merged.merge(s).unwrap();
            }
            proptest::prop_assert_eq!(merged.is_sparse(), whole.is_sparse());
            let bytes = crate::sketch::Sketch::Counts(merged.clone()).to_bytes();
            proptest::prop_assert_eq!(&bytes, &crate::sketch::Sketch::Counts(whole.clone()).to_bytes());
            proptest::prop_assert_eq!(crate::sketch::Sketch::from_bytes(&bytes).unwrap(), crate::sketch::Sketch::Counts(whole));
        }
    }

    #[test]
    fn out_of_domain_values_are_not_added() {
        let d = SPARSE_FROM_DOMAIN + 1;
        let mut s = CountSketch::new(d);
        let (TableMut::Sparse(mut t), _) = s.table_mut() else {
            panic!("sparse")
        };
        assert!(!t.add(d as u32, 1));
        assert!(t.add(d as u32 - 1, 0));
        s.settle();
        assert_eq!(s.nonzero().count(), 0);
    }
}
