use arrow_array::{Array, UInt32Array};
use arrow_buffer::NullBuffer;

use crate::sketch::{PoolSketch, RejectReason};

use super::pool_slots::{count_slots, Shape};

/// Reports per pass over the 32-bit counters.
const CHUNK: usize = u32::MAX as usize;

/// Folds OLH's (pool index, bucket) pairs into the S × g table: one counter increment per
/// report into a 32-bit copy of the table (allocated once per batch, added into the sketch
/// at the end). A report whose index is not below S is counted as `seed_out_of_pool`;
/// then one whose bucket is not below g as `bucket_out_of_range` (the same order as
/// [`crate::kernels::ReportCheck::pooled`]).
///
/// Reports spread over S·g counters (thousands), so runs on one counter are rare and the
/// laned sub-tables of the GenRR and signed kernels would not pay for themselves. What
/// costs is computing `i·g + y` and reading twice GenRR's bytes per report: the vector
/// kernel [`count_slots`] does both a block at a time, with the input prefetched.
pub fn fold_pool(seed: &UInt32Array, report: &UInt32Array, sketch: &mut PoolSketch) {
    let len = seed.len().min(report.len());
    let shape = Shape::new(sketch.pool_size(), sketch.g());
    // A batch (or a group's share of one) smaller than the table would spend more on
    // zeroing and adding back the 32-bit copy than on its reports.
    let Some(shape) = shape.filter(|s| len >= s.cells()) else {
        fold_pool_direct(seed, report, sketch);
        return;
    };
    let cells = shape.cells();
    let valid = NullBuffer::union(seed.nulls(), report.nulls());
    let (idx, ys) = (&seed.values()[..len], &report.values()[..len]);
    // Two extra slots after the table count the bad indices and the bad buckets, so that
    // every report is one increment at a computed slot, without a branch on the data.
    let (bad_seed_slot, bad_bucket_slot) = (cells, cells + 1);
    let mut nulls = 0u64;
    let (table, n) = sketch.parts_mut();
    let mut flush = |counts: &[u32]| {
        for (t, &c) in table.iter_mut().zip(counts.iter()) {
            *t += u64::from(c);
        }
        (
            u64::from(counts[bad_seed_slot]),
            u64::from(counts[bad_bucket_slot]),
        )
    };
    let (mut bad_seed, mut bad_bucket) = (0u64, 0u64);
    let mut start = 0;
    while start < len {
        let end = (start + CHUNK).min(len);
        // 32-bit counters over the table take half the cache of the u64 sketch; a chunk of
        // at most u32::MAX reports cannot overflow one, so the increments wrap-free add.
        // A batch is one chunk: a fresh copy per chunk is the only zeroing.
        let mut counts = vec![0u32; cells + 2];
        match &valid {
            None => count_slots(&idx[start..end], &ys[start..end], shape, &mut counts),
            Some(valid) => {
                for k in start..end {
                    if valid.is_valid(k) {
                        counts[shape.slot(idx[k], ys[k]) as usize] += 1;
                    } else {
                        nulls += 1;
                    }
                }
            }
        }
        let (s, b) = flush(&counts);
        bad_seed += s;
        bad_bucket += b;
        start = end;
    }
    *n += len as u64 - nulls - bad_seed - bad_bucket;
    let rejected = sketch.rejected_mut();
    rejected.add(RejectReason::Null, nulls);
    rejected.add(RejectReason::SeedOutOfPool, bad_seed);
    rejected.add(RejectReason::BucketOutOfRange, bad_bucket);
}

