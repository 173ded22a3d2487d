//! Batch fold kernels: one call per Arrow batch, a tight loop per kernel, no per-row
//! dispatch or allocation (ARCHITECTURE.md invariant 2).

mod bits;
mod categories;
mod dictionary;
mod pool;
mod pool_slots;
pub mod popcount;
mod report_check;
mod signed;
mod subset;
mod sums;

pub use bits::{fold_bits, fold_bits_rows, fold_bits_scalar, fold_bits_with};
pub use categories::{count_categories, fold_categories};
pub use dictionary::fold_key_counts;
pub use pool::{fold_pool, fold_pool_direct};
pub use report_check::ReportCheck;
pub use signed::{fold_signed, fold_signed_scalar};
pub use subset::fold_subsets;
pub use sums::fold_sums;

use arrow_array::{
    Array, FixedSizeBinaryArray, FixedSizeListArray, Int8Array, ListArray, UInt32Array,
};
use arrow_schema::DataType;

use crate::error::EngineError;
use crate::mechanism::Mechanism;
use crate::sketch::{RejectReason, Sketch};

/// Which extra column a mechanism's reports carry beside `report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexColumn {
    /// The public Hadamard row (`columns.row`).
    Row,
    /// The cohort (`columns.cohort`).
    Cohort,
    /// OLH's hash-seed index (`columns.seed`).
    Seed,
}

/// The Arrow columns a mechanism's reports arrive in.
#[derive(Debug, Clone)]
pub struct ReportSchema {
    /// Human-readable type of the report column, for error messages.
    pub report_type: String,
    pub accepts_report: fn(&DataType, usize) -> bool,
    pub index: Option<IndexColumn>,
}

fn is_u32(t: &DataType, _: usize) -> bool {
    *t == DataType::UInt32
}

fn is_i8(t: &DataType, _: usize) -> bool {
    *t == DataType::Int8
}

fn is_fixed_binary(t: &DataType, _: usize) -> bool {
    matches!(t, DataType::FixedSizeBinary(_))
}

fn is_float_list(t: &DataType, _: usize) -> bool {
    match t {
        DataType::FixedSizeList(f, _) => {
            matches!(f.data_type(), DataType::Float32 | DataType::Float64)
        }
        _ => false,
    }
}

// A list of another item type (Spark's `array<bigint>`) is refused naming the column: its
// rows would otherwise all be counted as `bad_size`, silently n = 0. Only the lengths are
// checked per report, like the widths below.
fn is_list(t: &DataType, _: usize) -> bool {
    matches!(t, DataType::List(f) if *f.data_type() == DataType::UInt32)
}

/// The columns `mechanism`'s reports use. Width mismatches (a FixedSizeBinary of the
/// wrong width, a list of the wrong length) are accepted here and rejected per report as
/// `bad_size`, so that one bad producer does not stop the stream.
pub fn report_schema(mechanism: &Mechanism) -> ReportSchema {
    let d = mechanism.domain();
    match mechanism {
        Mechanism::Longitudinal(l) => report_schema(l.composed()),
        Mechanism::Grr(_) | Mechanism::Channel(_) | Mechanism::Raw { .. } => ReportSchema {
            report_type: "UInt32".into(),
            accepts_report: is_u32,
            index: None,
        },
        Mechanism::BitFlip(m) => ReportSchema {
            report_type: format!("FixedSizeBinary({})", m.report_bytes()),
            accepts_report: is_fixed_binary,
            index: None,
        },
        Mechanism::Subset(m) => ReportSchema {
            report_type: format!("List(UInt32) of {} distinct categories below {d}", m.k()),
            accepts_report: is_list,
            index: None,
        },
        Mechanism::Noise(_) => ReportSchema {
            report_type: format!("FixedSizeList(Float32 or Float64, {d})"),
            accepts_report: is_float_list,
            index: None,
        },
        Mechanism::Hadamard(_) => ReportSchema {
            report_type: "Int8".into(),
            accepts_report: is_i8,
            index: Some(IndexColumn::Row),
        },
        Mechanism::Cohort(_) => ReportSchema {
            report_type: "Int8".into(),
            accepts_report: is_i8,
            index: Some(IndexColumn::Cohort),
        },
        Mechanism::Olh(_) => ReportSchema {
            report_type: "UInt32".into(),
            accepts_report: is_u32,
            index: Some(IndexColumn::Seed),
        },
    }
}

