//! The Parquet files of a bounded source: footers read and the report and group columns
//! checked before any data is read, so that a bad file fails a
//! job in seconds rather than after an hour.

use std::fs::File;
use std::path::{Path, PathBuf};

use ldpstream_engine::stream::ReportLayout;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::file::metadata::ParquetMetaData;

use super::group_dictionary::dictionary_group_schema;
use crate::error::ConnectorError;
use crate::schema_check::check_schema;

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
            // Every row-group task reads with these options: the group columns as
            // dictionaries (see `group_dictionary`).
            let options = match dictionary_group_schema(builder.schema(), layout) {
                Some(schema) => ArrowReaderOptions::new().with_schema(schema),
                None => ArrowReaderOptions::default(),
            };
            let metadata = ArrowReaderMetadata::try_new(builder.metadata().clone(), options)
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
