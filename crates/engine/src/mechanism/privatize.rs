//! Privatizing a whole batch of true values into Arrow report columns.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, FixedSizeBinaryArray, FixedSizeListArray, Float64Array, Int8Array, ListArray,
    UInt32Array,
};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{DataType, Field};
use rand::Rng;

use super::Mechanism;
use crate::error::EngineError;

/// The report columns (in the canonical schema's order: index column first for Hadamard,
/// cohort and olh) for true values `xs`, privatized by the real client-side randomizers. The
/// simulator and the tests use it; `rng` is seeded only there.
pub fn privatize_batch<R: Rng + ?Sized>(
    mechanism: &Mechanism,
    xs: &[u32],
    rng: &mut R,
) -> Result<Vec<ArrayRef>, EngineError> {
    let bad_field =
        |e: arrow_schema::ArrowError| EngineError::Corrupt(format!("building report arrays: {e}"));
    Ok(match mechanism {
        Mechanism::Grr(m) => {
            let r = xs
                .iter()
                .map(|&x| m.randomize_with(x, rng))
                .collect::<Result<Vec<_>, _>>()?;
            vec![Arc::new(UInt32Array::from(r))]
        }
        Mechanism::Channel(m) => {
            let r = xs
                .iter()
                .map(|&x| m.randomize_with(x, rng))
                .collect::<Result<Vec<_>, _>>()?;
            vec![Arc::new(UInt32Array::from(r))]
        }
        Mechanism::Raw { .. } => vec![Arc::new(UInt32Array::from(xs.to_vec()))],
        Mechanism::BitFlip(m) => {
            let w = m.report_bytes();
            let mut bytes = Vec::with_capacity(xs.len() * w);
            for &x in xs {
                bytes.extend(m.randomize_with(x, rng)?);
            }
            let array =
                FixedSizeBinaryArray::try_new(w as i32, bytes.into(), None).map_err(bad_field)?;
            vec![Arc::new(array)]
        }
        Mechanism::Subset(m) => {
            let k = m.k() as usize;
            let mut items = Vec::with_capacity(xs.len() * k);
            let mut report = Vec::with_capacity(k);
            for &x in xs {
                super::check_input(x, m.domain())?;
                m.randomize_into(x, rng, &mut report);
                items.extend_from_slice(&report);
            }
            // Non-nullable items, as the report format says (docs/user-guide.md, "Input schema").
            let field = Arc::new(Field::new("item", DataType::UInt32, false));
            let array = ListArray::try_new(
                field,
                OffsetBuffer::from_lengths(std::iter::repeat_n(k, xs.len())),
                Arc::new(UInt32Array::from(items)),
                None,
            )
            .map_err(bad_field)?;
            vec![Arc::new(array)]
        }
        Mechanism::Noise(m) => {
            let d = m.domain() as usize;
            let mut values = Vec::with_capacity(xs.len() * d);
            for &x in xs {
                values.extend(m.randomize_with(x, rng)?);
            }
            let field = Arc::new(Field::new("item", DataType::Float64, false));
            let array = FixedSizeListArray::try_new(
                field,
                d as i32,
                Arc::new(Float64Array::from(values)),
                None,
            )
            .map_err(bad_field)?;
            vec![Arc::new(array)]
        }
        Mechanism::Hadamard(m) => {
            let (rows, signs): (Vec<u32>, Vec<i8>) = xs
                .iter()
                .map(|&x| m.randomize_with(x, rng))
                .collect::<Result<_, _>>()?;
            vec![
                Arc::new(UInt32Array::from(rows)),
                Arc::new(Int8Array::from(signs)),
            ]
        }
        Mechanism::Olh(m) => {
            let (seeds, ys): (Vec<u32>, Vec<u32>) = xs
                .iter()
                .map(|&x| m.randomize_with(x, rng))
                .collect::<Result<_, _>>()?;
            vec![
                Arc::new(UInt32Array::from(seeds)),
                Arc::new(UInt32Array::from(ys)),
            ]
        }
        // Distinct devices' first reports: both rounds, the memo thrown away, so each
        // follows the composed channel. A device that reports again keeps its memo
        // (`longitudinal::device::Device`).
        Mechanism::Longitudinal(l) => {
            let (mut categories, mut bytes) = (Vec::new(), Vec::new());
            for &x in xs {
                match l.fresh_report(x, rng)? {
                    super::Response::Category(c) => categories.push(c),
                    super::Response::Bits(b) => bytes.extend(b),
                }
            }
            match l.composed() {
                Mechanism::BitFlip(m) => {
                    let array =
                        FixedSizeBinaryArray::try_new(m.report_bytes() as i32, bytes.into(), None)
                            .map_err(bad_field)?;
                    vec![Arc::new(array)]
                }
                _ => vec![Arc::new(UInt32Array::from(categories))],
            }
        }
        Mechanism::Cohort(m) => {
            let (cohorts, signs): (Vec<u32>, Vec<i8>) = xs
                .iter()
                .map(|&x| m.randomize_with(x, rng))
                .collect::<Result<_, _>>()?;
            vec![
                Arc::new(UInt32Array::from(cohorts)),
                Arc::new(Int8Array::from(signs)),
            ]
        }
    })
}

/// A sketch of `n` reports whose true values are drawn from `p` (inverse-CDF sampling),
/// privatized by the real client randomizers and folded by the real kernels: the seeded
/// simulation behind the Monte Carlo size and power checks.
pub fn simulate_sketch<R: Rng + ?Sized>(
    mechanism: &Mechanism,
    p: &[f64],
    n: usize,
    rng: &mut R,
) -> Result<crate::sketch::Sketch, EngineError> {
    let cumulative: Vec<f64> = p
        .iter()
        .scan(0.0, |acc, &x| {
            *acc += x;
            Some(*acc)
        })
        .collect();
    let xs: Vec<u32> = (0..n)
        .map(|_| {
            let u: f64 = rng.random();
            cumulative
                .iter()
                .position(|&c| u < c)
                .unwrap_or(p.len().saturating_sub(1)) as u32
        })
        .collect();
    let columns = privatize_batch(mechanism, &xs, rng)?;
    let mut sketch = mechanism.new_sketch();
    let (report, index) = match columns.as_slice() {
        [index, report] => (report.as_ref(), Some(index.as_ref())),
        [report] => (report.as_ref(), None),
        _ => {
            return Err(EngineError::Corrupt(
                "privatize_batch returned no columns".into(),
            ))
        }
    };
    crate::kernels::fold_batch(mechanism, &mut sketch, report, index)?;
    Ok(sketch)
}
