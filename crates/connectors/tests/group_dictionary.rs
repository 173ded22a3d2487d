//! Group columns read as dictionaries (`parquet::group_dictionary`) and folded by the
//! one-pass fold, against the reference: the same files read as plain strings and folded
//! group by group (`fold_paned_batch_reference`). Files written by parquet's ArrowWriter
//! with several row groups (each its own dictionary), small dictionary pages (a chunk
//! that falls back to PLAIN part way), no dictionary at all, dictionary-typed columns,
//! nulls, "__other__" as a value, one or two group columns, event times and `max_groups`.

use std::path::Path;
use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::RecordBatch;
use arrow_array::{
    Array, ArrayRef, DictionaryArray, FixedSizeBinaryArray, StringArray, TimestampMillisecondArray,
    UInt32Array,
};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use ldpstream_config::MechanismConfig;
use ldpstream_connectors::parquet::files::inspect;
use ldpstream_connectors::parquet::reader::read_row_group_batches;
use ldpstream_connectors::{ConnectorError, ParallelFiles, RowGroupInput};
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::stream::{fold_paned_batch_reference, GroupFold, PanedDelta, ReportLayout};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use proptest::prelude::*;

const VALUES: [Option<&str>; 9] = [
    Some("a"),
    Some("b"),
    Some("seg-000017"),
    None,
    Some("__other__"),
    Some("zz"),
    Some("é"),
    Some(""),
    Some("seg-000003"),
];

#[derive(Debug, Clone)]
struct Row {
    report: u32,
    bits: u8,
    keys: [u8; 2],
    ts: Option<i64>,
}

#[derive(Debug, Clone)]
struct Shape {
    row_group_rows: usize,
    dictionary_bytes: usize,
    dictionary: bool,
    /// The group columns written as Arrow dictionaries (their schema then asks for one).
    dictionary_typed: bool,
    columns: usize,
    with_ts: bool,
    bitflip: bool,
    max_groups: usize,
    read_rows: usize,
}

fn mechanism(bitflip: bool) -> Mechanism {
    let config = if bitflip {
        MechanismConfig::Bitflip {
            epsilon: 1.0,
            domain: 6,
        }
    } else {
        MechanismConfig::Grr {
            epsilon: 1.0,
            domain: 5,
        }
    };
    Mechanism::from_config(&config).expect("a valid mechanism")
}

fn layout(shape: &Shape) -> ReportLayout {
    ReportLayout {
        mechanism: mechanism(shape.bitflip),
        report: "report".into(),
        index: None,
        group_by: (0..shape.columns).map(|c| format!("g{c}")).collect(),
        ts: "ts".into(),
        block_sizes: Vec::new(),
        max_groups: shape.max_groups,
        max_group_value_bytes: usize::MAX,
    }
}

fn write(path: &Path, rows: &[Row], shape: &Shape) {
    let report: ArrayRef = if shape.bitflip {
        Arc::new(
            FixedSizeBinaryArray::try_from_iter(rows.iter().map(|r| [r.bits & 0x3F]))
                .expect("reports"),
        )
    } else {
        Arc::new(UInt32Array::from(
            rows.iter().map(|r| r.report).collect::<Vec<_>>(),
        ))
    };
    let mut fields = vec![Field::new("report", report.data_type().clone(), false)];
    let mut columns = vec![report];
    for c in 0..shape.columns {
        let values: Vec<Option<&str>> = rows.iter().map(|r| VALUES[r.keys[c] as usize]).collect();
        let column: ArrayRef = if shape.dictionary_typed {
            Arc::new(values.into_iter().collect::<DictionaryArray<Int32Type>>())
        } else {
            Arc::new(StringArray::from(values))
        };
        fields.push(Field::new(
            format!("g{c}"),
            column.data_type().clone(),
            true,
        ));
        columns.push(column);
    }
    if shape.with_ts {
        fields.push(Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            true,
        ));
        columns.push(Arc::new(
            TimestampMillisecondArray::from(rows.iter().map(|r| r.ts).collect::<Vec<_>>())
                .with_timezone("UTC"),
        ));
    }
    let schema = Arc::new(Schema::new(fields));
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(shape.row_group_rows))
        .set_dictionary_page_size_limit(shape.dictionary_bytes)
        .set_dictionary_enabled(shape.dictionary)
        .build();
    let file = std::fs::File::create(path).expect("create the test file");
    let mut writer = ArrowWriter::try_new(file, schema.clone(), Some(props)).expect("writer");
    let batch = RecordBatch::try_new(schema, columns).expect("batch");
    // Several writes, so that row groups do not line up with the writes.
    let mut offset = 0;
    while offset < batch.num_rows() {
        let len = 97.min(batch.num_rows() - offset);
        writer.write(&batch.slice(offset, len)).expect("write");
        offset += len;
    }
    writer.close().expect("close");
}

fn pane_of(t: i64) -> Option<i64> {
    Some(t - t.rem_euclid(1000))
}

