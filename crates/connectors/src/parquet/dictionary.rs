//! Counts a dictionary-encoded report column of a count-sketch mechanism straight from its
//! Parquet pages: the dictionary is decoded once per column chunk, and the keys are
//! counted without materializing values; the caller maps the key counts through the
//! dictionary into its sketch (`engine::fold::fold_key_counts`). This is the fast path
//! behind [`crate::ParallelFiles`]: what it hands out for such a row group instead of its
//! batches. Only the simplest layout takes this path (one global window, no groups, no
//! blocks); a chunk with any page that is not dictionary-encoded goes back to the Arrow
//! reader, so this path only ever replaces work, never changes a count.

use std::fs::File;
use std::sync::Arc;

use ldpstream_engine::mechanism::Mechanism;
use parquet::basic::{Encoding, Type as PhysicalType};
use parquet::column::page::Page;
use parquet::errors::ParquetError;
use parquet::file::properties::ReaderProperties;
use parquet::file::reader::RowGroupReader;
use parquet::file::serialized_reader::SerializedRowGroupReader;

use crate::error::ConnectorError;
use ldpstream_engine::stream::ReportLayout;

use super::files::InputFile;
use super::page_error::PageError;
use super::rle_hybrid::{count_defined, KeyCounter};

/// The report column of one row group, counted by dictionary key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyCounts {
    pub dictionary: Vec<u32>,
    /// Indexed by key, as long as `dictionary`.
    pub key_counts: Vec<u64>,
    pub nulls: u64,
    pub rows: u64,
}

/// Whether `layout` folds files without ts the way this module can: one count sketch per
/// row group, nothing grouped or windowed.
fn applies(file: &InputFile, layout: &ReportLayout) -> bool {
    matches!(
        layout.mechanism.channel(),
        Mechanism::Grr(_) | Mechanism::Channel(_) | Mechanism::Raw { .. }
    ) && layout.index.is_none()
        && layout.group_by.is_empty()
        && layout.block_sizes.is_empty()
        && !file.has_ts
}

/// Row group `rg`'s report column counted by dictionary key, or None when this path does
/// not apply (layout, column shape, or a page that is not dictionary-encoded) and the
/// caller must read the row group's batches instead.
pub fn count_report_keys(
    file: &InputFile,
    rg: usize,
    layout: &ReportLayout,
) -> Result<Option<KeyCounts>, ConnectorError> {
    if !applies(file, layout) {
        return Ok(None);
    }
    count_row_group(file, rg, &layout.report)
}

/// Counts the keys of `column` in row group `rg`, or None when the column is not a flat
/// INT32 column or not dictionary-encoded throughout the chunk.
pub fn count_row_group(
    file: &InputFile,
    rg: usize,
    column: &str,
) -> Result<Option<KeyCounts>, ConnectorError> {
    let shown = || file.path.display().to_string();
    let opened = File::open(&file.path).map_err(|source| ConnectorError::Io {
        path: shown(),
        source,
    })?;
    // The footer parsed by `inspect`, not a fresh parse per row group (see
    // `InputFile::metadata`).
    let metadata = file.metadata.metadata();
    let chunk_err = |source: PageError| ConnectorError::ColumnChunk {
        path: shown(),
        column: column.to_string(),
        row_group: rg,
        source: Box::new(source),
    };
    let schema = metadata.file_metadata().schema_descr();
    let Some(leaf) = (0..schema.num_columns()).find(|&i| {
        let c = schema.column(i);
        c.path().parts().len() == 1 && c.path().parts()[0] == column
    }) else {
        return Ok(None);
    };
    let descr = schema.column(leaf);
    if descr.physical_type() != PhysicalType::INT32
        || descr.max_rep_level() != 0
        || descr.max_def_level() > 1
    {
        return Ok(None);
    }
    let Some(rg_meta) = metadata.row_groups().get(rg) else {
        return Ok(None);
    };
    let row_group = SerializedRowGroupReader::new(
        Arc::new(opened),
        rg_meta,
        metadata.page_index_for_row_group(rg),
        Arc::new(ReaderProperties::builder().build()),
    )
    .map_err(|e| chunk_err(PageError::Parquet(e)))?;
    let chunk = rg_meta.column(leaf);
    // Skip reading a chunk whose metadata already says that it has no dictionary or that
    // a data page is not dictionary-encoded (the writer fell back to PLAIN). Without the
    // page encoding statistics the pages themselves decide.
    let all_dictionary = chunk.dictionary_page_offset().is_some()
        && chunk.page_encoding_stats_mask().is_none_or(|mask| {
            mask.is_only(Encoding::RLE_DICTIONARY) || mask.is_only(Encoding::PLAIN_DICTIONARY)
        });
    if !all_dictionary {
        return Ok(None);
    }
    let expected_rows = rg_meta.num_rows().max(0) as u64;
    let pages = row_group
        .get_column_page_reader(leaf)
        .map_err(|e| chunk_err(PageError::Parquet(e)))?;
    count_chunk(pages, descr.max_def_level() == 1, expected_rows).map_err(chunk_err)
}

