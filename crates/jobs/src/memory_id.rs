//! The input identity of in-memory Arrow data (the Python package's `Job.fold` without an
//! explicit `input_id`): what a Parquet file's [`crate::sketch_file::input_id`] is to a file,
//! so that `merge` still refuses the same data folded twice (ARCHITECTURE.md invariant 10
//! keys budgets to the data, and a sketch file's inputs are how a merge sees it).
//!
//! It is an XXH3-128 of the columns the stream reads, each hashed as one logical column of
//! values in row order: the same rows have one identity however they are cut into batches
//! or chunks, sliced out of larger arrays, or laid out by another library (pyarrow's Utf8,
//! polars' Utf8View and a dictionary of strings are one string column; bytes under null
//! slots are never read). Each column is cut into blocks of [`BLOCK_ROWS`] rows by their
//! global index, hashed in parallel, and the block digests hashed in order. The label
//! `xxh3-128-rows:` tells these identities from the layout-dependent `xxh3-128:` of older
//! builds.
//!
//! Why not SHA-256, as a file's identity is: this hash reads every byte of the data, and
//! SHA-256 (about 0.8 GB/s per core here) took three times as long as the fold itself
//! (benches/RESULTS.md, "Python package"), while XXH3 runs at memory speed. The identity
//! only has to tell inputs apart by accident: a deliberate collision could only make
//! `merge` refuse two different inputs, and anyone can give the same data two identities
//! by passing `input_id`, so collision resistance buys nothing here.

use std::ops::Range;

use arrow_array::RecordBatch;
use arrow_array::{Array, ArrayRef};
use arrow_buffer::Buffer;
use arrow_cast::cast;
use arrow_data::ArrayData;
use arrow_row::{RowConverter, SortField};
use arrow_schema::{DataType, TimeUnit};
use ldpstream_engine::stream::ReportLayout;
use rayon::prelude::*;
use twox_hash::xxhash3_128::Hasher;

/// The prefix of an in-memory input's name in a sketch file's header, where a Parquet
/// input has its canonical path: it is not a path, and must not be made one.
pub const MEMORY_INPUT: &str = "arrow:";

/// Rows per hashed block: large enough that a block's digest costs nothing beside its
/// data, small enough to spread a single large chunk over every core.
pub const BLOCK_ROWS: usize = 1 << 20;

/// How a column is read before it is hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A report or index column, hashed as its type.
    Values,
    /// A group (or two-sample `by`) column: any string encoding, as the text.
    Label,
    /// The event-time column: milliseconds, as the fold reads it.
    EventTime,
}

/// `array` in the one encoding its role has, so that the encodings the fold treats alike
/// hash alike: strings of any layout as LargeUtf8, event times as Int64 milliseconds.
/// A column that cannot be cast (the fold refuses it later) is kept as it is.
pub fn canonical(array: &ArrayRef, role: Role) -> ArrayRef {
    let target = match (role, array.data_type()) {
        (Role::Label, DataType::LargeUtf8) => return array.clone(),
        (Role::Label, _) => DataType::LargeUtf8,
        (Role::EventTime, DataType::Int64) => return array.clone(),
        (Role::EventTime, DataType::Timestamp(TimeUnit::Millisecond, _)) => DataType::Int64,
        (Role::EventTime, DataType::Timestamp(..)) => {
            return cast(array, &DataType::Timestamp(TimeUnit::Millisecond, None))
                .and_then(|ms| cast(&ms, &DataType::Int64))
                .unwrap_or_else(|_| array.clone());
        }
        _ => return array.clone(),
    };
    cast(array, &target).unwrap_or_else(|_| array.clone())
}

/// The columns a stream reads, each with its role: the report and index columns, the
/// group columns (`group_by` and two-sample `by`), and the event time.
pub fn stream_roles(layout: &ReportLayout) -> Vec<(&str, Role)> {
    std::iter::once((layout.report.as_str(), Role::Values))
        .chain(layout.index.iter().map(|i| (i.as_str(), Role::Values)))
        .chain(layout.group_by.iter().map(|g| (g.as_str(), Role::Label)))
        .chain(std::iter::once((layout.ts.as_str(), Role::EventTime)))
        .collect()
}

