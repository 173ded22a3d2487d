//! The input identity of in-memory Arrow data (the Python package's `Job.fold` without an
//! explicit `input_id`): what a Parquet file's [`crate::sketch_file::input_id`] is to a file,
//! so that `merge` still refuses the same data folded twice (ARCHITECTURE.md invariant 10
//! keys budgets to the data, and a sketch file's inputs are how a merge sees it).
//!
//! It is an XXH3-128 of the columns the stream reads, buffer by buffer as handed over (type,
//! length, offset, validity and data buffers, children), batch by batch in order. The same
//! data passed twice has one identity; the same values laid out differently in memory (a
//! slice of a larger array, another library's buffers) may not, so a caller that
//! re-materialises data should pass its own `input_id`.
//!
//! Why not SHA-256, as a file's identity is: this hash reads every byte of the data, and
//! SHA-256 (about 0.8 GB/s per core here) took three times as long as the fold itself
//! (benches/RESULTS.md, "Python package"), while XXH3 runs at memory speed. The identity
//! only has to tell inputs apart by accident: a deliberate collision could only make
//! `merge` refuse two different inputs, and anyone can give the same data two identities
//! by passing `input_id`, so collision resistance buys nothing here.

use arrow::array::ArrayData;
use arrow::record_batch::RecordBatch;
use rayon::prelude::*;
use twox_hash::xxhash3_128::Hasher;

/// The prefix of an in-memory input's name in a sketch file's header, where a Parquet
/// input has its canonical path: it is not a path, and must not be made one.
pub const MEMORY_INPUT: &str = "arrow:";

/// The content identity (`xxh3-128:<32 hex digits>`) of `batches`' columns named in `columns` (absent
/// columns are skipped: the fold's schema check refuses them first).
pub fn content_id(batches: &[RecordBatch], columns: &[&str]) -> String {
    let digests: Vec<u128> = batches
        .par_iter()
        .map(|batch| {
            let mut h = Hasher::new();
            h.write(&(batch.num_rows() as u64).to_le_bytes());
            for name in columns {
                if let Some(column) = batch.column_by_name(name) {
                    h.write(name.as_bytes());
                    hash_data(&mut h, &column.to_data());
                }
            }
            h.finish_128()
        })
        .collect();
    let mut all = Hasher::new();
    all.write(&(digests.len() as u64).to_le_bytes());
    for d in &digests {
        all.write(&d.to_le_bytes());
    }
    format!("xxh3-128:{:032x}", all.finish_128())
}

fn hash_data(h: &mut Hasher, data: &ArrayData) {
    h.write(data.data_type().to_string().as_bytes());
    h.write(&(data.len() as u64).to_le_bytes());
    h.write(&(data.offset() as u64).to_le_bytes());
    match data.nulls() {
        Some(nulls) => {
            h.write(&[1]);
            h.write(nulls.buffer().as_slice());
        }
        None => h.write(&[0]),
    }
    for buffer in data.buffers() {
        h.write(&(buffer.len() as u64).to_le_bytes());
        h.write(buffer.as_slice());
    }
    for child in data.child_data() {
        hash_data(h, child);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::UInt32Array;
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    fn batch(values: Vec<u32>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("r", DataType::UInt32, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(UInt32Array::from(values))]).unwrap()
    }

    #[test]
    fn same_data_same_identity_other_data_another() {
        let a = content_id(&[batch(vec![1, 2, 3])], &["r"]);
        assert_eq!(a, content_id(&[batch(vec![1, 2, 3])], &["r"]));
        assert_ne!(a, content_id(&[batch(vec![1, 2, 4])], &["r"]));
        assert_ne!(a, content_id(&[batch(vec![1]), batch(vec![2, 3])], &["r"]));
        assert!(a.starts_with("xxh3-128:") && a.len() == 9 + 32, "{a}");
    }
}
