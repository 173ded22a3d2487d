//! The dictionary-key path against the Arrow reader: files written by parquet's own
//! ArrowWriter in many shapes (row-group and page sizes, nulls, PLAIN fallback, data page
//! v1 and v2, every codec) must fold to the same sketches both ways, and damaged pages
//! must be errors that name the file, column and row group.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_array::UInt32Array;
use arrow_schema::{DataType, Field, Schema};
use ldpstream_config::MechanismConfig;
use ldpstream_connectors::parquet::dictionary::{count_chunk, count_report_keys, count_row_group};
use ldpstream_connectors::parquet::files::{inspect, InputFile};
use ldpstream_connectors::parquet::reader::read_row_group_batches;
use ldpstream_connectors::{ConnectorError, ParallelFiles, RowGroupInput};
use ldpstream_engine::kernels::fold_key_counts;
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::sketch::Sketch;
use ldpstream_engine::stream::{fold_paned_batch, PanedDelta, ReportLayout};
use ldpstream_engine::window::{pane_start, Grouped};
use parquet::arrow::ArrowWriter;
use parquet::basic::{BrotliLevel, Compression, GzipLevel, ZstdLevel};
use parquet::column::page::Page;
use parquet::file::properties::{WriterProperties, WriterVersion};
use parquet::file::reader::FileReader;
use parquet::file::serialized_reader::SerializedFileReader;
use proptest::prelude::*;

fn mechanism(kind: u8) -> Mechanism {
    let config = match kind {
        0 => MechanismConfig::Grr {
            epsilon: 1.0,
            domain: 16,
        },
        1 => MechanismConfig::Raw { domain: 5 },
        _ => MechanismConfig::Matrix {
            matrix: vec![vec![0.6, 0.3], vec![0.3, 0.4], vec![0.1, 0.3]],
        },
    };
    Mechanism::from_config(&config).expect("a valid mechanism")
}

fn layout(mechanism: Mechanism) -> ReportLayout {
    ReportLayout {
        mechanism,
        report: "report".into(),
        index: None,
        group_by: Vec::new(),
        ts: "ts".into(),
        block_sizes: Vec::new(),
        max_groups: usize::MAX,
        max_group_value_bytes: usize::MAX,
    }
}

#[derive(Debug, Clone)]
struct Shape {
    nullable: bool,
    row_group_rows: usize,
    write_batch: usize,
    page_rows: usize,
    page_bytes: usize,
    dictionary_bytes: usize,
    dictionary: bool,
    v2: bool,
    codec: u8,
}

fn compression(codec: u8) -> Compression {
    match codec {
        0 => Compression::UNCOMPRESSED,
        1 => Compression::SNAPPY,
        2 => Compression::GZIP(GzipLevel::default()),
        3 => Compression::LZ4_RAW,
        4 => Compression::ZSTD(ZstdLevel::default()),
        5 => Compression::BROTLI(BrotliLevel::default()),
        _ => Compression::LZ4,
    }
}

fn write(path: &Path, values: &[Option<u32>], shape: &Shape) {
    let schema = Arc::new(Schema::new(vec![Field::new(
        "report",
        DataType::UInt32,
        shape.nullable,
    )]));
    let props = WriterProperties::builder()
        .set_writer_version(if shape.v2 {
            WriterVersion::PARQUET_2_0
        } else {
            WriterVersion::PARQUET_1_0
        })
        .set_compression(compression(shape.codec))
        .set_max_row_group_row_count(Some(shape.row_group_rows))
        .set_write_batch_size(shape.write_batch)
        .set_data_page_row_count_limit(shape.page_rows)
        .set_data_page_size_limit(shape.page_bytes)
        .set_dictionary_page_size_limit(shape.dictionary_bytes)
        .set_dictionary_enabled(shape.dictionary)
        .build();
    let file = std::fs::File::create(path).expect("create the test file");
    let mut writer = ArrowWriter::try_new(file, schema.clone(), Some(props)).expect("writer");
    // Several writes, so that row groups and pages do not line up with batches.
    for chunk in values.chunks(777) {
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(UInt32Array::from(chunk.to_vec()))],
        )
        .expect("batch");
        writer.write(&batch).expect("write");
    }
    writer.close().expect("close");
}

fn input(path: &Path, layout: &ReportLayout) -> InputFile {
    inspect(&[path.to_path_buf()], layout)
        .expect("inspect")
        .remove(0)
}

