//! The Parquet files of a bounded source: paths and globs resolved, footers read and the
//! report and group columns checked before any data is read, so that a bad file fails a
//! job in seconds rather than after an hour.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::datatypes::{DataType, Schema};
use ldpstream_engine::kernels::report_schema;
use ldpstream_engine::stream::{is_event_time, ReportLayout};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::file::metadata::ParquetMetaData;

use crate::error::ConnectorError;

/// One Parquet file with its row-group sizes, checked against a layout.
#[derive(Debug, Clone)]
pub struct InputFile {
    pub path: PathBuf,
    pub row_group_rows: Vec<u64>,
    /// Whether the file has the event-time column; without it its reports belong to the
    /// global and cumulative windows only.
    pub has_ts: bool,
    /// The footer, parsed once by [`inspect`]. Every row-group task reuses it: parsing
    /// the footer per row group costs time linear in the number of row groups, so a file
    /// of many small row groups took time quadratic in their number.
    pub metadata: ArrowReaderMetadata,
}

/// Expands paths and glob patterns into a sorted, de-duplicated file list. A pattern that
/// matches nothing, or a path that does not exist, is an error naming it.
pub fn resolve_inputs(patterns: &[String]) -> Result<Vec<PathBuf>, ConnectorError> {
    let mut files = Vec::new();
    for pattern in patterns {
        // A path that exists is that path, even when its name has glob characters
        // (`x[1].parquet`).
        let is_glob = pattern.contains(['*', '?', '[']) && !Path::new(pattern).exists();
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
    unique_files(files)
}

/// The files once each, by what they are rather than how they were spelled: canonical
/// paths (no `./`, `..` or symlinked directories), and one entry per (device, inode), so
/// that `data/*.parquet` beside `./data/a.parquet`, or a hard link, is not read twice.
fn unique_files(files: Vec<PathBuf>) -> Result<Vec<PathBuf>, ConnectorError> {
    use std::os::unix::fs::MetadataExt;
    let mut by_inode = std::collections::BTreeMap::new();
    for file in files {
        let io = |source| ConnectorError::Io {
            path: file.display().to_string(),
            source,
        };
        let canonical = std::fs::canonicalize(&file).map_err(io)?;
        let meta = std::fs::metadata(&canonical).map_err(io)?;
        by_inode
            .entry((meta.dev(), meta.ino()))
            .and_modify(|kept: &mut PathBuf| {
                if canonical < *kept {
                    *kept = canonical.clone();
                }
            })
            .or_insert(canonical);
    }
    let mut files: Vec<PathBuf> = by_inode.into_values().collect();
    files.sort();
    Ok(files)
}

pub fn open(path: &Path) -> Result<ParquetRecordBatchReaderBuilder<File>, ConnectorError> {
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

/// A reader builder over `file` that reuses the footer parsed by [`inspect`].
pub fn open_inspected(
    file: &InputFile,
) -> Result<ParquetRecordBatchReaderBuilder<File>, ConnectorError> {
    let opened = File::open(&file.path).map_err(|source| ConnectorError::Io {
        path: file.path.display().to_string(),
        source,
    })?;
    Ok(ParquetRecordBatchReaderBuilder::new_with_metadata(
        opened,
        file.metadata.clone(),
    ))
}

fn is_string(t: &DataType) -> bool {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        DataType::Dictionary(_, v) => matches!(**v, DataType::Utf8 | DataType::LargeUtf8),
        _ => false,
    }
}

fn check_column(
    origin: &str,
    schema: &Schema,
    column: &str,
    expected: &str,
    accepts: impl Fn(&DataType) -> bool,
) -> Result<(), ConnectorError> {
    let field = schema
        .field_with_name(column)
        .map_err(|_| ConnectorError::MissingColumn {
            path: origin.to_string(),
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
            path: origin.to_string(),
            column: column.to_string(),
            expected: expected.to_string(),
            found: field.data_type().to_string(),
        })
    }
}