/// The content identity (`xxh3-128-rows:<32 hex digits>`) of the columns `columns` of
/// `batches`, each with its role; a column no batch has is skipped (the fold's schema
/// check refuses it first).
pub fn content_id(batches: &[RecordBatch], columns: &[(&str, Role)]) -> String {
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let mut all = Hasher::new();
    all.write(&(rows as u64).to_le_bytes());
    for (name, role) in columns {
        let chunks: Vec<ArrayRef> = batches
            .iter()
            .filter_map(|b| b.column_by_name(name))
            .map(|c| canonical(c, *role))
            .collect();
        if chunks.is_empty() {
            continue;
        }
        all.write(&(name.len() as u64).to_le_bytes());
        all.write(name.as_bytes());
        all.write(&column_digest(&chunks).to_le_bytes());
    }
    format!("xxh3-128-rows:{:032x}", all.finish_128())
}

/// One column's digest: its type, its row count and its blocks' digests in order.
fn column_digest(chunks: &[ArrayRef]) -> u128 {
    let mut starts = Vec::with_capacity(chunks.len() + 1);
    let mut row = 0usize;
    for c in chunks {
        starts.push(row);
        row += c.len();
    }
    starts.push(row);
    let blocks: Vec<u128> = (0..row.div_ceil(BLOCK_ROWS))
        .into_par_iter()
        .map(|b| {
            block_digest(
                chunks,
                &starts,
                b * BLOCK_ROWS,
                ((b + 1) * BLOCK_ROWS).min(row),
            )
        })
        .collect();
    let mut h = Hasher::new();
    // Chunks of one column share a type; the first names it.
    h.write(chunks[0].data_type().to_string().as_bytes());
    h.write(&(row as u64).to_le_bytes());
    for d in blocks {
        h.write(&d.to_le_bytes());
    }
    h.finish_128()
}

/// The streams one block is hashed into. XXH3's streaming state equals the one-shot hash
/// of everything written, whatever the write boundaries, which is what makes the digest
/// independent of where chunks end.
struct BlockHashers {
    /// The values, null slots zeroed (fixed width) or skipped (row encoding).
    values: Hasher,
    /// The global row index of every null (fixed width; the row encoding marks its own).
    nulls: Hasher,
}

fn block_digest(chunks: &[ArrayRef], starts: &[usize], lo: usize, hi: usize) -> u128 {
    let mut h = BlockHashers {
        values: Hasher::new(),
        nulls: Hasher::new(),
    };
    // The first chunk holding row `lo`: the last whose start is at or before it.
    let first = starts.partition_point(|&s| s <= lo).saturating_sub(1);
    for (c, chunk) in chunks.iter().enumerate().skip(first) {
        let (start, end) = (starts[c], starts[c + 1]);
        if start >= hi {
            break;
        }
        let from = lo.max(start);
        let to = hi.min(end);
        if from < to {
            hash_range(&mut h, chunk, from - start, to - from, from);
        }
    }
    let mut out = Hasher::new();
    out.write(&h.values.finish_128().to_le_bytes());
    out.write(&h.nulls.finish_128().to_le_bytes());
    out.finish_128()
}