/// The fold `batch` gives each row group's inputs: batches into panes, dictionary-key
/// counts into the one untimed sketch.
fn fold_input(delta: &mut PanedDelta, input: RowGroupInput<'_>, layout: &ReportLayout) {
    match input {
        RowGroupInput::Batch { batch, origin, ts } => {
            let pane_of = |t: i64| Some(pane_start(t, 60_000));
            fold_paned_batch(batch, layout, origin, ts, &pane_of, delta).expect("fold");
        }
        RowGroupInput::KeyCounts(counts) => {
            if counts.rows > 0 {
                let mut sketch = layout.mechanism.new_sketch();
                let Sketch::Counts(s) = &mut sketch else {
                    panic!("the key path is offered to count sketches only");
                };
                fold_key_counts(&counts.dictionary, &counts.key_counts, counts.nulls, s);
                // A task of the parallel fold folds several row groups: each adds to the
                // one sketch, as the batch job's fold does.
                match delta.untimed.get_mut(&Vec::new()) {
                    Some(existing) => existing.merge(&sketch).expect("merge"),
                    None => {
                        delta.untimed.insert(Vec::new(), sketch);
                    }
                }
            }
        }
    }
}

fn arrow_fold(file: &InputFile, rg: usize, layout: &ReportLayout) -> Grouped {
    let mut delta = PanedDelta::default();
    read_row_group_batches(file, rg, 0, layout, |batch, origin, ts| {
        fold_input(
            &mut delta,
            RowGroupInput::Batch { batch, origin, ts },
            layout,
        );
        Ok(())
    })
    .expect("arrow fold");
    assert!(delta.panes.is_empty() && delta.late == 0);
    delta.untimed
}

/// The row group folded from its dictionary keys, or None when the key path does not
/// take it.
fn key_fold(
    file: &InputFile,
    rg: usize,
    layout: &ReportLayout,
) -> Result<Option<PanedDelta>, ConnectorError> {
    Ok(count_report_keys(file, rg, layout)?.map(|counts| {
        let mut delta = PanedDelta::default();
        fold_input(&mut delta, RowGroupInput::KeyCounts(&counts), layout);
        delta
    }))
}

/// Runs of equal values (so that the writer emits RLE runs), a few out of the domain,
/// some null.
fn values(nullable: bool) -> impl Strategy<Value = Vec<Option<u32>>> {
    let value = prop_oneof![
        8 => 0u32..20,
        1 => Just(u32::MAX),
        1 => 1000u32..5000,
    ];
    let item = if nullable {
        prop_oneof![10 => value.prop_map(Some), 1 => Just(None)].boxed()
    } else {
        value.prop_map(Some).boxed()
    };
    proptest::collection::vec(
        (item, prop_oneof![3 => Just(1usize), 1 => 1usize..60]),
        0..120,
    )
    .prop_map(|runs| {
        runs.into_iter()
            .flat_map(|(v, n)| std::iter::repeat_n(v, n))
            .collect()
    })
}

