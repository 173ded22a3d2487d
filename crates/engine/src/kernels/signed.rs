use arrow_array::{Array, Int8Array, UInt32Array};
use arrow_buffer::NullBuffer;

use crate::sketch::{RejectReason, SignedSketch};

/// Above this many rows the per-lane tables (four of `2·rows + 3` 32-bit counters) no
/// longer fit in L1, and the direct kernel is used.
const MAX_LANED_ROWS: usize = 2048;
/// Lane counters are 32-bit: a chunk of at most this many reports cannot overflow one.
const CHUNK: usize = u32::MAX as usize;
const LANES: usize = 4;

/// Folds (row or cohort index, ±1) pairs into the sketch's plus and minus counters.
/// `out_of_range` is the reason recorded for an index beyond the sketch's rows.
///
/// Every report lands in one slot of a small table, without a branch: slots `2j` and
/// `2j + 1` are row j's +1 and −1, and three more slots count nulls, bad indices and bad
/// signs. The reports go round four copies of that table, so that runs of one row do not
/// wait on one counter, and the copies are added into the sketch once per batch.
pub fn fold_signed(
    index: &UInt32Array,
    report: &Int8Array,
    sketch: &mut SignedSketch,
    out_of_range: RejectReason,
) {
    let rows = sketch.parts_mut().0.len();
    if rows > MAX_LANED_ROWS || index.len() != report.len() || index.len() < rows {
        fold_signed_scalar(index, report, sketch, out_of_range);
        return;
    }
    let valid = NullBuffer::union(index.nulls(), report.nulls());
    let stride = 2 * rows + 3;
    let (bad_index_slot, bad_sign_slot, null_slot) = (2 * rows, 2 * rows + 1, 2 * rows + 2);
    let mut table = vec![0u64; stride];
    let mut lanes = vec![0u32; LANES * stride];
    let (idx, sig) = (index.values(), report.values());
    let slot = |i: usize| -> usize {
        let (j, s) = (idx[i] as usize, sig[i]);
        // s + 1 is 2 for +1 and 0 for −1: clearing bit 1 leaves zero exactly for ±1.
        let signed = (s as u8).wrapping_add(1) & !2 == 0;
        let negative = usize::from(s < 0);
        if j >= rows {
            bad_index_slot
        } else if signed {
            2 * j + negative
        } else {
            bad_sign_slot
        }
    };
    let mut start = 0;
    while start < idx.len() {
        let end = (start + CHUNK).min(idx.len());
        match &valid {
            None => {
                let mut i = start;
                while i + LANES <= end {
                    for lane in 0..LANES {
                        lanes[lane * stride + slot(i + lane)] += 1;
                    }
                    i += LANES;
                }
                for i in i..end {
                    lanes[slot(i)] += 1;
                }
            }
            Some(valid) => {
                for i in start..end {
                    let s = if valid.is_valid(i) {
                        slot(i)
                    } else {
                        null_slot
                    };
                    lanes[(i % LANES) * stride + s] += 1;
                }
            }
        }
        for lane in lanes.chunks_exact(stride) {
            for (t, &c) in table.iter_mut().zip(lane) {
                *t += u64::from(c);
            }
        }
        lanes.fill(0);
        start = end;
    }
    let (plus, minus, n) = sketch.parts_mut();
    for (j, pair) in table[..2 * rows].chunks_exact(2).enumerate() {
        plus[j] += pair[0];
        minus[j] += pair[1];
    }
    *n += table[..2 * rows].iter().sum::<u64>();
    let rejected = sketch.rejected_mut();
    rejected.add(RejectReason::Null, table[null_slot]);
    rejected.add(out_of_range, table[bad_index_slot]);
    rejected.add(RejectReason::NotPlusMinusOne, table[bad_sign_slot]);
}

/// The scalar fold: one branch and one counter increment per report. It is the reference
/// the laned kernel is tested against, and the kernel for tables too large for L1.
pub fn fold_signed_scalar(
    index: &UInt32Array,
    report: &Int8Array,
    sketch: &mut SignedSketch,
    out_of_range: RejectReason,
) {
    let len = index.len().min(report.len());
    let (mut nulls, mut bad_index, mut bad_sign, mut folded) = (0u64, 0u64, 0u64, 0u64);
    let any_nulls = index.null_count() > 0 || report.null_count() > 0;
    let (idx, sig) = (index.values(), report.values());
    let (plus, minus, n) = sketch.parts_mut();
    let rows = plus.len();
    for i in 0..len {
        if any_nulls && (index.is_null(i) || report.is_null(i)) {
            nulls += 1;
            continue;
        }
        let j = idx[i] as usize;
        if j >= rows {
            bad_index += 1;
            continue;
        }
        match sig[i] {
            1 => plus[j] += 1,
            -1 => minus[j] += 1,
            _ => {
                bad_sign += 1;
                continue;
            }
        }
        folded += 1;
    }
    *n += folded;
    let rejected = sketch.rejected_mut();
    rejected.add(RejectReason::Null, nulls);
    rejected.add(out_of_range, bad_index);
    rejected.add(RejectReason::NotPlusMinusOne, bad_sign);
}