fn downcast<'a, T: 'static>(array: &'a dyn Array, expected: &str) -> Result<&'a T, EngineError> {
    array
        .as_any()
        .downcast_ref::<T>()
        .ok_or_else(|| EngineError::WrongArrayType {
            expected: expected.to_string(),
            found: array.data_type().to_string(),
        })
}

/// Folds one batch of reports into `sketch`. `index` is the row or cohort column for
/// Hadamard and cohort reports, and ignored otherwise.
pub fn fold_batch(
    mechanism: &Mechanism,
    sketch: &mut Sketch,
    report: &dyn Array,
    index: Option<&dyn Array>,
) -> Result<(), EngineError> {
    let mechanism = mechanism.channel();
    match (mechanism, &mut *sketch) {
        (Mechanism::Grr(_) | Mechanism::Channel(_) | Mechanism::Raw { .. }, Sketch::Counts(s)) => {
            fold_categories(downcast::<UInt32Array>(report, "UInt32")?, s);
        }
        (Mechanism::BitFlip(_), Sketch::Bits(s)) => {
            fold_bits(
                downcast::<FixedSizeBinaryArray>(report, "FixedSizeBinary")?,
                s,
            );
        }
        (Mechanism::Subset(m), Sketch::Bits(s)) => {
            fold_subsets(
                downcast::<ListArray>(report, "List(UInt32)")?,
                m.k() as usize,
                s,
            );
        }
        (Mechanism::Noise(m), Sketch::Sums(s)) => {
            fold_sums(
                downcast::<FixedSizeListArray>(report, "FixedSizeList")?,
                m.max_abs(),
                s,
            );
        }
        (Mechanism::Hadamard(_) | Mechanism::Cohort(_), Sketch::Signed(s)) => {
            let reason = if matches!(mechanism, Mechanism::Hadamard(_)) {
                RejectReason::RowOutOfRange
            } else {
                RejectReason::CohortOutOfRange
            };
            let index = index.ok_or_else(|| EngineError::WrongArrayType {
                expected: "a UInt32 row or cohort column".into(),
                found: "none".into(),
            })?;
            fold_signed(
                downcast::<UInt32Array>(index, "UInt32")?,
                downcast::<Int8Array>(report, "Int8")?,
                s,
                reason,
            );
        }
        (Mechanism::Olh(_), Sketch::Pool(s)) => {
            let index = index.ok_or_else(|| EngineError::WrongArrayType {
                expected: "a UInt32 seed column".into(),
                found: "none".into(),
            })?;
            fold_pool(
                downcast::<UInt32Array>(index, "UInt32")?,
                downcast::<UInt32Array>(report, "UInt32")?,
                s,
            );
        }
        (m, s) => return Err(m.sketch_mismatch(s)),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::builder::{ListBuilder, UInt32Builder};

    use arrow_array::{
        ArrayRef, FixedSizeBinaryArray, FixedSizeListArray, Float64Array, Int8Array, UInt32Array,
    };
    use arrow_schema::{DataType, Field};
    use ldpstream_config::MechanismConfig;
    use proptest::prelude::*;

    use super::*;

    /// One report of any mechanism, valid or not, as generated for the property tests.
    #[derive(Debug, Clone)]
    struct Row {
        a: u32,
        b: i8,
        bytes: [u8; 2],
        noise: [f64; 3],
        items: Vec<u32>,
        null: bool,
    }

    fn row() -> impl Strategy<Value = Row> {
        (
            0u32..12,
            prop_oneof![Just(1i8), Just(-1i8), Just(0i8), Just(5i8)],
            any::<[u8; 2]>(),
            prop_oneof![
                4 => proptest::array::uniform3(-5.0f64..5.0),
                1 => Just([f64::NAN, 0.0, 1.0]),
                1 => Just([1e12, 0.0, 1.0]),
                1 => Just([60.0, 0.0, 1.0]),
            ],
            // Subset rows: mostly k = 3 items below d = 10, some too short or long, out of
            // range or repeated.
            proptest::collection::vec(0u32..11, 1..5),
            proptest::bool::weighted(0.05),
        )
            .prop_map(|(a, b, bytes, noise, items, null)| Row {
                a,
                b,
                bytes,
                noise,
                items,
                null,
            })
    }

    fn mechanisms() -> Vec<Mechanism> {
        [
            MechanismConfig::Grr {
                epsilon: 1.0,
                domain: 10,
            },
            MechanismConfig::Bitflip {
                epsilon: 1.0,
                domain: 10,
            },
            MechanismConfig::Gauss {
                rho: 1.0,
                domain: 3,
                max_abs: None,
            },
            MechanismConfig::Hadamard {
                epsilon: 1.0,
                domain: 6,
            },
            MechanismConfig::Cohort {
                epsilon: 1.0,
                domain: 6,
                cohorts: 10,
                seed: 3,
            },
            // Starts sparse (only non-zero cells kept).
            MechanismConfig::Grr {
                epsilon: 1.0,
                domain: crate::sketch::SPARSE_FROM_DOMAIN as u32 + 8,
            },
            // OUE: bit flip's reports, sketch and kernel.
            MechanismConfig::Oue {
                epsilon: 2.0,
                domain: 10,
            },
            MechanismConfig::Subset {
                epsilon: 1.0,
                domain: 10,
                k: Some(3),
            },
            // OLH: 4 seeds × 5 buckets (row.a up to 11 and row.b up to 5 cover both reasons).
            MechanismConfig::Olh {
                epsilon: 1.0,
                domain: 10,
                g: Some(5),
                pool_size: Some(4),
                pool_seed: 7,
            },
        ]
        .iter()
        .map(|c| Mechanism::from_config(c).unwrap())
        .collect()
    }

    /// Builds the Arrow columns of `rows` for `mechanism`.
    fn arrays(mechanism: &Mechanism, rows: &[Row]) -> (ArrayRef, Option<ArrayRef>) {
        let a = || {
            UInt32Array::from(
                rows.iter()
                    .map(|r| (!r.null).then_some(r.a))
                    .collect::<Vec<_>>(),
            )
        };
        match mechanism {
            Mechanism::BitFlip(_) => {
                let values: Vec<Option<&[u8]>> = rows
                    .iter()
                    .map(|r| (!r.null).then_some(&r.bytes[..]))
                    .collect();
                let array =
                    FixedSizeBinaryArray::try_from_sparse_iter_with_size(values.into_iter(), 2)
                        .unwrap();
                (Arc::new(array), None)
            }
            Mechanism::Noise(_) => {
                let flat: Vec<f64> = rows.iter().flat_map(|r| r.noise).collect();
                let nulls: Vec<bool> = rows.iter().map(|r| !r.null).collect();
                let field = Arc::new(Field::new("item", DataType::Float64, false));
                let array = FixedSizeListArray::new(
                    field,
                    3,
                    Arc::new(Float64Array::from(flat)),
                    Some(nulls.into()),
                );
                (Arc::new(array), None)
            }
            Mechanism::Hadamard(_) | Mechanism::Cohort(_) => {
                let b = Int8Array::from(rows.iter().map(|r| r.b).collect::<Vec<_>>());
                (Arc::new(b), Some(Arc::new(a()) as ArrayRef))
            }
            Mechanism::Subset(_) => {
                let mut b = ListBuilder::new(UInt32Builder::new());
                for r in rows {
                    b.values().append_slice(&r.items);
                    b.append(!r.null);
                }
                (Arc::new(b.finish()), None)
            }
            Mechanism::Olh(_) => {
                let y = UInt32Array::from(
                    rows.iter()
                        .map(|r| u32::from(r.b as u8) % 7)
                        .collect::<Vec<_>>(),
                );
                (Arc::new(y), Some(Arc::new(a()) as ArrayRef))
            }
            _ => (Arc::new(a()), None),
        }
    }

    fn fold_all(mechanism: &Mechanism, rows: &[Row]) -> Sketch {
        let mut sketch = mechanism.new_sketch();
        let (report, index) = arrays(mechanism, rows);
        fold_batch(mechanism, &mut sketch, report.as_ref(), index.as_deref()).unwrap();
        sketch
    }

    proptest! {
        /// For every sketch: folding any split of a batch into shards and merging them in
        /// any order equals one pass, and survives a serialization round trip.
        #[test]
        fn merge_equivalence(
            rows in proptest::collection::vec(row(), 0..300),
            cuts in proptest::collection::vec(0usize..300, 0..6),
            reverse in any::<bool>(),
        ) {
            for mechanism in mechanisms() {
                let expected = fold_all(&mechanism, &rows);
                prop_assert_eq!(
                    expected.n() + expected.rejected().total(),
                    rows.len() as u64,
                    "every report is folded or rejected"
                );
                let mut bounds: Vec<usize> = cuts.iter().map(|&c| c.min(rows.len())).collect();
                bounds.push(0);
                bounds.push(rows.len());
                bounds.sort_unstable();
                let mut shards: Vec<Sketch> =
                    bounds.windows(2).map(|w| fold_all(&mechanism, &rows[w[0]..w[1]])).collect();
                if reverse {
                    shards.reverse();
                }
                let mut merged = mechanism.new_sketch();
                for s in &shards {
                    merged.merge(s).unwrap();
                }
                prop_assert_eq!(&merged, &expected);
                prop_assert_eq!(Sketch::from_bytes(&merged.to_bytes()).unwrap(), expected);
            }
        }
    }

    /// What `ReportCheck` says of one report, from the row's own fields.
    fn check_one(mechanism: &Mechanism, check: &ReportCheck, r: &Row) -> Option<RejectReason> {
        match mechanism {
            Mechanism::BitFlip(_) => check.bits(&r.bytes),
            Mechanism::Noise(_) => check.vector(&r.noise),
            Mechanism::Hadamard(_) | Mechanism::Cohort(_) => check.indexed(r.a, r.b),
            Mechanism::Subset(_) => check.subset(&r.items),
            Mechanism::Olh(_) => check.pooled(r.a, u32::from(r.b as u8) % 7),
            _ => check.category(r.a),
        }
    }

    proptest! {
        /// The per-report check a source uses to dead-letter agrees with the fold kernels
        /// on every report: it names the reason the fold records, or none when it folds.
        #[test]
        fn report_check_agrees_with_the_fold(rows in proptest::collection::vec(row(), 1..40)) {
            for mechanism in mechanisms() {
                let check = ReportCheck::new(&mechanism);
                for r in rows.iter().filter(|r| !r.null) {
                    let one = fold_all(&mechanism, std::slice::from_ref(r));
                    let folded = RejectReason::ALL
                        .into_iter()
                        .find(|&reason| one.rejected().get(reason) == 1);
                    prop_assert_eq!(one.n() + one.rejected().total(), 1);
                    prop_assert_eq!(
                        check_one(&mechanism, &check, r),
                        folded,
                        "{} on {:?}",
                        mechanism.kind(),
                        r
                    );
                }
            }
        }
    }

    #[test]
    fn report_check_names_each_reason() {
        let ms = mechanisms();
        let grr = ReportCheck::new(&ms[0]);
        assert_eq!(grr.category(9), None);
        assert_eq!(grr.category(10), Some(RejectReason::OutOfDomain));
        let bits = ReportCheck::new(&ms[1]);
        assert_eq!(bits.bits(&[0xFF, 3]), None);
        assert_eq!(bits.bits(&[0, 4]), Some(RejectReason::PaddingBitsSet));
        assert_eq!(bits.bits(&[0]), Some(RejectReason::BadSize));
        let noise = ReportCheck::new(&ms[2]);
        assert_eq!(noise.vector(&[0.5, -1.0, 2.0]), None);
        assert_eq!(
            noise.vector(&[f64::NAN, 0.0, 1e300]),
            Some(RejectReason::NonFinite)
        );
        assert_eq!(noise.vector(&[0.0, 1.0]), Some(RejectReason::BadSize));
        let hadamard = ReportCheck::new(&ms[3]);
        assert_eq!(hadamard.indexed(0, -1), None);
        assert_eq!(hadamard.indexed(0, 0), Some(RejectReason::NotPlusMinusOne));
        assert_eq!(
            hadamard.indexed(1 << 20, 1),
            Some(RejectReason::RowOutOfRange)
        );
        let cohort = ReportCheck::new(&ms[4]);
        assert_eq!(
            cohort.indexed(1 << 20, 1),
            Some(RejectReason::CohortOutOfRange)
        );
        let olh = ReportCheck::new(&ms[8]);
        assert_eq!(olh.pooled(3, 4), None);
        assert_eq!(olh.pooled(4, 0), Some(RejectReason::SeedOutOfPool));
        assert_eq!(olh.pooled(4, 5), Some(RejectReason::SeedOutOfPool));
        assert_eq!(olh.pooled(0, 5), Some(RejectReason::BucketOutOfRange));
        assert_eq!(olh.category(0), Some(RejectReason::BadSize));
        let sparse = ReportCheck::new(&ms[5]);
        assert_eq!(
            sparse.category(crate::sketch::SPARSE_FROM_DOMAIN as u32 + 8),
            Some(RejectReason::OutOfDomain)
        );
        // Subset, d = 10, k = 3.
        let subset = ReportCheck::new(&ms[7]);
        assert_eq!(subset.subset(&[9, 0, 4]), None);
        assert_eq!(subset.subset(&[1, 2]), Some(RejectReason::SubsetWrongSize));
        assert_eq!(subset.subset(&[1, 2, 10]), Some(RejectReason::OutOfDomain));
        assert_eq!(
            subset.subset(&[7, 2, 7]),
            Some(RejectReason::SubsetDuplicate)
        );
        assert_eq!(subset.category(1), Some(RejectReason::BadSize));
    }

    #[test]
    fn rejects_bad_reports_by_reason() {
        let ms = mechanisms();
        // Bit flip with d = 10: byte 1 may only use its two low bits.
        let bytes = FixedSizeBinaryArray::try_from_iter(
            vec![vec![1u8, 0], vec![0, 4], vec![0, 2]].into_iter(),
        )
        .unwrap();
        let mut s = ms[1].new_sketch();
        fold_batch(&ms[1], &mut s, &bytes, None).unwrap();
        assert_eq!(s.n(), 2);
        assert_eq!(s.rejected().get(RejectReason::PaddingBitsSet), 1);
        let Sketch::Bits(b) = &s else { unreachable!() };
        assert_eq!(b.bit_counts(), &[1, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        // OUE (d = 10) rejects the same padding bit under the same reason.
        let mut s = ms[6].new_sketch();
        fold_batch(&ms[6], &mut s, &bytes, None).unwrap();
        assert_eq!(s.n(), 2);
        assert_eq!(s.rejected().get(RejectReason::PaddingBitsSet), 1);
        // Wrong width.
        let wide = FixedSizeBinaryArray::try_from_iter(vec![vec![1u8, 0, 0]].into_iter()).unwrap();
        let mut s = ms[1].new_sketch();
        fold_batch(&ms[1], &mut s, &wide, None).unwrap();
        assert_eq!(s.rejected().get(RejectReason::BadSize), 1);
        // Hadamard: K = 8 rows.
        let rows = UInt32Array::from(vec![0, 7, 8, 3]);
        let signs = Int8Array::from(vec![1, -1, 1, 0]);
        let mut s = ms[3].new_sketch();
        fold_batch(&ms[3], &mut s, &signs, Some(&rows)).unwrap();
        assert_eq!(s.n(), 2);
        assert_eq!(s.rejected().get(RejectReason::RowOutOfRange), 1);
        assert_eq!(s.rejected().get(RejectReason::NotPlusMinusOne), 1);
        // Cohort: 10 cohorts.
        let cohorts = UInt32Array::from(vec![9, 10]);
        let signs = Int8Array::from(vec![1, 1]);
        let mut s = ms[4].new_sketch();
        fold_batch(&ms[4], &mut s, &signs, Some(&cohorts)).unwrap();
        assert_eq!(s.rejected().get(RejectReason::CohortOutOfRange), 1);
        // Gauss, ρ = 1: the default max_abs is 1 + 40 = 41. A finite coordinate beyond it
        // rejects the report whole; unrepresentable anywhere in the row wins.
        let field = Arc::new(Field::new("item", DataType::Float64, false));
        let flat = vec![
            1000.0,
            0.0,
            0.0, // above_max_abs
            -41.5,
            1.0,
            0.0, // above_max_abs
            41.0,
            0.0,
            0.0, // folded: at the bound
            1000.0,
            f64::NAN,
            0.0, // non_finite
            1e12,
            0.0,
            0.0, // non_finite (beyond ±2³¹)
        ];
        let list = FixedSizeListArray::new(field, 3, Arc::new(Float64Array::from(flat)), None);
        let mut s = ms[2].new_sketch();
        fold_batch(&ms[2], &mut s, &list, None).unwrap();
        assert_eq!(s.n(), 1);
        assert_eq!(s.rejected().get(RejectReason::AboveMaxAbs), 2);
        assert_eq!(s.rejected().get(RejectReason::NonFinite), 2);
        let Mechanism::Noise(noise) = &ms[2] else {
            unreachable!()
        };
        let lenient = noise.with_max_abs(Some(2000.0)).unwrap();
        assert_eq!(lenient.max_abs(), 2000.0);
        assert!(noise.with_max_abs(Some(0.0)).is_err());
        assert!(noise.with_max_abs(Some(f64::INFINITY)).is_err());
        // Wrong array type is an error, not a silent zero.
        let mut s = ms[0].new_sketch();
        assert!(fold_batch(&ms[0], &mut s, &Int8Array::from(vec![1]), None).is_err());
    }
}
