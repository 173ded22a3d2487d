//! Parquet's RLE / bit-packed hybrid encoding (definition levels and dictionary keys),
//! decoded into counts instead of values: a repeated run adds its length to one counter in
//! O(1), and only bit-packed groups are unpacked.
//!
//! Hand-written because parquet 60 keeps its `RleDecoder` behind the unstable
//! `experimental` feature, and that decoder expands every run into values anyway.

use ldpstream_engine::kernels::count_categories;
use thiserror::Error;

/// Keys are unpacked into a scratch buffer and counted by the fold kernel once this many
/// have gathered: the size of the Arrow path's batches, so the kernel's per-call set-up
/// costs the same on both paths.
const SCRATCH_KEYS: usize = 64 * 1024;

/// A hybrid stream that cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HybridError {
    #[error("bit width {0} is larger than 32")]
    BitWidth(u8),
    #[error("run header is truncated or longer than 5 bytes")]
    Header,
    #[error("stream ends after {decoded} of {expected} values")]
    Truncated { decoded: usize, expected: usize },
    #[error("definition level {0} above the column's maximum of 1")]
    Level(u32),
    #[error("{count} dictionary keys are not below the dictionary size {dictionary_len}")]
    KeyOutOfRange { count: u64, dictionary_len: usize },
}

/// One run of the hybrid stream, cut to the values still wanted.
enum Run<'a> {
    Repeated {
        value: u32,
        len: usize,
    },
    /// `len` values bit-packed LSB first at the start of `bytes` (the last group may be
    /// cut short by the end of the stream).
    Packed {
        bytes: &'a [u8],
        len: usize,
    },
}

/// Walks the runs of a hybrid stream until `n` values have been seen. Trailing bytes and the
/// padding of the last bit-packed group are ignored, as Parquet readers do.
fn for_each_run<'a>(
    mut data: &'a [u8],
    bit_width: u8,
    n: usize,
    mut visit: impl FnMut(Run<'a>) -> Result<(), HybridError>,
) -> Result<(), HybridError> {
    if bit_width > 32 {
        return Err(HybridError::BitWidth(bit_width));
    }
    let width = usize::from(bit_width);
    let mut decoded = 0usize;
    while decoded < n {
        let truncated = HybridError::Truncated {
            decoded,
            expected: n,
        };
        if data.is_empty() {
            return Err(truncated);
        }
        let (header, used) = read_uleb32(data)?;
        data = &data[used..];
        let count = (header >> 1) as usize;
        let wanted = n - decoded;
        if header & 1 == 0 {
            let value_bytes = width.div_ceil(8);
            let Some(raw) = data.get(..value_bytes) else {
                return Err(truncated);
            };
            let mut le = [0u8; 4];
            le[..value_bytes].copy_from_slice(raw);
            data = &data[value_bytes..];
            let len = count.min(wanted);
            visit(Run::Repeated {
                value: u32::from_le_bytes(le),
                len,
            })?;
            decoded += len;
        } else {
            // `count` groups of 8 values, `width` bytes per group. A stream may end inside
            // its last run; what is there is decoded.
            let run_bytes = count.saturating_mul(width).min(data.len());
            // Width 0 packs any number of values into no bytes.
            let available = (run_bytes * 8)
                .checked_div(width)
                .unwrap_or(count.saturating_mul(8));
            let len = count.saturating_mul(8).min(available).min(wanted);
            if len == 0 && count > 0 {
                return Err(truncated);
            }
            visit(Run::Packed {
                bytes: &data[..run_bytes],
                len,
            })?;
            data = &data[run_bytes..];
            decoded += len;
        }
    }
    Ok(())
}

/// An unsigned LEB128 varint of at most 32 bits, and the bytes it took.
fn read_uleb32(data: &[u8]) -> Result<(u32, usize), HybridError> {
    let mut value = 0u64;
    for (i, &byte) in data.iter().take(5).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return u32::try_from(value)
                .map(|v| (v, i + 1))
                .map_err(|_| HybridError::Header);
        }
    }
    Err(HybridError::Header)
}

/// How many of the first `n` definition levels (bit width 1, the levels of an optional
/// top-level column) are 1, i.e. how many values are not null.
pub fn count_defined(data: &[u8], n: usize) -> Result<u64, HybridError> {
    let mut defined = 0u64;
    for_each_run(data, 1, n, |run| {
        match run {
            Run::Repeated { value: 0, .. } => {}
            Run::Repeated { value: 1, len } => defined += len as u64,
            Run::Repeated { value, .. } => return Err(HybridError::Level(value)),
            Run::Packed { bytes, len } => {
                let whole = len / 8;
                defined += bytes[..whole]
                    .iter()
                    .map(|b| u64::from(b.count_ones()))
                    .sum::<u64>();
                if len % 8 != 0 {
                    let mask = (1u8 << (len % 8)) - 1;
                    defined += u64::from((bytes[whole] & mask).count_ones());
                }
            }
        }
        Ok(())
    })?;
    Ok(defined)
}

