//! The grouped fold of the sketches that are not flat count tables (bit counts, signed and
//! noise sums, OLH pools, sparse count tables): a batch's rows are gathered by slot once
//! (a counting sort and one `take`), then each slot's contiguous run goes through its
//! mechanism's kernel. The runs are sliced as their concrete array types, which allocates
//! nothing; a bit-flip run of a few rows is counted report by report
//! ([`fold_bits_rows`]), since the vector kernel's set-up would cost more than the rows.

use arrow_array::{
    Array, ArrayRef, FixedSizeBinaryArray, FixedSizeListArray, Int8Array, ListArray, UInt32Array,
};
use arrow_select::take::take;

use crate::kernels::{fold_batch, fold_bits_rows};
use crate::mechanism::Mechanism;
use crate::sketch::Sketch;
use crate::EngineError;

/// Below this many rows a bit-flip run is counted report by report.
const SMALL_BIT_RUN: usize = 64;

pub(crate) enum SketchRowsError {
    Engine(EngineError),
    Arrow(arrow_schema::ArrowError),
}

/// A slice of a report or index column as its concrete type: slicing one allocates nothing,
/// where slicing an `ArrayRef` makes a new `Arc` per (batch, group).
enum Run {
    U32(UInt32Array),
    I8(Int8Array),
    Bytes(FixedSizeBinaryArray),
    List(ListArray),
    FixedList(FixedSizeListArray),
    Other(ArrayRef),
}

impl Run {
    fn of(array: &dyn Array, from: usize, len: usize) -> Run {
        let any = array.as_any();
        if let Some(a) = any.downcast_ref::<UInt32Array>() {
            Run::U32(a.slice(from, len))
        } else if let Some(a) = any.downcast_ref::<FixedSizeBinaryArray>() {
            Run::Bytes(a.slice(from, len))
        } else if let Some(a) = any.downcast_ref::<Int8Array>() {
            Run::I8(a.slice(from, len))
        } else if let Some(a) = any.downcast_ref::<ListArray>() {
            Run::List(a.slice(from, len))
        } else if let Some(a) = any.downcast_ref::<FixedSizeListArray>() {
            Run::FixedList(a.slice(from, len))
        } else {
            Run::Other(array.slice(from, len))
        }
    }

    fn as_dyn(&self) -> &dyn Array {
        match self {
            Run::U32(a) => a,
            Run::I8(a) => a,
            Run::Bytes(a) => a,
            Run::List(a) => a,
            Run::FixedList(a) => a,
            Run::Other(a) => a.as_ref(),
        }
    }
}

/// Folds the rows `rows` of `report` (or all, when None; `index` beside it) into
/// `sketches`: row `k` of the selection goes to `sketches[slot[k]]`.
pub(crate) fn fold_sketch_rows(
    mechanism: &Mechanism,
    sketches: &mut [Sketch],
    report: &ArrayRef,
    index: Option<&ArrayRef>,
    rows: Option<&[u32]>,
    slot: &[u32],
) -> Result<(), SketchRowsError> {
    let n = sketches.len();
    let mut starts = vec![0usize; n + 1];
    for &s in slot {
        starts[s as usize + 1] += 1;
    }
    for k in 1..starts.len() {
        starts[k] += starts[k - 1];
    }
    let mut cursor = starts.clone();
    let mut order = vec![0u32; slot.len()];
    for (k, &s) in slot.iter().enumerate() {
        let row = rows.map_or(k as u32, |r| r[k]);
        order[cursor[s as usize]] = row;
        cursor[s as usize] += 1;
    }
    let order = UInt32Array::from(order);
    let report = take(report.as_ref(), &order, None).map_err(SketchRowsError::Arrow)?;
    let index = index
        .map(|a| take(a.as_ref(), &order, None))
        .transpose()
        .map_err(SketchRowsError::Arrow)?;
    let bit_reports = match mechanism.channel() {
        Mechanism::BitFlip(_) => report.as_any().downcast_ref::<FixedSizeBinaryArray>(),
        _ => None,
    };
    for (s, sketch) in sketches.iter_mut().enumerate() {
        let (from, to) = (starts[s], starts[s + 1]);
        if from == to {
            continue;
        }
        if let (Some(bits), Sketch::Bits(b)) = (bit_reports, &mut *sketch) {
            if to - from < SMALL_BIT_RUN {
                fold_bits_rows(bits, from..to, b);
                continue;
            }
        }
        let r = Run::of(report.as_ref(), from, to - from);
        let i = index.as_ref().map(|a| Run::of(a.as_ref(), from, to - from));
        fold_batch(mechanism, sketch, r.as_dyn(), i.as_ref().map(Run::as_dyn))
            .map_err(SketchRowsError::Engine)?;
    }
    Ok(())
}