fn is_dictionary(encoding: Encoding) -> bool {
    matches!(
        encoding,
        Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY
    )
}

/// Counts the keys of one column chunk's pages (decompressed, in file order). `optional`
/// says whether the pages carry definition levels. None when a page is not
/// dictionary-encoded or uses an encoding this decoder does not read.
pub fn count_chunk(
    pages: impl Iterator<Item = Result<Page, ParquetError>>,
    optional: bool,
    expected_rows: u64,
) -> Result<Option<KeyCounts>, PageError> {
    let mut dictionary: Option<Vec<u32>> = None;
    let mut counter: Option<KeyCounter> = None;
    let mut rows = 0u64;
    let mut nulls = 0u64;
    for (page, result) in pages.enumerate() {
        let truncated = |what| PageError::Truncated { page, what };
        let hybrid = |source| PageError::Hybrid { page, source };
        // (levels, values, level count) of a data page.
        let page_data = result?;
        let (levels, values, num_values): (&[u8], &[u8], u32) = match &page_data {
            Page::DictionaryPage {
                buf,
                num_values,
                encoding,
                ..
            } => {
                if dictionary.is_some()
                    || !matches!(encoding, Encoding::PLAIN | Encoding::PLAIN_DICTIONARY)
                {
                    return Ok(None);
                }
                let len = *num_values as usize;
                let bytes = buf
                    .get(..len.saturating_mul(4))
                    .ok_or_else(|| truncated("dictionary page"))?;
                let values: Vec<u32> = bytes
                    .chunks_exact(4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                counter = Some(KeyCounter::new(values.len()));
                dictionary = Some(values);
                continue;
            }
            Page::DataPage {
                buf,
                num_values,
                encoding,
                def_level_encoding,
                ..
            } => {
                if !is_dictionary(*encoding) {
                    return Ok(None);
                }
                if !optional {
                    (&[][..], &buf[..], *num_values)
                } else {
                    // Levels other than RLE (the deprecated BIT_PACKED) are left to the
                    // Arrow reader.
                    if *def_level_encoding != Encoding::RLE {
                        return Ok(None);
                    }
                    let prefix = buf
                        .get(..4)
                        .ok_or_else(|| truncated("definition level length"))?;
                    let len =
                        u32::from_le_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
                    let levels = buf
                        .get(4..4usize.saturating_add(len))
                        .ok_or_else(|| truncated("definition levels"))?;
                    (levels, &buf[4 + len..], *num_values)
                }
            }
            Page::DataPageV2 {
                buf,
                num_values,
                encoding,
                def_levels_byte_len,
                rep_levels_byte_len,
                ..
            } => {
                if !is_dictionary(*encoding) {
                    return Ok(None);
                }
                let rep = *rep_levels_byte_len as usize;
                let end = rep.saturating_add(*def_levels_byte_len as usize);
                let levels = buf
                    .get(rep..end)
                    .ok_or_else(|| truncated("definition levels"))?;
                (levels, &buf[end..], *num_values)
            }
        };
        let (Some(_), Some(counter)) = (&dictionary, counter.as_mut()) else {
            return Err(PageError::NoDictionary { page });
        };
        let n = num_values as usize;
        let defined = if optional {
            count_defined(levels, n).map_err(hybrid)? as usize
        } else {
            n
        };
        // A page of nulls only may carry no key stream at all, not even its bit width.
        if defined > 0 {
            let (&bit_width, keys) = values.split_first().ok_or_else(|| truncated("keys"))?;
            counter.count(keys, bit_width, defined).map_err(hybrid)?;
        }
        rows += u64::from(num_values);
        nulls += (n - defined) as u64;
    }
    if rows != expected_rows {
        return Err(PageError::RowCount {
            found: rows,
            expected: expected_rows,
        });
    }
    let (dictionary, key_counts) = match (dictionary, counter) {
        (Some(d), Some(c)) => (d, c.finish().map_err(PageError::Keys)?),
        _ => (Vec::new(), Vec::new()),
    };
    Ok(Some(KeyCounts {
        dictionary,
        key_counts,
        nulls,
        rows,
    }))
}
