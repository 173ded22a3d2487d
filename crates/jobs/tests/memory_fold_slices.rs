//! `fold_batches` cuts its input into slices of at most 64 Ki rows and folds them in
//! parallel: the sketches must not depend on how the caller chunked the table, and must
//! equal the per-group reference fold of the whole table, block columns included (each
//! slice numbers its rows from its place in the stream).

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_array::{ArrayRef, StringArray, UInt32Array};
use arrow_schema::{DataType, Field, Schema};
use ldpstream_config::Config;
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::stream::{
    fold_paned_batch_reference, with_block_columns, PanedDelta, ReportLayout,
};
use ldpstream_jobs::memory_fold::fold_batches;

const CONFIG: &str = r#"
[[stream]]
name = "s"
source = { kind = "parquet", paths = ["unused.parquet"] }
mechanism = { kind = "raw", domain = 16 }
columns = { group_by = ["grp"] }
max_groups = 300
budget_epsilon = 1.0

[[stream.test]]
name = "saa"
kind = "identity"
method = "SubsampleAndAggregate"
null = "uniform"
epsilon = 0.5
delta = 0.25
block_size = 50000
"#;

/// `rows` reports with pseudo-random categories and 400 pseudo-random segments (more than
/// `max_groups`, so the cap is exercised across slices).
fn table(rows: usize) -> RecordBatch {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut reports = Vec::with_capacity(rows);
    let mut groups = Vec::with_capacity(rows);
    for _ in 0..rows {
        let r = next();
        reports.push((r % 17) as u32); // 16 is out of domain: a rejection
        groups.push(format!("seg-{:03}", (r >> 32) % 400));
    }
    let schema = Arc::new(Schema::new(vec![
        Field::new("report", DataType::UInt32, false),
        Field::new("grp", DataType::Utf8, false),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(UInt32Array::from(reports)),
        Arc::new(StringArray::from(groups)),
    ];
    RecordBatch::try_new(schema, columns).unwrap()
}

fn assert_same(a: &PanedDelta, b: &PanedDelta) {
    assert_eq!(a.panes, b.panes);
    assert_eq!(a.untimed, b.untimed);
    assert_eq!(a.late, b.late);
}

#[test]
fn the_sliced_parallel_fold_equals_the_reference_however_the_table_is_chunked() {
    let config = Config::from_toml_str(CONFIG, "test").unwrap();
    let stream = &config.streams[0];
    let mechanism = Mechanism::from_config(&stream.mechanism).unwrap();
    let layout = ReportLayout::of(stream, &mechanism);
    assert!(
        !layout.block_sizes.is_empty(),
        "the test needs block columns"
    );
    let whole = table(200_000);

    let one_chunk = fold_batches(stream, &mechanism, std::slice::from_ref(&whole), "t").unwrap();
    let chunks: Vec<RecordBatch> = [(0, 1), (1, 70_000), (70_001, 99_999), (170_000, 30_000)]
        .iter()
        .map(|&(from, len)| whole.slice(from, len))
        .collect();
    let chunked = fold_batches(stream, &mechanism, &chunks, "t").unwrap();
    assert_same(&one_chunk, &chunked);

    let mut reference = PanedDelta::default();
    let with_blocks = with_block_columns(&whole, 0, &layout.block_sizes).unwrap();
    fold_paned_batch_reference(&with_blocks, &layout, "t", None, &|_| None, &mut reference)
        .unwrap();
    assert_same(&one_chunk, &reference);
    assert_eq!(
        one_chunk.untimed.len(),
        301,
        "300 groups kept apart and the overflow group"
    );
}