/// Counts dictionary keys across the pages of one column chunk.
#[derive(Debug)]
pub struct KeyCounter {
    counts: Vec<u64>,
    scratch: Vec<u32>,
}

impl KeyCounter {
    pub fn new(dictionary_len: usize) -> Self {
        KeyCounter {
            counts: vec![0; dictionary_len],
            scratch: Vec::new(),
        }
    }

    /// Counts the first `n` keys of a hybrid stream of `bit_width`-bit keys.
    pub fn count(&mut self, data: &[u8], bit_width: u8, n: usize) -> Result<(), HybridError> {
        let KeyCounter { counts, scratch } = self;
        let dictionary_len = counts.len();
        for_each_run(data, bit_width, n, |run| {
            match run {
                Run::Repeated { value, len } => match counts.get_mut(value as usize) {
                    Some(c) => *c += len as u64,
                    None if len == 0 => {}
                    None => {
                        return Err(HybridError::KeyOutOfRange {
                            count: len as u64,
                            dictionary_len,
                        })
                    }
                },
                Run::Packed { bytes, len } => {
                    unpack(bytes, bit_width, len, scratch);
                    if scratch.len() >= SCRATCH_KEYS {
                        flush(scratch, counts)?;
                    }
                }
            }
            Ok(())
        })
    }

    /// The count of every key, indexed by key.
    pub fn finish(mut self) -> Result<Vec<u64>, HybridError> {
        flush(&mut self.scratch, &mut self.counts)?;
        Ok(self.counts)
    }
}

fn flush(scratch: &mut Vec<u32>, counts: &mut [u64]) -> Result<(), HybridError> {
    let out_of_range = count_categories(scratch, counts);
    scratch.clear();
    if out_of_range > 0 {
        return Err(HybridError::KeyOutOfRange {
            count: out_of_range,
            dictionary_len: counts.len(),
        });
    }
    Ok(())
}

/// Appends the first `len` values bit-packed in `bytes` to `out`.
fn unpack(bytes: &[u8], bit_width: u8, len: usize, out: &mut Vec<u32>) {
    macro_rules! widths {
        ($($w:literal)*) => {
            match bit_width {
                0 => out.resize(out.len() + len, 0),
                $($w => unpack_width::<$w>(bytes, len, out),)*
                // `for_each_run` rejects wider keys before any run is visited.
                _ => {}
            }
        };
    }
    widths!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32);
}

/// Bytes read per group of 8 values: the last value of a 32-bit group starts at byte 28
/// and is read as 8 bytes.
const WINDOW: usize = 40;

