//! The privacy ledger's identity of in-memory rows: a digest of the multiset of rows, the
//! same whatever their order, chunking or partitioning.
//!
//! A ledger refuses a renamed stream over an input another stream's budget was spent on
//! (`ledger::rules`). For files the input is their canonical paths; for in-memory data it
//! must be the rows themselves, or the same rows re-chunked, shuffled, or split across
//! Spark partitions and Ray blocks (whose boundaries change with every repartition) would
//! pass for new data and spend the budget again. Each row's columns (in the stream's
//! order, each in its canonical encoding: [`crate::memory_id::canonical`]) are hashed with
//! XXH3-128, and the digest is the sum of the row hashes modulo 2^128 with the row count.
//! Sums add: the digest of a partition's chunks, merged, is the digest of the partition,
//! and the digest of every partition merged is that of `Job.fold` over all the rows.
//!
//! The guard stops accidents, not a determined user: dropping or changing one row gives
//! another digest, and a sum of hashes can be steered by anyone who chooses the rows.
//! Computed only for streams with a budget (one hash per row).

use arrow_array::ArrayRef;
use arrow_array::RecordBatch;
use arrow_row::{RowConverter, SortField};
use arrow_schema::ArrowError;
use rayon::prelude::*;
use twox_hash::xxhash3_128::Hasher;

use crate::memory_id::{canonical, Role};

/// Rows per piece the digest is computed over, in parallel.
const PIECE_ROWS: usize = 1 << 16;

/// The multiset digest of some rows: the sum of their hashes and their count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowDigest {
    pub sum: u128,
    pub rows: u64,
}

impl RowDigest {
    /// The digest of no rows.
    pub const EMPTY: RowDigest = RowDigest { sum: 0, rows: 0 };

    /// The digest of the rows of `batches` over `columns` (each with its role); a column
    /// the batches lack is left out (the fold's schema check refuses it first).
    pub fn of(batches: &[RecordBatch], columns: &[(&str, Role)]) -> Result<RowDigest, ArrowError> {
        let pieces: Vec<(usize, usize)> = batches
            .iter()
            .enumerate()
            .flat_map(|(b, batch)| {
                (0..batch.num_rows())
                    .step_by(PIECE_ROWS)
                    .map(move |start| (b, start))
            })
            .collect();
        pieces
            .par_iter()
            .map(|&(b, start)| {
                let batch = &batches[b];
                let len = PIECE_ROWS.min(batch.num_rows() - start);
                let arrays: Vec<ArrayRef> = columns
                    .iter()
                    .filter_map(|(name, role)| {
                        batch
                            .column_by_name(name)
                            .map(|c| canonical(&c.slice(start, len), *role))
                    })
                    .collect();
                piece_digest(&arrays, len)
            })
            .try_reduce(|| RowDigest::EMPTY, |a, b| Ok(a.plus(b)))
    }

    /// The digest of both digests' rows together.
    pub fn plus(self, other: RowDigest) -> RowDigest {
        RowDigest {
            sum: self.sum.wrapping_add(other.sum),
            rows: self.rows.saturating_add(other.rows),
        }
    }

    /// `rows:<32 hex digits>:<row count>`, as sketch files carry it.
    pub fn label(&self) -> String {
        format!("rows:{:032x}:{}", self.sum, self.rows)
    }

    /// The digest a [`Self::label`] names; None for anything else.
    pub fn parse(label: &str) -> Option<RowDigest> {
        let rest = label.strip_prefix("rows:")?;
        let (sum, rows) = rest.split_once(':')?;
        if sum.len() != 32 {
            return None;
        }
        Some(RowDigest {
            sum: u128::from_str_radix(sum, 16).ok()?,
            rows: rows.parse().ok()?,
        })
    }
}

fn piece_digest(arrays: &[ArrayRef], len: usize) -> Result<RowDigest, ArrowError> {
    if arrays.is_empty() {
        return Ok(RowDigest {
            sum: 0,
            rows: len as u64,
        });
    }
    let fields = arrays
        .iter()
        .map(|a| SortField::new(a.data_type().clone()))
        .collect();
    let rows = RowConverter::new(fields)?.convert_columns(arrays)?;
    let sum = rows.iter().fold(0u128, |s, row| {
        s.wrapping_add(Hasher::oneshot(row.as_ref()))
    });
    Ok(RowDigest {
        sum,
        rows: len as u64,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int64Array, StringArray, StringViewArray, UInt32Array};
    use arrow_schema::{DataType, Field, Schema};

    use super::*;

    fn batch(reports: Vec<u32>, groups: Vec<&str>, ts: Vec<i64>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("report", DataType::UInt32, false),
            Field::new("g", DataType::Utf8, false),
            Field::new("ts", DataType::Int64, false),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(UInt32Array::from(reports)),
                Arc::new(StringArray::from(groups)),
                Arc::new(Int64Array::from(ts)),
            ],
        )
        .unwrap()
    }

    const COLUMNS: [(&str, Role); 3] = [
        ("report", Role::Values),
        ("g", Role::Label),
        ("ts", Role::EventTime),
    ];

    /// Issue 43 (ledger_rechunk, part 2): the same rows in another order, cut into other
    /// batches, or split and digested apart and added, have one digest; another row, or
    /// a row moved to another group, another.
    #[test]
    fn the_same_rows_in_any_order_or_partition_have_one_digest() {
        let all = batch(vec![1, 2, 3, 1], vec!["a", "b", "a", "b"], vec![5, 6, 7, 8]);
        let d = RowDigest::of(std::slice::from_ref(&all), &COLUMNS).unwrap();
        assert_eq!(d.rows, 4);
        let shuffled = [
            batch(vec![1], vec!["b"], vec![8]),
            batch(vec![3, 1, 2], vec!["a", "a", "b"], vec![7, 5, 6]),
        ];
        assert_eq!(RowDigest::of(&shuffled, &COLUMNS).unwrap(), d);
        let parts = [all.slice(0, 1), all.slice(1, 3)];
        let added = RowDigest::of(&parts[..1], &COLUMNS)
            .unwrap()
            .plus(RowDigest::of(&parts[1..], &COLUMNS).unwrap());
        assert_eq!(added, d);
        let regrouped = batch(vec![1, 2, 3, 1], vec!["a", "b", "b", "b"], vec![5, 6, 7, 8]);
        assert_ne!(RowDigest::of(&[regrouped], &COLUMNS).unwrap(), d);
        let fewer = all.slice(0, 3);
        assert_ne!(RowDigest::of(&[fewer], &COLUMNS).unwrap(), d);
        assert_eq!(RowDigest::parse(&d.label()), Some(d));
        assert_eq!(RowDigest::parse("rows:12:3"), None);
    }

    /// A group column as polars hands it (Utf8View) digests as pyarrow's Utf8.
    #[test]
    fn string_layouts_digest_alike() {
        let utf8 = batch(vec![1, 2], vec!["a", "b"], vec![1, 2]);
        let view = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("report", DataType::UInt32, false),
                Field::new("g", DataType::Utf8View, false),
                Field::new("ts", DataType::Int64, false),
            ])),
            vec![
                utf8.column(0).clone(),
                Arc::new(StringViewArray::from(vec!["a", "b"])),
                utf8.column(2).clone(),
            ],
        )
        .unwrap();
        assert_eq!(
            RowDigest::of(&[utf8], &COLUMNS).unwrap(),
            RowDigest::of(&[view], &COLUMNS).unwrap()
        );
    }
}
