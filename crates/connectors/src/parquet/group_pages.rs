//! A string group column's chunk read straight from its pages, as one dictionary array for
//! the whole row group: the dictionary page's entries, then each value of a PLAIN data
//! page as an entry of its own, and every row's key. The fold interns each entry once
//! (`engine::stream::keys`), so a dictionary-encoded row costs a table lookup and a
//! plain-encoded one a single hash.
//!
//! Why not the Arrow reader asked for a dictionary ([`super::group_dictionary`]): a writer
//! falls back to PLAIN pages once a chunk's dictionary outgrows its page limit (pyarrow's
//! is 1 MiB: at 10⁵ Zipf segments, about a third of every row group's rows), and for those
//! pages the Arrow reader copies every value and builds a dictionary of each batch with
//! its own hash table, which the fold then interns again. A chunk with a page this
//! decoder does not read (another encoding, levels other than RLE) returns None and goes
//! to the Arrow reader, so this path only ever replaces work, never changes a value.

use std::fs::File;
use std::sync::Arc;

use arrow::array::{ArrayRef, DictionaryArray, Int32Array, StringArray};
use arrow::buffer::{NullBuffer, OffsetBuffer, ScalarBuffer};
use parquet::basic::{Encoding, Type as PhysicalType};
use parquet::column::page::Page;
use parquet::errors::ParquetError;
use parquet::file::properties::ReaderProperties;
use parquet::file::reader::RowGroupReader;
use parquet::file::serialized_reader::SerializedRowGroupReader;

use super::files::InputFile;
use super::page_error::PageError;
use super::rle_hybrid::{decode_hybrid, HybridError};
use crate::error::ConnectorError;

/// Row group `rg`'s column `column` as a `Dictionary(Int32, Utf8)` array of all its rows,
/// or None when the column is not a flat BYTE_ARRAY column or a page is not one this
/// decoder reads (the caller then reads it with the Arrow reader).
pub fn read_group_chunk(
    file: &InputFile,
    rg: usize,
    column: &str,
) -> Result<Option<ArrayRef>, ConnectorError> {
    let shown = || file.path.display().to_string();
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
    if descr.physical_type() != PhysicalType::BYTE_ARRAY
        || descr.max_rep_level() != 0
        || descr.max_def_level() > 1
    {
        return Ok(None);
    }
    let Some(rg_meta) = metadata.row_groups().get(rg) else {
        return Ok(None);
    };
    let opened = File::open(&file.path).map_err(|source| ConnectorError::Io {
        path: shown(),
        source,
    })?;
    let row_group = SerializedRowGroupReader::new(
        Arc::new(opened),
        rg_meta,
        metadata.page_index_for_row_group(rg),
        Arc::new(ReaderProperties::builder().build()),
    )
    .map_err(|e| chunk_err(PageError::Parquet(e)))?;
    let pages = row_group
        .get_column_page_reader(leaf)
        .map_err(|e| chunk_err(PageError::Parquet(e)))?;
    let expected_rows = rg_meta.num_rows().max(0) as u64;
    decode_chunk(pages, descr.max_def_level() == 1, expected_rows).map_err(chunk_err)
}

/// The entries and keys of one chunk as its pages are decoded.
#[derive(Default)]
struct Chunk {
    bytes: Vec<u8>,
    /// Entry i is `bytes[ends[i - 1]..ends[i]]` (0 for the first).
    ends: Vec<usize>,
    /// Entries that came from the dictionary page (the plain values follow them).
    dictionary_len: Option<usize>,
    keys: Vec<i32>,
    /// Each row's validity, kept only once a null has been met.
    valid: Option<Vec<bool>>,
}

impl Chunk {
    /// Appends `count` PLAIN byte arrays (a 4-byte length, then the bytes) from `data` as
    /// entries; returns the bytes read.
    fn push_plain(&mut self, data: &[u8], count: usize) -> Option<usize> {
        let mut at = 0usize;
        for _ in 0..count {
            let len = data.get(at..at + 4)?;
            let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
            let value = data.get(at + 4..(at + 4).checked_add(len)?)?;
            self.bytes.extend_from_slice(value);
            self.ends.push(self.bytes.len());
            at += 4 + len;
        }
        Some(at)
    }

    /// Adds `n` rows whose definition levels are `levels` (all defined when None), the
    /// defined ones taking `keys` in order.
    fn push_rows(&mut self, levels: Option<&[u32]>, keys: impl Iterator<Item = i32>) {
        let mut keys = keys;
        match levels {
            None => {
                let before = self.keys.len();
                self.keys.extend(keys);
                if let Some(valid) = &mut self.valid {
                    valid.resize(valid.len() + self.keys.len() - before, true);
                }
            }
            Some(levels) => {
                let rows_before = self.keys.len();
                let valid = self.valid.get_or_insert_with(|| vec![true; rows_before]);
                for &level in levels {
                    let defined = level == 1;
                    self.keys
                        .push(if defined { keys.next().unwrap_or(0) } else { 0 });
                    valid.push(defined);
                }
            }
        }
    }
}