fn shape() -> impl Strategy<Value = (Shape, Vec<Option<u32>>)> {
    (
        any::<bool>(),
        1usize..1500,
        1usize..300,
        1usize..800,
        prop_oneof![Just(1024 * 1024), 16usize..2000],
        prop_oneof![3 => Just(1024 * 1024), 1 => 8usize..200],
        prop_oneof![5 => Just(true), 1 => Just(false)],
        any::<bool>(),
        0u8..7,
    )
        .prop_flat_map(
            |(
                nullable,
                row_group_rows,
                write_batch,
                page_rows,
                page_bytes,
                dictionary_bytes,
                dictionary,
                v2,
                codec,
            )| {
                let shape = Shape {
                    nullable,
                    row_group_rows,
                    write_batch,
                    page_rows,
                    page_bytes,
                    dictionary_bytes,
                    dictionary,
                    v2,
                    codec,
                };
                (Just(shape), values(nullable))
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn dictionary_keys_fold_like_the_arrow_reader((shape, values) in shape(), kind in 0u8..3) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("reports.parquet");
        write(&path, &values, &shape);
        let layout = layout(mechanism(kind));
        let file = input(&path, &layout);
        for rg in 0..file.row_group_rows.len() {
            let expected = arrow_fold(&file, rg, &layout);
            if let Some(delta) = key_fold(&file, rg, &layout).expect("key fold") {
                prop_assert!(delta.panes.is_empty() && delta.late == 0);
                prop_assert_eq!(&delta.untimed, &expected, "row group {}", rg);
            } else {
                // Only a chunk that is not dictionary-encoded throughout may fall back.
                prop_assert!(!shape.dictionary || shape.dictionary_bytes < 1024 * 1024);
            }
        }
        // And the whole file through the dispatching fold that `batch` uses.
        let all = ParallelFiles::new(std::slice::from_ref(&file), &layout)
            .fold(
                PanedDelta::default,
                |delta, input| {
                    fold_input(delta, input, &layout);
                    Ok(())
                },
                |mut a, b| {
                    a.merge(b)?;
                    Ok(a)
                },
                &|_| {},
            )
            .expect("fold");
        let mut expected = Grouped::new();
        for rg in 0..file.row_group_rows.len() {
            ldpstream_engine::window::merge_grouped(&mut expected, &arrow_fold(&file, rg, &layout))
                .expect("merge");
        }
        prop_assert_eq!(all.untimed, expected);
    }

    /// Arbitrary bytes in a data page are an error or a count, never a panic.
    #[test]
    fn garbage_pages_do_not_panic(
        dictionary in proptest::collection::vec(any::<u8>(), 0..64),
        data in proptest::collection::vec(any::<u8>(), 0..256),
        num_values in 0u32..2000,
        optional in any::<bool>(),
        v2 in any::<bool>(),
        def_len in 0u32..300,
    ) {
        let dictionary_page = Page::DictionaryPage {
            num_values: (dictionary.len() / 4) as u32,
            buf: dictionary.into(),
            encoding: parquet::basic::Encoding::PLAIN,
            is_sorted: false,
        };
        let data_page = if v2 {
            Page::DataPageV2 {
                buf: data.into(),
                num_values,
                encoding: parquet::basic::Encoding::RLE_DICTIONARY,
                num_nulls: 0,
                num_rows: num_values,
                def_levels_byte_len: def_len,
                rep_levels_byte_len: 0,
                is_compressed: false,
                statistics: None,
            }
        } else {
            Page::DataPage {
                buf: data.into(),
                num_values,
                encoding: parquet::basic::Encoding::RLE_DICTIONARY,
                def_level_encoding: parquet::basic::Encoding::RLE,
                rep_level_encoding: parquet::basic::Encoding::RLE,
                statistics: None,
            }
        };
        let pages = vec![Ok(dictionary_page), Ok(data_page)];
        let _ = count_chunk(pages.into_iter(), optional, u64::from(num_values));
    }
}

fn temp_file(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

fn plain_shape() -> Shape {
    Shape {
        nullable: false,
        row_group_rows: 10_000,
        write_batch: 1024,
        page_rows: 20_000,
        page_bytes: 1024 * 1024,
        dictionary_bytes: 1024 * 1024,
        dictionary: true,
        v2: false,
        codec: 0,
    }
}

fn cycling(n: u32, d: u32) -> Vec<Option<u32>> {
    (0..n).map(|i| Some((i * 7) % d)).collect()
}

#[test]
fn a_dictionary_column_takes_the_key_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = temp_file(&dir, "dict.parquet");
    write(&path, &cycling(25_000, 19), &plain_shape());
    let layout = layout(mechanism(0));
    let file = input(&path, &layout);
    assert_eq!(file.row_group_rows, vec![10_000, 10_000, 5_000]);
    for rg in 0..3 {
        let counts = count_row_group(&file, rg, "report")
            .expect("counts")
            .expect("dictionary-encoded");
        assert_eq!(counts.rows, file.row_group_rows[rg]);
        assert_eq!(counts.nulls, 0);
        assert_eq!(counts.dictionary.len(), 19);
        let delta = key_fold(&file, rg, &layout)
            .expect("fold")
            .expect("key path");
        assert_eq!(delta.untimed, arrow_fold(&file, rg, &layout));
    }
}

#[test]
fn a_plain_fallback_or_no_dictionary_goes_to_the_arrow_reader() {
    let dir = tempfile::tempdir().expect("tempdir");
    let layout = layout(mechanism(0));
    // 5,000 distinct values overflow a 64-byte dictionary page: the writer falls back to
    // PLAIN within the chunk.
    let fallback = temp_file(&dir, "fallback.parquet");
    let values: Vec<Option<u32>> = (0..5000).map(Some).collect();
    write(
        &fallback,
        &values,
        &Shape {
            dictionary_bytes: 64,
            page_rows: 100,
            write_batch: 100,
            ..plain_shape()
        },
    );
    let file = input(&fallback, &layout);
    assert_eq!(count_row_group(&file, 0, "report").expect("no error"), None);
    assert!(key_fold(&file, 0, &layout).expect("no error").is_none());

    let plain = temp_file(&dir, "plain.parquet");
    write(
        &plain,
        &cycling(1000, 16),
        &Shape {
            dictionary: false,
            ..plain_shape()
        },
    );
    let file = input(&plain, &layout);
    assert_eq!(count_row_group(&file, 0, "report").expect("no error"), None);
}

#[test]
fn grouped_or_timed_layouts_are_not_taken() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = temp_file(&dir, "dict.parquet");
    write(&path, &cycling(100, 16), &plain_shape());
    let mut blocks = layout(mechanism(0));
    blocks.block_sizes = vec![10];
    let file = input(&path, &blocks);
    assert!(key_fold(&file, 0, &blocks).expect("ok").is_none());
    let mut timed = file.clone();
    timed.has_ts = true;
    assert!(key_fold(&timed, 0, &layout(mechanism(0)))
        .expect("ok")
        .is_none());
}

