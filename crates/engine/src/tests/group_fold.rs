//! The one-pass grouped fold (`GroupFold`) against the per-group reference fold
//! (`fold_paned_batch_reference`): every mechanism, 1–3 group columns of every string and
//! dictionary type with nulls, `"__other__"` and over-long values, several panes with null
//! and late event times, random `max_groups`, and random splits merged in random orders.

use std::sync::Arc;

use arrow_array::builder::{ListBuilder, UInt32Builder};

use arrow_array::types::{Int32Type, Int8Type};
use arrow_array::RecordBatch;
use arrow_array::{
    ArrayRef, DictionaryArray, FixedSizeBinaryArray, FixedSizeListArray, Float64Array, Int8Array,
    LargeStringArray, StringArray, StringViewArray, TimestampMillisecondArray, UInt32Array,
};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use ldpstream_config::MechanismConfig;
use proptest::prelude::*;

use crate::mechanism::Mechanism;
use crate::stream::{fold_paned_batch_reference, GroupFold, PanedDelta, ReportLayout, StreamError};

#[derive(Debug, Clone)]
struct Row {
    a: u32,
    b: i8,
    bytes: [u8; 2],
    noise: [f64; 3],
    items: Vec<u32>,
    null: bool,
    keys: [u8; 3],
    ts: Option<i64>,
}

const VALUES: [Option<&str>; 8] = [
    Some("a"),
    Some("b"),
    Some(""),
    None,
    Some("__other__"),
    Some("zz"),
    Some("é"),
    Some("a-value-longer-than-the-limit"),
];

fn row() -> impl Strategy<Value = Row> {
    (
        (
            0u32..12,
            prop_oneof![Just(1i8), Just(-1i8), Just(0i8)],
            any::<[u8; 2]>(),
            prop_oneof![
                4 => proptest::array::uniform3(-5.0f64..5.0),
                1 => Just([f64::NAN, 0.0, 1.0]),
            ],
            proptest::collection::vec(0u32..11, 1..5),
            proptest::bool::weighted(0.05),
        ),
        (
            // Mostly short values; the over-long one (index 7) rarely.
            proptest::array::uniform3(prop_oneof![50 => 0u8..7, 1 => Just(7u8)]),
            prop_oneof![
                6 => (0i64..4000).prop_map(Some),
                1 => Just(None),
                1 => Just(Some(i64::MAX)),
            ],
        ),
    )
        .prop_map(|((a, b, bytes, noise, items, null), (keys, ts))| Row {
            a,
            b,
            bytes,
            noise,
            items,
            null,
            keys,
            ts,
        })
}

