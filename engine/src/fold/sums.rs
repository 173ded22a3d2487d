use arrow::array::{Array, FixedSizeListArray, Float32Array, Float64Array};

use crate::sketch::{RejectReason, SumSketch};

/// Folds noisy one-hot vectors (`FixedSizeList<Float32|Float64, d>`) into fixed-point
/// coordinate sums. A vector of the wrong length, or with any coordinate that is not finite
/// or beyond ±2³¹, is rejected whole.
pub fn fold_sums(array: &FixedSizeListArray, sketch: &mut SumSketch) {
    let d = sketch.sums().len();
    let nulls = array.null_count() as u64;
    if array.value_length() as usize != d {
        sketch
            .rejected_mut()
            .add(RejectReason::BadSize, array.len() as u64 - nulls);
        sketch.rejected_mut().add(RejectReason::Null, nulls);
        return;
    }
    let values = array.values();
    let contiguous = values.len() == array.len() * d && values.null_count() == 0;
    let mut row = vec![0i128; d];
    let mut non_finite = 0u64;
    let (sums, n) = sketch.parts_mut();
    let mut add = |row: &[i128]| {
        for (s, x) in sums.iter_mut().zip(row) {
            *s += x;
        }
        *n += 1;
    };
    for i in 0..array.len() {
        if nulls > 0 && array.is_null(i) {
            continue;
        }
        let ok = if contiguous {
            fixed_row(values.as_ref(), i * d, d, &mut row)
        } else {
            let v = array.value(i);
            v.null_count() == 0 && fixed_row(v.as_ref(), 0, d, &mut row)
        };
        if ok {
            add(&row);
        } else {
            non_finite += 1;
        }
    }
    sketch
        .rejected_mut()
        .add(RejectReason::NonFinite, non_finite);
    sketch.rejected_mut().add(RejectReason::Null, nulls);
}

/// Converts `d` floats starting at `start` to fixed point; false if any is unusable or the
/// child is not a float array.
fn fixed_row(values: &dyn Array, start: usize, d: usize, out: &mut [i128]) -> bool {
    if let Some(f) = values.as_any().downcast_ref::<Float64Array>() {
        convert(&f.values()[start..start + d], out, |x| x)
    } else if let Some(f) = values.as_any().downcast_ref::<Float32Array>() {
        convert(&f.values()[start..start + d], out, f64::from)
    } else {
        false
    }
}

fn convert<T: Copy>(src: &[T], out: &mut [i128], to_f64: impl Fn(T) -> f64) -> bool {
    for (o, &x) in out.iter_mut().zip(src) {
        match SumSketch::to_fixed(to_f64(x)) {
            Some(v) => *o = v,
            None => return false,
        }
    }
    true
}
