//! Parquet as a bounded source: resolve paths and globs, check schemas up front, then fold
//! row groups in parallel, each rayon task streaming one row group batch by batch.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::{Array, ArrayRef, StringArray, UInt32Array};
use arrow::datatypes::{DataType, Schema};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use ldpstream_engine::fold::{fold_categories, fold_categories_grouped};
use ldpstream_engine::sketch::CountSketch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;
use rayon::prelude::*;

use crate::error::ConnectorError;
use crate::grouping::{group_rows, GroupKey};

/// Rows per decoded batch: large enough to amortise per-batch work, small enough that a
/// batch of a few columns stays in L2.
pub const BATCH_ROWS: usize = 64 * 1024;

/// Which columns of a file a stream reads, and how large its category domain is.
#[derive(Debug, Clone)]
pub struct ReportLayout {
    pub report: String,
    pub group_by: Vec<String>,
    pub domain: usize,
}

/// One Parquet file with its row-group sizes, checked against a layout.
#[derive(Debug, Clone)]
pub struct InputFile {
    pub path: PathBuf,
    pub row_group_rows: Vec<u64>,
}

/// Per-group sketches; the key is empty when the stream is not grouped.
pub type GroupedSketches = BTreeMap<GroupKey, CountSketch>;

/// Expands paths and glob patterns into a sorted, de-duplicated file list. A pattern that
/// matches nothing, or a path that does not exist, is an error naming it.
pub fn resolve_inputs(patterns: &[String]) -> Result<Vec<PathBuf>, ConnectorError> {
    let mut files = Vec::new();
    for pattern in patterns {
        let is_glob = pattern.contains(['*', '?', '[']);
        if !is_glob {
            let path = PathBuf::from(pattern);
            std::fs::metadata(&path).map_err(|source| ConnectorError::Io {
                path: pattern.clone(),
                source,
            })?;
            files.push(path);
            continue;
        }
        let paths = glob::glob(pattern).map_err(|e| ConnectorError::BadPattern {
            pattern: pattern.clone(),
            message: e.to_string(),
        })?;
        let before = files.len();
        for entry in paths {
            let path = entry.map_err(|e| ConnectorError::Io {
                path: e.path().display().to_string(),
                source: std::io::Error::other(e.to_string()),
            })?;
            if path.is_file() {
                files.push(path);
            }
        }
        if files.len() == before {
            return Err(ConnectorError::NoMatch {
                pattern: pattern.clone(),
            });
        }
    }
    files.sort();
    files.dedup();
    Ok(files)
}

fn open(path: &Path) -> Result<ParquetRecordBatchReaderBuilder<File>, ConnectorError> {
    let shown = path.display().to_string();
    let file = File::open(path).map_err(|source| ConnectorError::Io {
        path: shown.clone(),
        source,
    })?;
    ParquetRecordBatchReaderBuilder::try_new(file).map_err(|source| ConnectorError::Parquet {
        path: shown,
        source,
    })
}

fn is_string(t: &DataType) -> bool {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        DataType::Dictionary(_, v) => matches!(**v, DataType::Utf8 | DataType::LargeUtf8),
        _ => false,
    }
}

fn check_column(
    path: &Path,
    schema: &Schema,
    column: &str,
    expected: &str,
    accepts: impl Fn(&DataType) -> bool,
) -> Result<(), ConnectorError> {
    let field = schema
        .field_with_name(column)
        .map_err(|_| ConnectorError::MissingColumn {
            path: path.display().to_string(),
            column: column.to_string(),
            expected: expected.to_string(),
            available: schema
                .fields()
                .iter()
                .map(|f| format!("{} ({})", f.name(), f.data_type()))
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    if accepts(field.data_type()) {
        Ok(())
    } else {
        Err(ConnectorError::WrongType {
            path: path.display().to_string(),
            column: column.to_string(),
            expected: expected.to_string(),
            found: field.data_type().to_string(),
        })
    }
}

/// Opens every file's footer and checks the report and group columns before any data is
/// read, so that a bad file fails the job in seconds rather than after an hour.
pub fn inspect(paths: &[PathBuf], layout: &ReportLayout) -> Result<Vec<InputFile>, ConnectorError> {
    paths
        .iter()
        .map(|path| {
            let builder = open(path)?;
            let schema = builder.schema();
            check_column(path, schema, &layout.report, "UInt32", |t| {
                *t == DataType::UInt32
            })?;
            for g in &layout.group_by {
                check_column(path, schema, g, "Utf8", is_string)?;
            }
            let row_group_rows = builder
                .metadata()
                .row_groups()
                .iter()
                .map(|rg| rg.num_rows().max(0) as u64)
                .collect();
            Ok(InputFile {
                path: path.clone(),
                row_group_rows,
            })
        })
        .collect()
}

/// Folds every row group of `files` into per-group sketches on the current rayon pool.
/// Each task owns its sketches; they are merged exactly at the end, so the result does not
/// depend on the number of threads or the order tasks finish in.
pub fn fold_files(
    files: &[InputFile],
    layout: &ReportLayout,
    progress: &ProgressBar,
) -> Result<GroupedSketches, ConnectorError> {
    let units: Vec<(&InputFile, usize)> = files
        .iter()
        .flat_map(|f| (0..f.row_group_rows.len()).map(move |rg| (f, rg)))
        .collect();
    units
        .par_iter()
        .map(|(file, rg)| {
            let folded = fold_row_group(&file.path, *rg, layout)?;
            progress.inc(file.row_group_rows[*rg]);
            Ok(folded)
        })
        .try_reduce(GroupedSketches::new, |mut a, b| {
            merge_into(&mut a, b)?;
            Ok(a)
        })
}

fn merge_into(into: &mut GroupedSketches, from: GroupedSketches) -> Result<(), ConnectorError> {
    for (key, sketch) in from {
        match into.get_mut(&key) {
            Some(existing) => existing.merge(&sketch)?,
            None => {
                into.insert(key, sketch);
            }
        }
    }
    Ok(())
}

/// A progress bar on stderr that draws only when stderr is a terminal.
pub fn progress_bar(total_rows: u64) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total_rows), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{elapsed_precise} [{wide_bar}] {human_pos}/{human_len} rows, {per_sec}, ETA {eta}",
    ) {
        bar.set_style(style);
    }
    bar
}

