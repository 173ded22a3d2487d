//! The counting kernel of the OLH fold: each report's table slot, `i·g + y` for a good
//! report, `S·g` for an index outside the pool and `S·g + 1` for a bucket outside [g] (a
//! bad index wins, as in [`crate::kernels::ReportCheck::pooled`]), and one increment there.
//!
//! Why it is shaped so (measured in benches/RESULTS.md, "Fold speed and snapshot"):
//! - The slots of a block of 128 reports are computed by vector code into a 512-byte buffer
//!   that stays in L1, then counted. The baseline x86-64 target has no 32-bit vector
//!   multiply (`pmulld` is SSE4.1), so the kernel is also compiled for AVX2 and AVX-512 and
//!   chosen by runtime CPU detection. The AVX-512 kernel uses 256-bit AVX-512VL operations
//!   (compares into mask registers, masked blends): the 512-bit ones were slower.
//! - An OLH report reads 8 bytes where a GenRR report reads 4, and while a block's
//!   increments run, the hardware prefetcher stops running ahead of the two input columns:
//!   without the software prefetch, streaming the input and counting took the sum of their
//!   times instead of overlapping.
//!
//! The AVX-512 intrinsics used here are stable since Rust 1.89, the workspace's
//! `rust-version`.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{
    _mm256_add_epi32, _mm256_cmplt_epu32_mask, _mm256_mask_blend_epi32, _mm256_mask_storeu_epi32,
    _mm256_maskz_loadu_epi32, _mm256_mullo_epi32, _mm256_set1_epi32, _mm_prefetch, _MM_HINT_T0,
};

/// Reports whose slots are computed together.
const BLOCK: usize = 128;
/// Reports per 64-byte line of one input column: one prefetch of each column per group.
const LINE: usize = 16;
/// How far ahead of the block being counted the input columns are prefetched, in reports
/// (256 to 768 measured within noise of each other, with blocks of 64 to 256).
const AHEAD: usize = 384;

/// One block's slots, on a cache-line boundary so that no vector store of them is split
/// across two lines (a split store also cannot forward to the loads that count the slots).
#[repr(align(64))]
struct Slots([u32; BLOCK]);

/// The pool table's shape, with its two rejection slots.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    rows: u32,
    g: u32,
    cells: u32,
}

impl Shape {
    /// `rows · g` must fit u32 with two to spare, which the config's and the codec's
    /// bound (S·g ≤ 2²⁴) guarantees; `None` otherwise.
    pub fn new(rows: usize, g: usize) -> Option<Shape> {
        let (rows, g) = (u32::try_from(rows).ok()?, u32::try_from(g).ok()?);
        let cells = rows.checked_mul(g).filter(|c| c.checked_add(1).is_some())?;
        Some(Shape { rows, g, cells })
    }

    pub fn cells(&self) -> usize {
        self.cells as usize
    }

    #[inline(always)]
    pub fn slot(&self, i: u32, y: u32) -> u32 {
        let good_i = i < self.rows;
        let bad = self.cells.wrapping_add(u32::from(good_i));
        if good_i & (y < self.g) {
            i.wrapping_mul(self.g).wrapping_add(y)
        } else {
            bad
        }
    }
}

/// Adds one to `counts[slot]` for each report of `idx`/`ys` (pairs up to the shorter
/// column). `counts` must hold `shape.cells() + 2` counters, and fewer than u32::MAX reports
/// may go into one `counts`, so that no counter wraps.
pub fn count_slots(idx: &[u32], ys: &[u32], shape: Shape, counts: &mut [u32]) {
    let len = idx.len().min(ys.len());
    let (idx, ys) = (&idx[..len], &ys[..len]);
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vl")
        {
            // SAFETY: the features `count_avx512` enables were detected just above.
            return unsafe { count_avx512(idx, ys, shape, counts) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: as above, for AVX2.
            return unsafe { count_avx2(idx, ys, shape, counts) };
        }
    }
    count_portable(idx, ys, shape, counts)
}