/// The same fold straight into the u64 table, for batches smaller than it.
pub fn fold_pool_direct(seed: &UInt32Array, report: &UInt32Array, sketch: &mut PoolSketch) {
    let len = seed.len().min(report.len());
    let (g, rows) = (sketch.g(), sketch.pool_size());
    let any_nulls = seed.null_count() > 0 || report.null_count() > 0;
    let (idx, ys) = (seed.values(), report.values());
    let (mut nulls, mut bad_seed, mut bad_bucket) = (0u64, 0u64, 0u64);
    let (table, n) = sketch.parts_mut();
    for k in 0..len {
        if any_nulls && (seed.is_null(k) || report.is_null(k)) {
            nulls += 1;
            continue;
        }
        let (i, y) = (idx[k] as usize, ys[k] as usize);
        if i >= rows {
            bad_seed += 1;
        } else if y >= g {
            bad_bucket += 1;
        } else if let Some(c) = table.get_mut(i * g + y) {
            *c += 1;
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
    use proptest::prelude::*;

    /// The fold as the issue states it, one report at a time into the u64 table.
    fn scalar_fold(pairs: &[Option<(u32, u32)>], sketch: &mut PoolSketch) {
        let (g, rows) = (sketch.g(), sketch.pool_size());
        let (mut nulls, mut bad_seed, mut bad_bucket, mut good) = (0, 0, 0, 0);
        let (table, n) = sketch.parts_mut();
        for pair in pairs {
            match *pair {
                None => nulls += 1,
                Some((i, _)) if i as usize >= rows => bad_seed += 1,
                Some((_, y)) if y as usize >= g => bad_bucket += 1,
                Some((i, y)) => {
                    table[i as usize * g + y as usize] += 1;
                    good += 1;
                }
            }
        }
        *n += good;
        let rejected = sketch.rejected_mut();
        rejected.add(RejectReason::Null, nulls);
        rejected.add(RejectReason::SeedOutOfPool, bad_seed);
        rejected.add(RejectReason::BucketOutOfRange, bad_bucket);
    }

    /// A column value: mostly in range, some just past it, some anywhere in u32.
    fn value(bound: usize) -> impl Strategy<Value = u32> {
        let bound = bound as u32;
        prop_oneof![
            8 => 0..bound,
            1 => bound..bound + 3,
            1 => any::<u32>(),
        ]
    }

    /// A shape and a batch over it; a null seed or bucket is a null report.
    fn batch() -> impl Strategy<Value = (usize, usize, Vec<Option<(u32, u32)>>)> {
        (1usize..80, 1usize..40, any::<bool>()).prop_flat_map(|(rows, g, with_nulls)| {
            let report = (value(rows), value(g), 0u8..50)
                .prop_map(move |(i, y, r)| (!with_nulls || r > 0).then_some((i, y)));
            (
                Just(rows),
                Just(g),
                proptest::collection::vec(report, 0..5000),
            )
        })
    }

    proptest! {
        /// Both kernels (the 32-bit copy with the vector slot kernel, and the direct one)
        /// equal the scalar fold bit for bit, counts and rejections, also when adding to
        /// a table that already holds counts.
        #[test]
        fn every_kernel_equals_the_scalar_fold((rows, g, pairs) in batch(), split in 0usize..5000) {
            let split = split.min(pairs.len());
            let column = |f: fn(&(u32, u32)) -> u32, part: &[Option<(u32, u32)>]| {
                UInt32Array::from(part.iter().map(|p| p.as_ref().map(f)).collect::<Vec<_>>())
            };
            let mut expected = PoolSketch::new(rows, g);
            scalar_fold(&pairs, &mut expected);
            for kernel in [fold_pool, fold_pool_direct] {
                let mut s = PoolSketch::new(rows, g);
                for part in [&pairs[..split], &pairs[split..]] {
                    kernel(&column(|p| p.0, part), &column(|p| p.1, part), &mut s);
                }
                prop_assert_eq!(&s, &expected);
            }
        }
    }

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

    /// The block path (no nulls) and the null-aware path against a plain loop, over
    /// several blocks with bad indices and buckets mixed in.
    #[test]
    fn both_paths_match_a_plain_loop() {
        let (rows, g) = (7usize, 5usize);
        let pairs: Vec<(u32, u32)> = (0..1000u32).map(|k| ((k * 31) % 9, (k * 17) % 6)).collect();
        let mut expected = vec![0u64; rows * g];
        let (mut bad_seed, mut bad_bucket) = (0, 0);
        for &(i, y) in &pairs {
            if i as usize >= rows {
                bad_seed += 1;
            } else if y as usize >= g {
                bad_bucket += 1;
            } else {
                expected[i as usize * g + y as usize] += 1;
            }
        }
        let seeds = UInt32Array::from(pairs.iter().map(|p| p.0).collect::<Vec<_>>());
        let ys = UInt32Array::from(pairs.iter().map(|p| p.1).collect::<Vec<_>>());
        let mut with_null = ys.iter().collect::<Vec<_>>();
        with_null.push(None);
        let mut seeds_null = seeds.iter().collect::<Vec<_>>();
        seeds_null.push(Some(0));
        for (seeds, ys, nulls) in [
            (seeds, ys, 0),
            (
                UInt32Array::from(seeds_null),
                UInt32Array::from(with_null),
                1,
            ),
        ] {
            // 1000 reports over 35 cells take the 32-bit copy; the direct kernel is the
            // one for batches smaller than the table.
            for kernel in [fold_pool, fold_pool_direct] {
                let mut s = PoolSketch::new(rows, g);
                kernel(&seeds, &ys, &mut s);
                assert_eq!(s.table(), &expected[..]);
                assert_eq!(s.rejected().get(RejectReason::SeedOutOfPool), bad_seed);
                assert_eq!(s.rejected().get(RejectReason::BucketOutOfRange), bad_bucket);
                assert_eq!(s.rejected().get(RejectReason::Null), nulls);
                assert_eq!(s.n(), expected.iter().sum::<u64>());
            }
        }
    }
}