fn fold_row_group(
    path: &Path,
    rg: usize,
    layout: &ReportLayout,
) -> Result<GroupedSketches, ConnectorError> {
    let shown = || path.display().to_string();
    let builder = open(path)?;
    let arrow_schema = builder.schema().clone();
    let mut roots = Vec::with_capacity(1 + layout.group_by.len());
    for column in std::iter::once(&layout.report).chain(&layout.group_by) {
        let index = arrow_schema
            .index_of(column)
            .map_err(|source| ConnectorError::Arrow {
                path: shown(),
                source,
            })?;
        roots.push(index);
    }
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let reader = builder
        .with_projection(mask)
        .with_row_groups(vec![rg])
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|source| ConnectorError::Parquet {
            path: shown(),
            source,
        })?;

    let mut out = GroupedSketches::new();
    let mut ungrouped = CountSketch::new(layout.domain);
    let mut scratch: Vec<CountSketch> = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|source| ConnectorError::Arrow {
            path: shown(),
            source,
        })?;
        let report = column_as::<UInt32Array>(&batch, &layout.report, path, "UInt32")?;
        if layout.group_by.is_empty() {
            fold_categories(report, &mut ungrouped);
            continue;
        }
        let mut owned: Vec<ArrayRef> = Vec::with_capacity(layout.group_by.len());
        for g in &layout.group_by {
            let column = batch
                .column_by_name(g)
                .ok_or_else(|| ConnectorError::MissingColumn {
                    path: shown(),
                    column: g.clone(),
                    expected: "Utf8".into(),
                    available: String::new(),
                })?;
            let utf8 = arrow::compute::cast(column, &DataType::Utf8).map_err(|source| {
                ConnectorError::Arrow {
                    path: shown(),
                    source,
                }
            })?;
            owned.push(utf8);
        }
        let strings: Vec<&StringArray> = owned
            .iter()
            .map(|a| a.as_any().downcast_ref::<StringArray>())
            .collect::<Option<_>>()
            .ok_or_else(|| {
                ConnectorError::Invalid(format!("{}: group column cast to Utf8 failed", shown()))
            })?;
        let groups = group_rows(&strings, batch.num_rows());
        scratch.clear();
        scratch.resize(groups.keys.len(), CountSketch::new(layout.domain));
        fold_categories_grouped(report, &groups.ids, &mut scratch);
        for (key, sketch) in groups.keys.into_iter().zip(scratch.drain(..)) {
            match out.get_mut(&key) {
                Some(existing) => existing.merge(&sketch)?,
                None => {
                    out.insert(key, sketch);
                }
            }
        }
    }
    if layout.group_by.is_empty() {
        out.insert(Vec::new(), ungrouped);
    }
    Ok(out)
}

fn column_as<'a, T: 'static>(
    batch: &'a arrow::record_batch::RecordBatch,
    name: &str,
    path: &Path,
    expected: &str,
) -> Result<&'a T, ConnectorError> {
    let column = batch
        .column_by_name(name)
        .ok_or_else(|| ConnectorError::MissingColumn {
            path: path.display().to_string(),
            column: name.to_string(),
            expected: expected.to_string(),
            available: String::new(),
        })?;
    column
        .as_any()
        .downcast_ref::<T>()
        .ok_or_else(|| ConnectorError::WrongType {
            path: path.display().to_string(),
            column: name.to_string(),
            expected: expected.to_string(),
            found: column.data_type().to_string(),
        })
}
