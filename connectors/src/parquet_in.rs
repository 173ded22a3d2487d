//! Parquet as a bounded source: resolve paths and globs, check schemas up front, then fold
//! row groups in parallel, each rayon task streaming one row group batch by batch.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::array::{Array, ArrayRef, StringArray, UInt32Array};
use arrow::compute::take;
use arrow::datatypes::{DataType, Schema};
use arrow::record_batch::RecordBatch;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use ldpstream_engine::fold::{fold_batch, report_schema};
use ldpstream_engine::mechanism::Mechanism;
use ldpstream_engine::sketch::Sketch;
use ldpstream_engine::window::pane_start;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;
use rayon::prelude::*;

use crate::error::ConnectorError;
use crate::grouping::group_rows;
use crate::paned::{fold_paned_batch, is_event_time, PanedDelta};

/// Rows per decoded batch: large enough to amortise per-batch work, small enough that a
/// batch of a few columns stays in L2.
pub const BATCH_ROWS: usize = 64 * 1024;

/// Which columns of a file a stream reads, and the mechanism that decodes them.
#[derive(Debug, Clone)]
pub struct ReportLayout {
    pub mechanism: Mechanism,
    pub report: String,
    /// The row (Hadamard) or cohort column, for mechanisms that have one.
    pub index: Option<String>,
    pub group_by: Vec<String>,
    /// The event-time column, read when a file has it.
    pub ts: String,
    /// Block sizes (in reports, in stream order) whose block index becomes an extra group
    /// column named by [`block_column`], after `group_by`.
    pub block_sizes: Vec<u64>,
}

impl ReportLayout {
    pub(crate) fn columns(&self) -> impl Iterator<Item = &String> {
        std::iter::once(&self.report)
            .chain(self.index.as_ref())
            .chain(&self.group_by)
    }

    /// Every group column of a folded key: `group_by`, then one block column per size.
    pub fn key_columns(&self) -> Vec<String> {
        self.group_by
            .iter()
            .cloned()
            .chain(self.block_sizes.iter().map(|&s| block_column(s)))
            .collect()
    }
}

/// The synthetic key column holding the stream-order block index for blocks of `size`.
pub fn block_column(size: u64) -> String {
    format!("__block_{size}")
}

/// Appends one block-index column per block size, computed from each row's position in
/// stream order, before anything reorders the rows.
pub fn with_block_columns(
    batch: &RecordBatch,
    first_row: u64,
    sizes: &[u64],
) -> Result<RecordBatch, arrow::error::ArrowError> {
    if sizes.is_empty() {
        return Ok(batch.clone());
    }
    let mut fields: Vec<arrow::datatypes::FieldRef> =
        batch.schema().fields().iter().cloned().collect();
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    for &size in sizes {
        let ids: StringArray = (0..batch.num_rows() as u64)
            .map(|i| Some(((first_row + i) / size.max(1)).to_string()))
            .collect();
        fields.push(std::sync::Arc::new(arrow::datatypes::Field::new(
            block_column(size),
            DataType::Utf8,
            false,
        )));
        columns.push(std::sync::Arc::new(ids));
    }
    RecordBatch::try_new(
        std::sync::Arc::new(arrow::datatypes::Schema::new(fields)),
        columns,
    )
}

/// One Parquet file with its row-group sizes, checked against a layout.
#[derive(Debug, Clone)]
pub struct InputFile {
    pub path: PathBuf,
    pub row_group_rows: Vec<u64>,
    /// Whether the file has the event-time column; without it its reports belong to the
    /// global and cumulative windows only.
    pub has_ts: bool,
}

/// Per-group sketches; the key is empty when the stream is not grouped.
pub type GroupedSketches = ldpstream_engine::window::Grouped;

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

pub(crate) fn open(path: &Path) -> Result<ParquetRecordBatchReaderBuilder<File>, ConnectorError> {
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
            let expected = report_schema(&layout.mechanism);
            let d = layout.mechanism.domain();
            check_column(path, schema, &layout.report, &expected.report_type, |t| {
                (expected.accepts_report)(t, d)
            })?;
            if let Some(index) = &layout.index {
                check_column(path, schema, index, "UInt32", |t| *t == DataType::UInt32)?;
            }
            for g in &layout.group_by {
                check_column(path, schema, g, "Utf8", is_string)?;
            }
            let has_ts = schema.field_with_name(&layout.ts).is_ok();
            if has_ts {
                check_column(
                    path,
                    schema,
                    &layout.ts,
                    "Timestamp (ms, UTC) or Int64 milliseconds",
                    is_event_time,
                )?;
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
                has_ts,
            })
        })
        .collect()
}

/// Folds every row group of `files` into per-pane, per-group sketches (panes `pane_ms`
/// wide) on the current rayon pool. Each task owns its sketches; they are merged exactly at
/// the end, so the result does not depend on the number of threads or the order tasks
/// finish in. A bounded input has no late reports: every report lands in its pane.
pub fn fold_files(
    files: &[InputFile],
    layout: &ReportLayout,
    pane_ms: i64,
    progress: &ProgressBar,
) -> Result<PanedDelta, ConnectorError> {
    // Each unit's first row in stream order (files sorted, row groups in file order), so
    // that stream-order blocks survive the parallel fold.
    let mut units: Vec<(&InputFile, usize, u64)> = Vec::new();
    let mut offset = 0u64;
    for f in files {
        for (rg, rows) in f.row_group_rows.iter().enumerate() {
            units.push((f, rg, offset));
            offset += rows;
        }
    }
    units
        .par_iter()
        .map(|(file, rg, first_row)| {
            let folded = fold_row_group(file, *rg, *first_row, layout, pane_ms)?;
            progress.inc(file.row_group_rows[*rg]);
            Ok(folded)
        })
        .try_reduce(PanedDelta::default, |mut a, b| {
            a.merge(b)?;
            Ok(a)
        })
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
    file: &InputFile,
    rg: usize,
    first_row: u64,
    layout: &ReportLayout,
    pane_ms: i64,
) -> Result<PanedDelta, ConnectorError> {
    if let Some(counted) = crate::parquet_dict::try_fold_row_group(file, rg, layout)? {
        return Ok(counted);
    }
    fold_row_group_arrow(file, rg, first_row, layout, pane_ms)
}

