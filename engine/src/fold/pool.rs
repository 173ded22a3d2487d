use arrow::array::{Array, UInt32Array};
use arrow::buffer::NullBuffer;

use crate::sketch::{PoolSketch, RejectReason};

/// Folds OLH's (pool index, bucket) pairs into the S × g table: one bounds check and one
/// counter increment per report, no allocation. A report whose index is not below S is
/// counted as `seed_out_of_pool`; then one whose bucket is not below g as
/// `bucket_out_of_range` (the same order as [`crate::fold::ReportCheck::pooled`]).
///
/// Reports spread over S·g counters (thousands), so runs on one counter are rare and the
/// laned sub-tables of the GenRR and signed kernels would not pay for themselves.
pub fn fold_pool(seed: &UInt32Array, report: &UInt32Array, sketch: &mut PoolSketch) {
    let len = seed.len().min(report.len());
    let g = sketch.g();
    let rows = sketch.pool_size();
    let valid = NullBuffer::union(seed.nulls(), report.nulls());
    let (idx, ys) = (&seed.values()[..len], &report.values()[..len]);
    let (mut bad_seed, mut bad_bucket, mut nulls) = (0u64, 0u64, 0u64);
    let (table, n) = sketch.parts_mut();
    let mut add = |i: u32, y: u32| {
        let (i, y) = (i as usize, y as usize);
        if i >= rows {
            bad_seed += 1;
        } else if y >= g {
            bad_bucket += 1;
        } else {
            table[i * g + y] += 1;
        }
    };
    match &valid {
        None => {
            for (&i, &y) in idx.iter().zip(ys) {
                add(i, y);
            }
        }
        Some(valid) => {
            for (k, (&i, &y)) in idx.iter().zip(ys).enumerate() {
                if valid.is_valid(k) {
                    add(i, y);
                } else {
                    nulls += 1;
                }
            }
        }
    }
    *n += len as u64 - nulls - bad_seed - bad_bucket;
    let rejected = sketch.rejected_mut();
    rejected.add(RejectReason::Null, nulls);
    rejected.add(RejectReason::SeedOutOfPool, bad_seed);
    rejected.add(RejectReason::BucketOutOfRange, bad_bucket);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_cells_and_names_each_rejection() {
        let seeds = UInt32Array::from(vec![Some(0), Some(2), Some(3), Some(1), None, Some(2)]);
        let ys = UInt32Array::from(vec![Some(1), Some(0), Some(0), Some(2), Some(0), Some(1)]);
        let mut s = PoolSketch::new(3, 2);
        fold_pool(&seeds, &ys, &mut s);
        assert_eq!(s.table(), &[0, 1, 0, 0, 1, 1]);
        assert_eq!(s.n(), 3);
        assert_eq!(s.rejected().get(RejectReason::SeedOutOfPool), 1);
        assert_eq!(s.rejected().get(RejectReason::BucketOutOfRange), 1);
        assert_eq!(s.rejected().get(RejectReason::Null), 1);
    }
}