/// The single data page of a one-row-group, uncompressed, required column.
fn first_data_page(path: &Path) -> Vec<u8> {
    let reader = SerializedFileReader::new(std::fs::File::open(path).expect("open")).expect("read");
    let row_group = reader.get_row_group(0).expect("row group");
    let pages: Vec<Page> = row_group
        .get_column_page_reader(0)
        .expect("pages")
        .collect::<Result<_, _>>()
        .expect("decode pages");
    pages
        .into_iter()
        .find(|p| p.is_data_page())
        .expect("a data page")
        .buffer()
        .to_vec()
}

/// Writes a file, then replaces its data page's bytes in place with `damage(bytes)` (same
/// length), and returns the error the key path reports.
fn damaged(name: &str, damage: impl Fn(&mut [u8])) -> ConnectorError {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = temp_file(&dir, name);
    // Values 0..16 cycling: 4-bit keys, all bit-packed.
    write(&path, &cycling(4000, 16), &plain_shape());
    let page = first_data_page(&path);
    let mut bytes = std::fs::read(&path).expect("read file");
    let at = bytes
        .windows(page.len())
        .position(|w| w == page.as_slice())
        .expect("the page bytes in the file");
    damage(&mut bytes[at..at + page.len()]);
    std::fs::write(&path, &bytes).expect("write damaged file");
    let layout = layout(mechanism(0));
    let file = input(&path, &layout);
    let err = key_fold(&file, 0, &layout).expect_err("a damaged page is an error");
    let shown = err.to_string();
    assert!(shown.contains(&path.display().to_string()), "{shown}");
    assert!(shown.contains("column \"report\""), "{shown}");
    assert!(shown.contains("row group 0"), "{shown}");
    err
}

#[test]
fn a_corrupt_bit_width_is_an_error() {
    let err = damaged("width.parquet", |page| page[0] = 40);
    assert!(err.to_string().contains("bit width 40"), "{err}");
}

#[test]
fn a_key_beyond_the_dictionary_is_an_error() {
    // The first run becomes an RLE run of 4,000 keys 31 (header 8000 as LEB128).
    let err = damaged("key.parquet", |page| {
        page[1..4].copy_from_slice(&[0xc0, 0x3e, 31])
    });
    assert!(err.to_string().contains("dictionary size 16"), "{err}");
}

#[test]
fn a_truncated_key_stream_is_an_error() {
    // A bit-packed header claiming one group, then an RLE header whose run is far too
    // short: the stream ends before the page's values do.
    let err = damaged("truncated.parquet", |page| {
        page[1] = 0b11;
        for b in &mut page[2 + 4..] {
            *b = 0;
        }
    });
    assert!(err.to_string().contains("stream ends"), "{err}");
}

#[test]
fn a_truncated_page_is_an_error() {
    let dictionary = Page::DictionaryPage {
        buf: vec![1u8, 0, 0, 0, 2, 0].into(),
        num_values: 2,
        encoding: parquet::basic::Encoding::PLAIN,
        is_sorted: false,
    };
    let err = count_chunk(vec![Ok(dictionary)].into_iter(), false, 0).expect_err("short");
    assert!(
        err.to_string().contains("dictionary page is truncated"),
        "{err}"
    );

    let data = Page::DataPage {
        buf: vec![10u8, 0, 0, 0, 1].into(),
        num_values: 3,
        encoding: parquet::basic::Encoding::RLE_DICTIONARY,
        def_level_encoding: parquet::basic::Encoding::RLE,
        rep_level_encoding: parquet::basic::Encoding::RLE,
        statistics: None,
    };
    let dictionary = Page::DictionaryPage {
        buf: vec![1u8, 0, 0, 0].into(),
        num_values: 1,
        encoding: parquet::basic::Encoding::PLAIN,
        is_sorted: false,
    };
    let err = count_chunk(vec![Ok(dictionary), Ok(data)].into_iter(), true, 3).expect_err("short");
    assert!(
        err.to_string().contains("definition levels is truncated"),
        "{err}"
    );
}