/// Folds one row group from the batches of the Arrow reader: every layout and encoding.
pub fn fold_row_group_arrow(
    file: &InputFile,
    rg: usize,
    first_row: u64,
    layout: &ReportLayout,
    pane_ms: i64,
) -> Result<PanedDelta, ConnectorError> {
    let path = file.path.as_path();
    let shown = || path.display().to_string();
    let arrow_err = |source| ConnectorError::Arrow {
        path: shown(),
        source,
    };
    let builder = open(path)?;
    let arrow_schema = builder.schema().clone();
    let ts = file.has_ts.then_some(layout.ts.as_str());
    let roots = layout
        .columns()
        .map(String::as_str)
        .chain(ts)
        .map(|c| arrow_schema.index_of(c).map_err(arrow_err))
        .collect::<Result<Vec<_>, _>>()?;
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

    let mut out = PanedDelta::default();
    let pane_of = |t: i64| Some(pane_start(t, pane_ms));
    let mut row = first_row;
    for batch in reader {
        let batch = batch.map_err(arrow_err)?;
        let rows = batch.num_rows() as u64;
        let batch = with_block_columns(&batch, row, &layout.block_sizes).map_err(arrow_err)?;
        fold_paned_batch(&batch, layout, path, ts, &pane_of, &mut out)?;
        row += rows;
    }
    Ok(out)
}

/// Folds one decoded batch into `out`. Grouped batches are permuted once so that each
/// group's rows are contiguous, then every group's slice goes through the same batch kernel
/// as an ungrouped stream: one kernel call per group and batch, never one per row.
pub fn fold_record_batch(
    batch: &RecordBatch,
    layout: &ReportLayout,
    path: &Path,
    out: &mut GroupedSketches,
) -> Result<(), ConnectorError> {
    let shown = || path.display().to_string();
    let arrow_err = |source| ConnectorError::Arrow {
        path: shown(),
        source,
    };
    let report = column(batch, &layout.report, path)?;
    let index = layout
        .index
        .as_ref()
        .map(|c| column(batch, c, path))
        .transpose()?;
    let fold = |sketch: &mut Sketch, report: &dyn Array, index: Option<&dyn Array>| {
        fold_batch(&layout.mechanism, sketch, report, index).map_err(|e| match e {
            ldpstream_engine::EngineError::WrongArrayType { expected, found } => {
                ConnectorError::WrongType {
                    path: shown(),
                    column: layout.report.clone(),
                    expected,
                    found,
                }
            }
            other => ConnectorError::Engine(other),
        })
    };
    let key_columns = layout.key_columns();
    if key_columns.is_empty() {
        let sketch = out
            .entry(Vec::new())
            .or_insert_with(|| layout.mechanism.new_sketch());
        return fold(sketch, report.as_ref(), index.as_deref());
    }
    let mut owned: Vec<ArrayRef> = Vec::with_capacity(key_columns.len());
    for g in &key_columns {
        let utf8 = arrow::compute::cast(column(batch, g, path)?.as_ref(), &DataType::Utf8)
            .map_err(arrow_err)?;
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
    // Counting sort of row indices by group id.
    let mut starts = vec![0u32; groups.keys.len() + 1];
    for &g in &groups.ids {
        starts[g as usize + 1] += 1;
    }
    for k in 1..starts.len() {
        starts[k] += starts[k - 1];
    }
    let mut cursor = starts.clone();
    let mut order = vec![0u32; groups.ids.len()];
    for (row, &g) in groups.ids.iter().enumerate() {
        order[cursor[g as usize] as usize] = row as u32;
        cursor[g as usize] += 1;
    }
    let order = UInt32Array::from(order);
    let report = take(report.as_ref(), &order, None).map_err(arrow_err)?;
    let index = index
        .map(|a| take(a.as_ref(), &order, None))
        .transpose()
        .map_err(arrow_err)?;
    for (g, key) in groups.keys.into_iter().enumerate() {
        let (from, to) = (starts[g] as usize, starts[g + 1] as usize);
        let report_slice = report.slice(from, to - from);
        let index_slice = index.as_ref().map(|a| a.slice(from, to - from));
        let sketch = out
            .entry(key)
            .or_insert_with(|| layout.mechanism.new_sketch());
        fold(sketch, report_slice.as_ref(), index_slice.as_deref())?;
    }
    Ok(())
}

fn column(batch: &RecordBatch, name: &str, path: &Path) -> Result<ArrayRef, ConnectorError> {
    batch
        .column_by_name(name)
        .cloned()
        .ok_or_else(|| ConnectorError::MissingColumn {
            path: path.display().to_string(),
            column: name.to_string(),
            expected: "a column the schema check found".into(),
            available: batch
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect::<Vec<_>>()
                .join(", "),
        })
}