/// One width per instantiation, so that the shifts and masks of a group are constants.
fn unpack_width<const W: usize>(bytes: &[u8], len: usize, out: &mut Vec<u32>) {
    let mask = (1u64 << W) - 1;
    let start_len = out.len();
    let mut padded: [u8; WINDOW];
    for group in 0..len.div_ceil(8) {
        let start = group * W;
        // Full windows read straight from the page; only the last groups of a run are
        // copied into a zero-padded one.
        let window: &[u8; WINDOW] = match bytes
            .get(start..start + WINDOW)
            .and_then(|s| <&[u8; WINDOW]>::try_from(s).ok())
        {
            Some(w) => w,
            None => {
                let tail = bytes.get(start..).unwrap_or(&[]);
                let k = tail.len().min(WINDOW);
                padded = [0u8; WINDOW];
                padded[..k].copy_from_slice(&tail[..k]);
                &padded
            }
        };
        let mut values = [0u32; 8];
        for (i, v) in values.iter_mut().enumerate() {
            let bit = i * W;
            let at = bit / 8;
            let mut word = [0u8; 8];
            word.copy_from_slice(&window[at..at + 8]);
            *v = ((u64::from_le_bytes(word) >> (bit % 8)) & mask) as u32;
        }
        out.extend_from_slice(&values);
    }
    out.truncate(start_len + len);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packs `values` LSB first, `width` bits each, padded to whole groups of 8.
    fn pack(values: &[u32], width: usize) -> Vec<u8> {
        let groups = values.len().div_ceil(8);
        let mut out = vec![0u8; groups * width];
        for (i, &v) in values.iter().enumerate() {
            for b in 0..width {
                if v >> b & 1 == 1 {
                    let bit = i * width + b;
                    out[bit / 8] |= 1 << (bit % 8);
                }
            }
        }
        out
    }

    fn uleb(mut v: u32, out: &mut Vec<u8>) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    fn rle(value: u32, len: u32, width: usize, out: &mut Vec<u8>) {
        uleb(len << 1, out);
        out.extend_from_slice(&value.to_le_bytes()[..width.div_ceil(8)]);
    }

    fn packed(values: &[u32], width: usize, out: &mut Vec<u8>) {
        uleb(((values.len().div_ceil(8) as u32) << 1) | 1, out);
        out.extend(pack(values, width));
    }

    fn counts(
        data: &[u8],
        width: u8,
        n: usize,
        dictionary_len: usize,
    ) -> Result<Vec<u64>, HybridError> {
        let mut counter = KeyCounter::new(dictionary_len);
        counter.count(data, width, n)?;
        counter.finish()
    }

    #[test]
    fn every_width_round_trips() {
        for width in 0..=32usize {
            let max = if width == 0 { 0 } else { (1u64 << width) - 1 };
            let dictionary_len = 37usize;
            // 21 values: two full groups and a padded one.
            let values: Vec<u32> = (0..21u64)
                .map(|i| ((i * 7 + 3) % dictionary_len as u64).min(max) as u32)
                .collect();
            let mut data = Vec::new();
            rle(values[0].min(max as u32), 1000, width, &mut data);
            packed(&values, width, &mut data);
            let got = counts(&data, width as u8, 1000 + values.len(), dictionary_len);
            let mut expected = vec![0u64; dictionary_len];
            expected[values[0] as usize] += 1000;
            for &v in &values {
                expected[v as usize] += 1;
            }
            assert_eq!(got, Ok(expected), "width {width}");
        }
    }

    #[test]
    fn a_wide_key_reads_past_byte_boundaries() {
        let mut data = Vec::new();
        packed(&[u32::MAX, 0, u32::MAX - 1, 5, 6, 7, 8, 9], 32, &mut data);
        let mut scratch = Vec::new();
        unpack(&data[1..], 32, 8, &mut scratch);
        assert_eq!(scratch, vec![u32::MAX, 0, u32::MAX - 1, 5, 6, 7, 8, 9]);
    }

    #[test]
    fn padding_of_the_last_group_is_not_counted() {
        let mut data = Vec::new();
        // Three values, then five padding keys that are out of range.
        packed(&[1, 2, 1, 7, 7, 7, 7, 7], 3, &mut data);
        assert_eq!(counts(&data, 3, 3, 3), Ok(vec![0, 2, 1]));
    }

    #[test]
    fn a_stream_cut_inside_its_last_group_decodes_what_is_there() {
        let mut data = Vec::new();
        packed(&[1; 16], 8, &mut data);
        data.truncate(1 + 10);
        assert_eq!(counts(&data, 8, 10, 2), Ok(vec![0, 10]));
        assert_eq!(
            counts(&data, 8, 11, 2),
            Err(HybridError::Truncated {
                decoded: 10,
                expected: 11
            })
        );
    }

    #[test]
    fn bad_streams_are_errors() {
        assert_eq!(counts(&[2, 0], 33, 1, 2), Err(HybridError::BitWidth(33)));
        assert_eq!(counts(&[0x80, 0x80], 4, 1, 2), Err(HybridError::Header));
        assert_eq!(
            counts(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01], 4, 1, 2),
            Err(HybridError::Header)
        );
        assert_eq!(
            counts(&[], 4, 1, 2),
            Err(HybridError::Truncated {
                decoded: 0,
                expected: 1
            })
        );
        // An RLE run whose value byte is missing.
        assert_eq!(
            counts(&[8], 4, 1, 2),
            Err(HybridError::Truncated {
                decoded: 0,
                expected: 1
            })
        );
        let mut data = Vec::new();
        rle(5, 4, 4, &mut data);
        assert_eq!(
            counts(&data, 4, 4, 5),
            Err(HybridError::KeyOutOfRange {
                count: 4,
                dictionary_len: 5
            })
        );
        let mut data = Vec::new();
        packed(&[0, 9, 1, 9, 0, 0, 0, 0], 4, &mut data);
        assert_eq!(
            counts(&data, 4, 8, 5),
            Err(HybridError::KeyOutOfRange {
                count: 2,
                dictionary_len: 5
            })
        );
    }

    #[test]
    fn definition_levels_count_the_ones() {
        let levels = [1u32, 0, 1, 1, 0, 1, 1, 1, 0, 1, 1];
        let mut data = Vec::new();
        rle(1, 100, 1, &mut data);
        rle(0, 7, 1, &mut data);
        packed(&levels, 1, &mut data);
        let ones = levels.iter().filter(|&&l| l == 1).count() as u64;
        assert_eq!(count_defined(&data, 107 + levels.len()), Ok(100 + ones));
        // Cut inside the packed run: only the levels asked for count.
        assert_eq!(count_defined(&data, 107 + 4), Ok(100 + 3));
        let mut bad = Vec::new();
        rle(2, 3, 1, &mut bad);
        assert_eq!(count_defined(&bad, 3), Err(HybridError::Level(2)));
    }
}
