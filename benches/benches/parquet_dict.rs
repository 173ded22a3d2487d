//! One row group of 2²⁰ GenRR reports (SNAPPY, written like `ldpstream simulate`), folded
//! two ways: the Arrow reader materializing dictionary-decoded values for the count kernel,
//! and the dictionary-key path counting keys straight from the pages. Both include opening
//! the file, reading and decompressing the pages (from the page cache); one core.

use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_array::UInt32Array;
use arrow_schema::{DataType, Field, Schema};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ldpstream_benches::random_categories;
use ldpstream_config::MechanismConfig;
use ldpstream_connectors::parquet::dictionary::count_report_keys;
use ldpstream_connectors::parquet::files::{inspect, InputFile};
use ldpstream_connectors::parquet::reader::read_row_group_batches;
use ldpstream_engine::kernels::fold_key_counts;
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::sketch::Sketch;
use ldpstream_engine::stream::{fold_paned_batch, PanedDelta, ReportLayout};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use std::hint::black_box;

const ROWS: usize = 1 << 20;

fn write_file(d: u32) -> PathBuf {
    let path = std::env::temp_dir().join(format!("ldpstream_bench_dict_d{d}_{ROWS}.parquet"));
    let schema = Arc::new(Schema::new(vec![Field::new(
        "report",
        DataType::UInt32,
        false,
    )]));
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(ROWS))
        .build();
    let file = std::fs::File::create(&path).expect("create the bench file");
    let mut writer = ArrowWriter::try_new(file, schema.clone(), Some(props)).expect("writer");
    let values = UInt32Array::from(random_categories(ROWS, d, 7));
    let batch = RecordBatch::try_new(schema, vec![Arc::new(values)]).expect("batch");
    writer.write(&batch).expect("write");
    writer.close().expect("close");
    path
}

/// The Arrow path: batches of decoded values through the grouped fold.
fn arrow_fold(file: &InputFile, layout: &ReportLayout) -> PanedDelta {
    let mut delta = PanedDelta::default();
    read_row_group_batches(file, 0, 0, layout, |batch, origin, ts| {
        fold_paned_batch(batch, layout, origin, ts, &|_| Some(0), &mut delta)?;
        Ok(())
    })
    .expect("fold");
    delta
}

/// The key path: the keys counted from the pages, mapped through the dictionary.
fn key_fold(file: &InputFile, layout: &ReportLayout) -> Option<Sketch> {
    let counts = count_report_keys(file, 0, layout).expect("count")?;
    let mut sketch = layout.mechanism.new_sketch();
    if let Sketch::Counts(s) = &mut sketch {
        fold_key_counts(&counts.dictionary, &counts.key_counts, counts.nulls, s);
    }
    Some(sketch)
}

fn row_group(c: &mut Criterion) {
    let mut group = c.benchmark_group("parquet_row_group_grr");
    group.sample_size(30);
    for d in [16u32, 1024] {
        let path = write_file(d);
        let mechanism = Mechanism::from_config(&MechanismConfig::Grr {
            epsilon: 1.0,
            domain: d,
        })
        .expect("valid mechanism");
        let layout = ReportLayout {
            mechanism,
            report: "report".into(),
            index: None,
            group_by: Vec::new(),
            ts: "ts".into(),
            block_sizes: Vec::new(),
            max_groups: usize::MAX,
            max_group_value_bytes: usize::MAX,
        };
        let file = inspect(std::slice::from_ref(&path), &layout)
            .expect("inspect")
            .remove(0);
        assert!(
            key_fold(&file, &layout).is_some(),
            "the bench file is dictionary-encoded"
        );
        group.throughput(Throughput::Elements(ROWS as u64));
        group.bench_with_input(
            BenchmarkId::new("arrow_materialize", d),
            &file,
            |b, file| {
                b.iter(|| arrow_fold(black_box(file), &layout));
            },
        );
        group.bench_with_input(BenchmarkId::new("dictionary_keys", d), &file, |b, file| {
            b.iter(|| key_fold(black_box(file), &layout));
        });
        let _ = std::fs::remove_file(&path);
    }
    group.finish();
}

criterion_group!(benches, row_group);
criterion_main!(benches);
