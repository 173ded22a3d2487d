use arrow_array::{Array, FixedSizeListArray, Float32Array, Float64Array};

use crate::sketch::{RejectReason, SumSketch};

/// Folds noisy one-hot vectors (`FixedSizeList<Float32|Float64, d>`) into fixed-point
/// coordinate sums. A vector of the wrong length, with a coordinate that is not finite or
/// beyond ±2³¹ (`non_finite`), or with a finite coordinate beyond ±`max_abs`
/// (`above_max_abs`) is rejected whole.
pub fn fold_sums(array: &FixedSizeListArray, max_abs: f64, sketch: &mut SumSketch) {
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
    let mut above = 0u64;
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
        let verdict = if contiguous {
            fixed_row(values.as_ref(), i * d, d, max_abs, &mut row)
        } else {
            let v = array.value(i);
            if v.null_count() == 0 {
                fixed_row(v.as_ref(), 0, d, max_abs, &mut row)
            } else {
                Row::NonFinite
            }
        };
        match verdict {
            Row::Ok => add(&row),
            Row::NonFinite => non_finite += 1,
            Row::AboveMaxAbs => above += 1,
        }
    }
    sketch
        .rejected_mut()
        .add(RejectReason::NonFinite, non_finite);
    sketch.rejected_mut().add(RejectReason::AboveMaxAbs, above);
    sketch.rejected_mut().add(RejectReason::Null, nulls);
}

enum Row {
    Ok,
    NonFinite,
    AboveMaxAbs,
}

/// Converts `d` floats starting at `start` to fixed point, or says why the row is unusable
/// (also `NonFinite` when the child is not a float array).
fn fixed_row(values: &dyn Array, start: usize, d: usize, max_abs: f64, out: &mut [i128]) -> Row {
    if let Some(f) = values.as_any().downcast_ref::<Float64Array>() {
        convert(&f.values()[start..start + d], max_abs, out, |x| x)
    } else if let Some(f) = values.as_any().downcast_ref::<Float32Array>() {
        convert(&f.values()[start..start + d], max_abs, out, f64::from)
    } else {
        Row::NonFinite
    }
}

fn convert<T: Copy>(src: &[T], max_abs: f64, out: &mut [i128], to_f64: impl Fn(T) -> f64) -> Row {
    // Unrepresentable (NaN, ±∞, beyond ±2³¹) anywhere wins over beyond max_abs, so that
    // the reason does not depend on coordinate order and `non_finite` keeps its meaning.
    let mut above = false;
    for (o, &x) in out.iter_mut().zip(src) {
        let x = to_f64(x);
        match SumSketch::to_fixed(x) {
            Some(v) => *o = v,
            None => return Row::NonFinite,
        }
        above |= x.abs() > max_abs;
    }
    if above {
        Row::AboveMaxAbs
    } else {
        Row::Ok
    }
}
