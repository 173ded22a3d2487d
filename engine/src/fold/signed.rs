use arrow::array::{Array, Int8Array, UInt32Array};

use crate::sketch::{RejectReason, SignedSketch};

/// Folds (row or cohort index, ±1) pairs: one counter increment per report.
/// `out_of_range` is the reason recorded for an index beyond the sketch's rows.
pub fn fold_signed(
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