fn mechanisms() -> Vec<Mechanism> {
    [
        MechanismConfig::Grr {
            epsilon: 1.0,
            domain: 10,
        },
        MechanismConfig::Raw { domain: 5000 },
        MechanismConfig::Grr {
            epsilon: 1.0,
            domain: crate::sketch::SPARSE_FROM_DOMAIN as u32 + 8,
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
        MechanismConfig::Subset {
            epsilon: 1.0,
            domain: 10,
            k: Some(3),
        },
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

fn report_columns(mechanism: &Mechanism, rows: &[Row]) -> (ArrayRef, Option<ArrayRef>) {
    let a = || {
        Arc::new(UInt32Array::from(
            rows.iter()
                .map(|r| (!r.null).then_some(r.a))
                .collect::<Vec<_>>(),
        )) as ArrayRef
    };
    match mechanism {
        Mechanism::BitFlip(_) => {
            let values = rows.iter().map(|r| (!r.null).then_some(&r.bytes[..]));
            let array = FixedSizeBinaryArray::try_from_sparse_iter_with_size(values, 2).unwrap();
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
        Mechanism::Hadamard(_) => {
            let b = Int8Array::from(rows.iter().map(|r| r.b).collect::<Vec<_>>());
            (Arc::new(b), Some(a()))
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
            (Arc::new(y), Some(a()))
        }
        _ => (a(), None),
    }
}

/// Group column `c` of `rows` as Arrow type `kind` (0..6).
fn key_column(rows: &[Row], c: usize, kind: u8) -> ArrayRef {
    let values: Vec<Option<&str>> = rows.iter().map(|r| VALUES[r.keys[c] as usize]).collect();
    match kind {
        0 => Arc::new(StringArray::from(values)),
        1 => Arc::new(LargeStringArray::from(values)),
        2 => Arc::new(StringViewArray::from(values)),
        3 => Arc::new(values.into_iter().collect::<DictionaryArray<Int8Type>>()),
        4 => Arc::new(values.into_iter().collect::<DictionaryArray<Int32Type>>()),
        _ => {
            // A dictionary whose values hold a null and entries no row uses, and keys
            // that point at the null entry.
            let dict = LargeStringArray::from(
                VALUES
                    .iter()
                    .copied()
                    .chain([Some("unused")])
                    .collect::<Vec<_>>(),
            );
            let keys: arrow_array::Int32Array = rows
                .iter()
                .map(|r| (r.keys[c] != 1).then_some(i32::from(r.keys[c])))
                .collect();
            Arc::new(DictionaryArray::<Int32Type>::try_new(keys, Arc::new(dict)).unwrap())
        }
    }
}

fn batch(mechanism: &Mechanism, rows: &[Row], kinds: &[u8], with_ts: bool) -> RecordBatch {
    let (report, index) = report_columns(mechanism, rows);
    let mut fields = vec![Field::new("report", report.data_type().clone(), true)];
    let mut columns = vec![report];
    if let Some(index) = index {
        fields.push(Field::new("index", DataType::UInt32, true));
        columns.push(index);
    }
    for (c, &kind) in kinds.iter().enumerate() {
        let column = key_column(rows, c, kind);
        fields.push(Field::new(
            format!("g{c}"),
            column.data_type().clone(),
            true,
        ));
        columns.push(column);
    }
    if with_ts {
        fields.push(Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            true,
        ));
        columns.push(Arc::new(TimestampMillisecondArray::from(
            rows.iter().map(|r| r.ts).collect::<Vec<_>>(),
        )));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

fn layout(mechanism: &Mechanism, columns: usize, max_groups: usize) -> ReportLayout {
    ReportLayout {
        mechanism: mechanism.clone(),
        report: "report".into(),
        index: matches!(mechanism, Mechanism::Hadamard(_) | Mechanism::Olh(_))
            .then(|| "index".to_string()),
        group_by: (0..columns).map(|c| format!("g{c}")).collect(),
        ts: "ts".into(),
        block_sizes: Vec::new(),
        max_groups,
        max_group_value_bytes: 16,
    }
}

/// Pane [0, 1000) is closed: its reports are late.
fn pane_of(t: i64) -> Option<i64> {
    (t >= 1000).then_some(t - t % 1000)
}

fn assert_same(a: &PanedDelta, b: &PanedDelta) -> Result<(), TestCaseError> {
    prop_assert_eq!(&a.panes, &b.panes);
    prop_assert_eq!(&a.untimed, &b.untimed);
    prop_assert_eq!(a.late, b.late);
    prop_assert_eq!(a.max_ts, b.max_ts);
    Ok(())
}

/// Which error. A too-long value is named by the first row that has one: the reference
/// looks pane by pane, the one-pass fold over the batch, so with several panes in one
/// batch they may name different rows.
fn error_kind(e: &StreamError) -> String {
    match e {
        StreamError::GroupValueTooLong { bytes, .. } => format!("too long {bytes}"),
        other => format!("{other}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn the_one_pass_fold_equals_the_reference(
        rows in proptest::collection::vec(row(), 0..160),
        kinds in proptest::collection::vec(0u8..6, 0..4),
        cuts in proptest::collection::vec(0usize..160, 0..5),
        splits in proptest::collection::vec(0usize..160, 0..3),
        max_groups in 1usize..8,
        with_ts in any::<bool>(),
        reverse in any::<bool>(),
    ) {
        for mechanism in mechanisms() {
            let l = layout(&mechanism, kinds.len(), max_groups);
            let whole = batch(&mechanism, &rows, &kinds, with_ts);
            let ts = with_ts.then_some("ts");
            // Batches are slices of one batch (dictionaries shared, as a Parquet column
            // chunk's are); tasks are runs of batches.
            let mut bounds: Vec<usize> = cuts.iter().map(|&c| c.min(rows.len())).collect();
            bounds.extend([0, rows.len()]);
            bounds.sort_unstable();
            bounds.dedup();
            let batches: Vec<RecordBatch> =
                bounds.windows(2).map(|w| whole.slice(w[0], w[1] - w[0])).collect();
            let mut reference = PanedDelta::default();
            let mut reference_error = None;
            for b in &batches {
                if let Err(e) = fold_paned_batch_reference(b, &l, "t", ts, &pane_of, &mut reference) {
                    reference_error = Some(error_kind(&e));
                    break;
                }
            }
            let mut task_bounds: Vec<usize> =
                splits.iter().map(|&s| s.min(batches.len())).collect();
            task_bounds.extend([0, batches.len()]);
            task_bounds.sort_unstable();
            let mut tasks = Vec::new();
            let mut error = None;
            for w in task_bounds.windows(2) {
                let mut fold = GroupFold::new(&l);
                for b in &batches[w[0]..w[1]] {
                    if let Err(e) = fold.fold_batch(b, "t", ts, &pane_of) {
                        error.get_or_insert(error_kind(&e));
                    }
                }
                tasks.push(fold);
            }
            prop_assert_eq!(&error, &reference_error, "{}", mechanism.kind());
            if error.is_some() {
                continue;
            }
            if reverse {
                tasks.reverse();
            }
            let mut merged = GroupFold::new(&l);
            for t in tasks {
                merged.merge(t).unwrap();
            }
            assert_same(&merged.into_delta().unwrap(), &reference)?;
        }
    }
}

/// The cap keeps the smallest keys of everything folded, across batches that each stay
/// under it (the reference caps the union after each batch).
#[test]
fn the_cap_keeps_the_smallest_keys_across_batches() {
    let mechanism = &mechanisms()[0];
    let l = layout(mechanism, 1, 2);
    let rows = |keys: &[u8]| -> Vec<Row> {
        keys.iter()
            .map(|&k| Row {
                a: 1,
                b: 1,
                bytes: [0, 0],
                noise: [0.0; 3],
                items: vec![],
                null: false,
                keys: [k, 0, 0],
                ts: None,
            })
            .collect()
    };
    let mut fold = GroupFold::new(&l);
    // zz, b; then a, é: kept "a" and "b" (the smallest), zz and é in __other__.
    for keys in [&[5u8, 1][..], &[0, 6]] {
        fold.fold_batch(
            &batch(mechanism, &rows(keys), &[0], false),
            "t",
            None,
            &pane_of,
        )
        .unwrap();
    }
    let delta = fold.into_delta().unwrap();
    let keys: Vec<String> = delta
        .untimed
        .keys()
        .map(|k| k[0].clone().unwrap_or_default())
        .collect();
    assert_eq!(keys, vec!["__other__", "a", "b"]);
    assert_eq!(delta.untimed[&vec![Some("__other__".to_string())]].n(), 2);
}