/// What `batch` folds: every row group read with the group columns as dictionaries,
/// one `GroupFold` per rayon task, merged.
fn one_pass(path: &Path, layout: &ReportLayout) -> PanedDelta {
    let files = inspect(&[path.to_path_buf()], layout).expect("inspect");
    let fold = ParallelFiles::new(&files, layout)
        .fold(
            || GroupFold::new(layout),
            |fold, input| match input {
                RowGroupInput::Batch { batch, origin, ts } => {
                    Ok(fold.fold_batch(batch, origin, ts, &pane_of)?)
                }
                RowGroupInput::KeyCounts(_) => Err(ConnectorError::Corrupt {
                    path: "test".into(),
                    message: "a grouped layout took the dictionary-key path".into(),
                }),
            },
            |mut a, b| {
                a.merge(b)?;
                Ok(a)
            },
            &|_| {},
        )
        .expect("one-pass fold");
    fold.into_delta().expect("delta")
}

/// The reference: the file read as it is written (strings as strings) and folded group by
/// group, batch by batch.
fn reference(path: &Path, layout: &ReportLayout, shape: &Shape) -> PanedDelta {
    let file = std::fs::File::open(path).expect("open");
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .expect("builder")
        .with_batch_size(shape.read_rows)
        .build()
        .expect("reader");
    let mut out = PanedDelta::default();
    let ts = shape.with_ts.then_some("ts");
    for batch in reader {
        let batch = batch.expect("batch");
        fold_paned_batch_reference(&batch, layout, "t", ts, &pane_of, &mut out).expect("fold");
    }
    out
}

fn row() -> impl Strategy<Value = Row> {
    (
        0u32..7,
        any::<u8>(),
        proptest::array::uniform2(0u8..9),
        prop_oneof![6 => (-3000i64..5000).prop_map(Some), 1 => Just(None)],
    )
        .prop_map(|(report, bits, keys, ts)| Row {
            report,
            bits,
            keys,
            ts,
        })
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        (
            1usize..300,
            prop_oneof![3 => Just(1024 * 1024), 1 => 4usize..40],
            prop_oneof![5 => Just(true), 1 => Just(false)],
            prop_oneof![4 => Just(false), 1 => Just(true)],
        ),
        (
            1usize..3,
            any::<bool>(),
            any::<bool>(),
            prop_oneof![2 => Just(usize::MAX), 1 => 1usize..8],
            1usize..500,
        ),
    )
        .prop_map(
            |(
                (row_group_rows, dictionary_bytes, dictionary, dictionary_typed),
                (columns, with_ts, bitflip, max_groups, read_rows),
            )| Shape {
                row_group_rows,
                dictionary_bytes,
                dictionary,
                dictionary_typed,
                columns,
                with_ts,
                bitflip,
                max_groups,
                read_rows,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    #[test]
    fn group_columns_read_as_dictionaries_fold_like_the_reference(
        rows in proptest::collection::vec(row(), 0..900),
        shape in shape(),
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("grouped.parquet");
        write(&path, &rows, &shape);
        let layout = layout(&shape);
        let got = one_pass(&path, &layout);
        let expected = reference(&path, &layout, &shape);
        prop_assert_eq!(&got.panes, &expected.panes);
        prop_assert_eq!(&got.untimed, &expected.untimed);
        prop_assert_eq!(got.late, expected.late);
        prop_assert_eq!(got.max_ts, expected.max_ts);
        let total: u64 = got
            .panes
            .values()
            .chain(std::iter::once(&got.untimed))
            .flat_map(|g| g.values())
            .map(|s| s.n() + s.rejected().total())
            .sum();
        prop_assert_eq!(total, rows.len() as u64);
    }
}

/// A string group column of a Parquet file reaches the fold as a dictionary of its
/// strings (the point of the schema hint), whatever the row group.
#[test]
fn a_string_group_column_is_read_as_a_dictionary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("grouped.parquet");
    let shape = Shape {
        row_group_rows: 50,
        dictionary_bytes: 1024 * 1024,
        dictionary: true,
        dictionary_typed: false,
        columns: 1,
        with_ts: false,
        bitflip: false,
        max_groups: usize::MAX,
        read_rows: 1024,
    };
    let rows: Vec<Row> = (0..200u8)
        .map(|i| Row {
            report: u32::from(i % 5),
            bits: 0,
            keys: [i % 9, 0],
            ts: None,
        })
        .collect();
    write(&path, &rows, &shape);
    let layout = layout(&shape);
    let files = inspect(&[path.to_path_buf()], &layout).expect("inspect");
    let mut seen = 0;
    for rg in 0..files[0].row_group_rows.len() {
        read_row_group_batches(&files[0], rg, 0, &layout, |batch, _, _| {
            let g = batch.column_by_name("g0").expect("g0");
            assert_eq!(
                g.data_type(),
                &DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
            );
            seen += g.len();
            Ok(())
        })
        .expect("read");
    }
    assert_eq!(seen, 200);
}