/// Checks the report, index, group and event-time columns of `schema` against `layout`
/// (`origin` names the data in errors); returns whether it has the event-time column.
/// Parquet files and in-memory Arrow data (the Python package) are checked alike.
pub fn check_schema(
    origin: &str,
    schema: &Schema,
    layout: &ReportLayout,
) -> Result<bool, ConnectorError> {
    let expected = report_schema(&layout.mechanism);
    let d = layout.mechanism.domain();
    check_column(origin, schema, &layout.report, &expected.report_type, |t| {
        (expected.accepts_report)(t, d)
    })?;
    if let Some(index) = &layout.index {
        check_column(origin, schema, index, "UInt32", |t| *t == DataType::UInt32)?;
    }
    for g in &layout.group_by {
        check_column(origin, schema, g, "Utf8", is_string)?;
    }
    let has_ts = schema.field_with_name(&layout.ts).is_ok();
    if has_ts {
        check_column(
            origin,
            schema,
            &layout.ts,
            "Timestamp (ms, UTC) or Int64 milliseconds",
            is_event_time,
        )?;
    }
    Ok(has_ts)
}

/// Opens every file's footer and checks the report and group columns before any data is
/// read, so that a bad file fails the job in seconds rather than after an hour.
pub fn inspect(paths: &[PathBuf], layout: &ReportLayout) -> Result<Vec<InputFile>, ConnectorError> {
    paths
        .iter()
        .map(|path| {
            let builder = open(path)?;
            let has_ts = check_schema(&path.display().to_string(), builder.schema(), layout)?;
            check_chunks(path, builder.metadata())?;
            let row_group_rows = builder
                .metadata()
                .row_groups()
                .iter()
                .map(|rg| rg.num_rows().max(0) as u64)
                .collect();
            let metadata = ArrowReaderMetadata::try_new(
                builder.metadata().clone(),
                ArrowReaderOptions::default(),
            )
            .map_err(|source| ConnectorError::Parquet {
                path: path.display().to_string(),
                source,
            })?;
            Ok(InputFile {
                path: path.clone(),
                row_group_rows,
                has_ts,
                metadata,
            })
        })
        .collect()
}

/// Checks every column chunk's byte range against the file before anything reads it. The
/// parquet crate asserts these ranges (a panic: "column start and length should not be
/// negative", parquet 60.1 `file/metadata/mod.rs`), so a crafted footer would otherwise
/// take the process down instead of failing with the file's name. No report of this panic
/// was found in arrow-rs' issue tracker; the report, ready to file from a machine that
/// reaches GitHub, is docs/upstream/arrow-rs-parquet-panics.md. The check stays even once
/// upstream returns an error, since it also catches ranges past the end.
fn check_chunks(path: &Path, meta: &ParquetMetaData) -> Result<(), ConnectorError> {
    let file_len = std::fs::metadata(path)
        .map_err(|source| ConnectorError::Io {
            path: path.display().to_string(),
            source,
        })?
        .len();
    for (rg, group) in meta.row_groups().iter().enumerate() {
        if group.num_rows() < 0 {
            return Err(ConnectorError::Corrupt {
                path: path.display().to_string(),
                message: format!("row group {rg} claims {} rows", group.num_rows()),
            });
        }
        for chunk in group.columns() {
            let start = chunk
                .dictionary_page_offset()
                .unwrap_or_else(|| chunk.data_page_offset());
            let len = chunk.compressed_size();
            let fits = start >= 0
                && len >= 0
                && (start as u64)
                    .checked_add(len as u64)
                    .is_some_and(|end| end <= file_len);
            if !fits {
                return Err(ConnectorError::Corrupt {
                    path: path.display().to_string(),
                    message: format!(
                        "row group {rg}, column {:?}: bytes {start}..{start}+{len} are not \
                         inside the file ({file_len} bytes)",
                        chunk.column_path().string()
                    ),
                });
            }
        }
    }
    Ok(())
}