/// The slot loop for the compiler to vectorize (AVX2) or run as it can (baseline).
#[inline(always)]
fn count_portable(idx: &[u32], ys: &[u32], shape: Shape, counts: &mut [u32]) {
    let mut slots = Slots([0; BLOCK]);
    let (mut is, mut yv) = (idx.chunks_exact(BLOCK), ys.chunks_exact(BLOCK));
    for (start, (i, y)) in (0..).step_by(BLOCK).zip((&mut is).zip(&mut yv)) {
        for ((s, &i), &y) in slots.0.iter_mut().zip(i).zip(y) {
            *s = shape.slot(i, y);
        }
        count_block(&slots, idx, ys, start, counts);
    }
    count_rest(is.remainder(), yv.remainder(), shape, counts);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn count_avx2(idx: &[u32], ys: &[u32], shape: Shape, counts: &mut [u32]) {
    count_portable(idx, ys, shape, counts)
}

/// [`Shape::slot`] eight lanes at a time. The compares are unsigned, so the `as i32` casts
/// only carry the bit patterns into the vectors.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl")]
fn count_avx512(idx: &[u32], ys: &[u32], shape: Shape, counts: &mut [u32]) {
    let rows = _mm256_set1_epi32(shape.rows as i32);
    let g = _mm256_set1_epi32(shape.g as i32);
    let bad_index = _mm256_set1_epi32(shape.cells as i32);
    let bad_bucket = _mm256_set1_epi32(shape.cells.wrapping_add(1) as i32);
    let mut slots = Slots([0; BLOCK]);
    let (mut is, mut yv) = (idx.chunks_exact(BLOCK), ys.chunks_exact(BLOCK));
    for (start, (i, y)) in (0..).step_by(BLOCK).zip((&mut is).zip(&mut yv)) {
        let lanes = slots
            .0
            .chunks_exact_mut(8)
            .zip(i.chunks_exact(8).zip(y.chunks_exact(8)));
        for (s, (i, y)) in lanes {
            // SAFETY: each chunk holds exactly eight u32, the 32 bytes that a masked load
            // or store with all eight lanes enabled reads or writes; neither needs alignment.
            let (i, y) = unsafe {
                (
                    _mm256_maskz_loadu_epi32(0xFF, i.as_ptr().cast()),
                    _mm256_maskz_loadu_epi32(0xFF, y.as_ptr().cast()),
                )
            };
            let good_index = _mm256_cmplt_epu32_mask(i, rows);
            let good_bucket = _mm256_cmplt_epu32_mask(y, g);
            let slot = _mm256_add_epi32(_mm256_mullo_epi32(i, g), y);
            let slot = _mm256_mask_blend_epi32(good_bucket, bad_bucket, slot);
            let slot = _mm256_mask_blend_epi32(good_index, bad_index, slot);
            // SAFETY: as for the loads.
            unsafe { _mm256_mask_storeu_epi32(s.as_mut_ptr().cast(), 0xFF, slot) };
        }
        count_block(&slots, idx, ys, start, counts);
    }
    count_rest(is.remainder(), yv.remainder(), shape, counts);
}

/// Counts one block's slots and prefetches the input `AHEAD` reports past `start`.
#[inline(always)]
fn count_block(slots: &Slots, idx: &[u32], ys: &[u32], start: usize, counts: &mut [u32]) {
    for (k, group) in slots.0.chunks_exact(LINE).enumerate() {
        let ahead = start + AHEAD + k * LINE;
        prefetch(idx, ahead);
        prefetch(ys, ahead);
        increment(group, counts);
    }
}

/// The reports after the last whole block.
#[inline(always)]
fn count_rest(idx: &[u32], ys: &[u32], shape: Shape, counts: &mut [u32]) {
    for (&i, &y) in idx.iter().zip(ys) {
        increment(&[shape.slot(i, y)], counts);
    }
}

#[inline(always)]
fn increment(slots: &[u32], counts: &mut [u32]) {
    for &s in slots {
        // Every slot is below S·g + 2; `get_mut` is the bounds check.
        if let Some(c) = counts.get_mut(s as usize) {
            *c = c.wrapping_add(1);
        }
    }
}

/// Asks for the cache line holding `column[at]`. Past the column's end (the last blocks)
/// that is a wasted hint, cheaper than a bounds check on every prefetch.
#[inline(always)]
fn prefetch(column: &[u32], at: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program sees and never faults, whatever the
    // address; `wrapping_add` makes computing an address past the column defined.
    unsafe {
        _mm_prefetch::<_MM_HINT_T0>(column.as_ptr().wrapping_add(at).cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (column, at);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slots of a plain loop, counted one by one.
    fn plain_counts(idx: &[u32], ys: &[u32], shape: Shape) -> Vec<u32> {
        let mut counts = vec![0u32; shape.cells() + 2];
        for (&i, &y) in idx.iter().zip(ys) {
            counts[shape.slot(i, y) as usize] += 1;
        }
        counts
    }

    /// Every kernel this CPU can run (the dispatched one included), on `idx`/`ys`.
    fn every_kernel(idx: &[u32], ys: &[u32], shape: Shape) -> Vec<(&'static str, Vec<u32>)> {
        let fresh = || vec![0u32; shape.cells() + 2];
        let mut out = vec![("dispatched", fresh()), ("portable", fresh())];
        count_slots(idx, ys, shape, &mut out[0].1);
        count_portable(idx, ys, shape, &mut out[1].1);
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            let mut got = fresh();
            // SAFETY: AVX2 was detected just above.
            unsafe { count_avx2(idx, ys, shape, &mut got) };
            out.push(("avx2", got));
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vl")
        {
            let mut got = fresh();
            // SAFETY: the two features were detected just above.
            unsafe { count_avx512(idx, ys, shape, &mut got) };
            out.push(("avx512", got));
        }
        out
    }

    #[test]
    fn every_kernel_gives_the_portable_slots() {
        let shape = Shape::new(7, 5).unwrap();
        // Several blocks and a remainder, bad indices and buckets mixed in.
        let idx: Vec<u32> = (0..1000u32).map(|k| (k * 31) % 9).collect();
        let ys: Vec<u32> = (0..1000u32).map(|k| (k * 17) % 6).collect();
        let expected = plain_counts(&idx, &ys, shape);
        assert!(expected[35] > 0 && expected[36] > 0);
        assert_eq!(expected.iter().sum::<u32>(), 1000);
        for (name, got) in every_kernel(&idx, &ys, shape) {
            assert_eq!(got, expected, "{name}");
        }
    }

    proptest::proptest! {
        /// Any shape, any length (whole blocks, a remainder, none), any values.
        #[test]
        fn every_kernel_counts_as_the_plain_loop(
            rows in 1usize..300,
            g in 1usize..300,
            pairs in proptest::collection::vec(
                (proptest::prelude::any::<u32>(), proptest::prelude::any::<u32>(), 0u8..4),
                0..1000,
            ),
        ) {
            let shape = Shape::new(rows, g).unwrap();
            // Three in four values are folded into range so that good slots dominate.
            let fit = |v: u32, bound: usize, keep: bool| if keep { v } else { v % (bound as u32 + 2) };
            let idx: Vec<u32> = pairs.iter().map(|&(i, _, r)| fit(i, rows, r == 0)).collect();
            let ys: Vec<u32> = pairs.iter().map(|&(_, y, r)| fit(y, g, r == 1)).collect();
            let expected = plain_counts(&idx, &ys, shape);
            for (name, got) in every_kernel(&idx, &ys, shape) {
                proptest::prop_assert_eq!(&got, &expected, "{}", name);
            }
        }
    }

    /// Values at the ends of u32 (where a signed compare or a lost carry would show) and a
    /// shape whose products `i·g` wrap u32 for bad indices.
    #[test]
    fn extreme_values_take_the_rejection_slots() {
        let shape = Shape::new(1 << 12, 1 << 8).unwrap();
        let edge = [
            0,
            1,
            255,
            256,
            4095,
            4096,
            4097,
            1 << 31,
            u32::MAX - 1,
            u32::MAX,
        ];
        let pairs: Vec<(u32, u32)> = (0..300)
            .map(|k| (edge[k % edge.len()], edge[(k / edge.len()) % edge.len()]))
            .collect();
        let idx: Vec<u32> = pairs.iter().map(|p| p.0).collect();
        let ys: Vec<u32> = pairs.iter().map(|p| p.1).collect();
        let expected = plain_counts(&idx, &ys, shape);
        assert_eq!(expected.iter().sum::<u32>(), 300);
        for (name, got) in every_kernel(&idx, &ys, shape) {
            assert_eq!(got, expected, "{name}");
        }
    }

    #[test]
    fn a_shape_without_room_for_the_rejection_slots_is_refused() {
        assert!(Shape::new(1 << 16, 1 << 16).is_none());
        assert!(Shape::new(usize::MAX, 2).is_none());
        assert_eq!(Shape::new(1024, 8).map(|s| s.cells()), Some(8192));
    }
}