/// Rows `[start, start + len)` of `array`, whose first is global row `global`.
fn hash_range(h: &mut BlockHashers, array: &ArrayRef, start: usize, len: usize, global: usize) {
    if let Some((buffer, width, range)) = fixed_width(array, start, len) {
        let bytes = &buffer.as_slice()[range];
        match array
            .nulls()
            .filter(|n| n.slice(start, len).null_count() > 0)
        {
            None => h.values.write(bytes),
            Some(nulls) => {
                let mut copy = bytes.to_vec();
                for i in 0..len {
                    if nulls.is_null(start + i) {
                        copy[i * width..(i + 1) * width].fill(0);
                        h.nulls.write(&((global + i) as u64).to_le_bytes());
                    }
                }
                h.values.write(&copy);
            }
        }
        return;
    }
    // Any other type, by arrow's row encoding: a function of each row's value (nulls
    // included), whatever the layout. Each row is written with its length.
    let slice = array.slice(start, len);
    let rows = RowConverter::new(vec![SortField::new(slice.data_type().clone())])
        .and_then(|c| c.convert_columns(std::slice::from_ref(&slice)));
    match rows {
        Ok(rows) => {
            for row in rows.iter() {
                let bytes = row.as_ref();
                h.values.write(&(bytes.len() as u64).to_le_bytes());
                h.values.write(bytes);
            }
        }
        // A type the row encoding lacks (the fold refuses every such report column):
        // its buffers as laid out, which still tells other data apart.
        Err(_) => hash_layout(&mut h.values, &slice.to_data()),
    }
}

/// For a fixed-width column (primitive, FixedSizeBinary, or a FixedSizeList of a
/// primitive without nulls): its value buffer, each row's width in bytes, and the bytes
/// of rows `[start, start + len)` in it. None for any other column.
fn fixed_width(
    array: &ArrayRef,
    start: usize,
    len: usize,
) -> Option<(Buffer, usize, Range<usize>)> {
    let data = array.to_data();
    // The value buffer, a row's width, and the byte where row 0 of `array` starts.
    let (buffer, width, base) = match array.data_type() {
        DataType::FixedSizeBinary(w) => {
            let w = usize::try_from(*w).ok()?;
            (
                data.buffers().first()?.clone(),
                w,
                data.offset().checked_mul(w)?,
            )
        }
        DataType::FixedSizeList(_, n) => {
            let child = data.child_data().first()?;
            if child.nulls().is_some_and(|n| n.null_count() > 0) {
                return None;
            }
            let n = usize::try_from(*n).ok()?;
            let w = child.data_type().primitive_width()?;
            let first = child.offset().checked_add(data.offset().checked_mul(n)?)?;
            (
                child.buffers().first()?.clone(),
                n.checked_mul(w)?,
                first.checked_mul(w)?,
            )
        }
        t => {
            let w = t.primitive_width()?;
            (
                data.buffers().first()?.clone(),
                w,
                data.offset().checked_mul(w)?,
            )
        }
    };
    let from = base.checked_add(start.checked_mul(width)?)?;
    let to = from.checked_add(len.checked_mul(width)?)?;
    (to <= buffer.len()).then_some((buffer, width, from..to))
}