/// Decodes one column chunk's pages (decompressed, in file order). `optional` says whether
/// the pages carry definition levels.
fn decode_chunk(
    pages: impl Iterator<Item = Result<Page, ParquetError>>,
    optional: bool,
    expected_rows: u64,
) -> Result<Option<ArrayRef>, PageError> {
    let mut chunk = Chunk {
        keys: Vec::with_capacity(expected_rows.min(1 << 24) as usize),
        ..Chunk::default()
    };
    let mut levels: Vec<u32> = Vec::new();
    let mut keys: Vec<u32> = Vec::new();
    let mut rows = 0u64;
    for (page, result) in pages.enumerate() {
        let truncated = |what| PageError::Truncated { page, what };
        let hybrid = |source| PageError::Hybrid { page, source };
        let page_data = result?;
        let (level_bytes, values, num_values, encoding): (&[u8], &[u8], u32, Encoding) =
            match &page_data {
                Page::DictionaryPage {
                    buf,
                    num_values,
                    encoding,
                    ..
                } => {
                    if chunk.dictionary_len.is_some()
                        || !chunk.ends.is_empty()
                        || !matches!(encoding, Encoding::PLAIN | Encoding::PLAIN_DICTIONARY)
                    {
                        return Ok(None);
                    }
                    chunk
                        .push_plain(buf, *num_values as usize)
                        .ok_or_else(|| truncated("dictionary page"))?;
                    chunk.dictionary_len = Some(chunk.ends.len());
                    continue;
                }
                Page::DataPage {
                    buf,
                    num_values,
                    encoding,
                    def_level_encoding,
                    ..
                } => {
                    if !optional {
                        (&[][..], &buf[..], *num_values, *encoding)
                    } else {
                        // Levels other than RLE (the deprecated BIT_PACKED) are left to
                        // the Arrow reader.
                        if *def_level_encoding != Encoding::RLE {
                            return Ok(None);
                        }
                        let prefix = buf
                            .get(..4)
                            .ok_or_else(|| truncated("definition level length"))?;
                        let len = u32::from_le_bytes([prefix[0], prefix[1], prefix[2], prefix[3]])
                            as usize;
                        let level_bytes = buf
                            .get(4..4usize.saturating_add(len))
                            .ok_or_else(|| truncated("definition levels"))?;
                        (level_bytes, &buf[4 + len..], *num_values, *encoding)
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
                    let rep = *rep_levels_byte_len as usize;
                    let end = rep.saturating_add(*def_levels_byte_len as usize);
                    let level_bytes = buf
                        .get(rep..end)
                        .ok_or_else(|| truncated("definition levels"))?;
                    (level_bytes, &buf[end..], *num_values, *encoding)
                }
            };
        let n = num_values as usize;
        let (page_levels, defined) = if optional {
            levels.clear();
            decode_hybrid(level_bytes, 1, n, &mut levels).map_err(hybrid)?;
            let defined = levels.iter().filter(|&&l| l == 1).count();
            (Some(&levels[..]), defined)
        } else {
            (None, n)
        };
        match encoding {
            Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY => {
                let Some(dictionary_len) = chunk.dictionary_len else {
                    return Err(PageError::NoDictionary { page });
                };
                keys.clear();
                // A page of nulls only may carry no key stream at all, not even its width.
                if defined > 0 {
                    let (&bit_width, data) =
                        values.split_first().ok_or_else(|| truncated("keys"))?;
                    decode_hybrid(data, bit_width, defined, &mut keys).map_err(hybrid)?;
                }
                let beyond = keys
                    .iter()
                    .filter(|&&k| k as usize >= dictionary_len)
                    .count();
                if beyond > 0 {
                    return Err(PageError::Keys(HybridError::KeyOutOfRange {
                        count: beyond as u64,
                        dictionary_len,
                    }));
                }
                chunk.push_rows(page_levels, keys.iter().map(|&k| k as i32));
            }
            Encoding::PLAIN => {
                let first = chunk.ends.len();
                chunk
                    .push_plain(values, defined)
                    .ok_or_else(|| truncated("values"))?;
                if chunk.ends.len() > i32::MAX as usize {
                    return Ok(None);
                }
                chunk.push_rows(page_levels, (first..first + defined).map(|k| k as i32));
            }
            _ => return Ok(None),
        }
        rows += u64::from(num_values);
    }
    if rows != expected_rows {
        return Err(PageError::RowCount {
            found: rows,
            expected: expected_rows,
        });
    }
    // Over 2 GiB of values do not fit a Utf8 array's offsets: the Arrow reader's batches
    // do.
    if chunk.bytes.len() > i32::MAX as usize {
        return Ok(None);
    }
    finish(chunk).map(Some)
}

/// The chunk as a dictionary array, its entries checked as UTF-8 (as the Arrow reader
/// checks a string column's values).
fn finish(chunk: Chunk) -> Result<ArrayRef, PageError> {
    let Chunk {
        bytes,
        ends,
        keys,
        valid,
        ..
    } = chunk;
    // Ends grow and stay below 2^31 (checked by the caller): valid offsets.
    let offsets: Vec<i32> = std::iter::once(0)
        .chain(ends.iter().map(|&e| e as i32))
        .collect();
    let offsets = OffsetBuffer::<i32>::new(ScalarBuffer::from(offsets));
    let values = StringArray::try_new(offsets, bytes.into(), None).map_err(PageError::Values)?;
    let nulls = valid.map(NullBuffer::from);
    let keys = Int32Array::try_new(ScalarBuffer::from(keys), nulls).map_err(PageError::Values)?;
    let array = DictionaryArray::try_new(keys, Arc::new(values)).map_err(PageError::Values)?;
    Ok(Arc::new(array))
}