fn hash_layout(h: &mut Hasher, data: &ArrayData) {
    h.write(data.data_type().to_string().as_bytes());
    h.write(&(data.len() as u64).to_le_bytes());
    h.write(&(data.offset() as u64).to_le_bytes());
    for buffer in data.buffers() {
        h.write(&(buffer.len() as u64).to_le_bytes());
        h.write(buffer.as_slice());
    }
    for child in data.child_data() {
        hash_layout(h, child);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::types::Int32Type;
    use arrow_array::{
        DictionaryArray, FixedSizeListArray, Float64Array, StringArray, StringViewArray,
        UInt32Array,
    };
    use arrow_buffer::NullBuffer;
    use arrow_schema::{Field, Schema};

    use super::*;

    fn batch(column: ArrayRef) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new(
            "r",
            column.data_type().clone(),
            true,
        )]));
        RecordBatch::try_new(schema, vec![column]).unwrap()
    }

    fn u32s(values: Vec<u32>) -> RecordBatch {
        batch(Arc::new(UInt32Array::from(values)))
    }

    fn id(batches: &[RecordBatch], role: Role) -> String {
        content_id(batches, &[("r", role)])
    }

    /// Issue 43 (ledger_rechunk, part 1): the identity was per batch and per buffer, so
    /// the same rows in two chunks (or a slice of a larger array) were another input.
    #[test]
    fn the_same_rows_have_one_identity_however_they_are_chunked() {
        let a = id(&[u32s(vec![1, 2, 3])], Role::Values);
        assert_eq!(a, id(&[u32s(vec![1, 2, 3])], Role::Values));
        assert_eq!(a, id(&[u32s(vec![1]), u32s(vec![2, 3])], Role::Values));
        // A slice (offset 1) of a larger array.
        assert_eq!(
            a,
            id(&[u32s(vec![9, 1, 2, 3, 9]).slice(1, 3)], Role::Values)
        );
        assert_ne!(a, id(&[u32s(vec![1, 2, 4])], Role::Values));
        assert_ne!(a, id(&[u32s(vec![1, 2])], Role::Values));
        assert!(a.starts_with("xxh3-128-rows:") && a.len() == 14 + 32, "{a}");
    }

    #[test]
    fn bytes_under_nulls_are_not_read() {
        let nulls = NullBuffer::from(vec![true, false, true]);
        let one = UInt32Array::new(vec![1, 7, 3].into(), Some(nulls.clone()));
        let two = UInt32Array::new(vec![1, 8, 3].into(), Some(nulls));
        assert_eq!(
            id(&[batch(Arc::new(one))], Role::Values),
            id(&[batch(Arc::new(two))], Role::Values)
        );
        let none = UInt32Array::from(vec![1, 0, 3]);
        assert_ne!(
            id(&[batch(Arc::new(none))], Role::Values),
            id(&[u32s(vec![1, 7, 3])], Role::Values)
        );
    }

    #[test]
    fn strings_of_any_layout_and_chunking_are_one_column() {
        let utf8 = id(
            &[batch(Arc::new(StringArray::from(vec!["a", "bb", "a"])))],
            Role::Label,
        );
        let split = id(
            &[
                batch(Arc::new(StringArray::from(vec!["a"]))),
                batch(Arc::new(
                    StringArray::from(vec!["x", "bb", "a"]).slice(1, 2),
                )),
            ],
            Role::Label,
        );
        let view = id(
            &[batch(Arc::new(StringViewArray::from(vec!["a", "bb", "a"])))],
            Role::Label,
        );
        let dictionary: DictionaryArray<Int32Type> = vec!["a", "bb", "a"].into_iter().collect();
        let dictionary = id(&[batch(Arc::new(dictionary))], Role::Label);
        assert_eq!(utf8, split);
        assert_eq!(utf8, view);
        assert_eq!(utf8, dictionary);
        let other = id(
            &[batch(Arc::new(StringArray::from(vec!["ab", "b", "a"])))],
            Role::Label,
        );
        assert_ne!(utf8, other);
    }

    #[test]
    fn fixed_size_lists_are_read_from_their_offset() {
        let values = Float64Array::from(vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        let field = Arc::new(Field::new("item", DataType::Float64, false));
        let list = FixedSizeListArray::new(field.clone(), 2, Arc::new(values), None);
        let whole = id(&[batch(Arc::new(list.clone()))], Role::Values);
        let parts = id(
            &[
                batch(Arc::new(list.slice(0, 1))),
                batch(Arc::new(list.slice(1, 2))),
            ],
            Role::Values,
        );
        assert_eq!(whole, parts);
        let tail = id(&[batch(Arc::new(list.slice(1, 2)))], Role::Values);
        let fresh = FixedSizeListArray::new(
            field,
            2,
            Arc::new(Float64Array::from(vec![2.0, 3.0, 4.0, 5.0])),
            None,
        );
        assert_eq!(tail, id(&[batch(Arc::new(fresh))], Role::Values));
    }

    /// Blocks cut every BLOCK_ROWS rows by global index, so chunk ends inside or across
    /// blocks do not matter.
    #[test]
    fn chunks_across_block_boundaries() {
        let n = BLOCK_ROWS + 1000;
        let values: Vec<u32> = (0..n as u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let whole = id(&[u32s(values.clone())], Role::Values);
        let cut = BLOCK_ROWS - 17;
        let parts = [u32s(values[..cut].to_vec()), u32s(values[cut..].to_vec())];
        assert_eq!(whole, id(&parts, Role::Values));
    }
}
