use std::ops::Range;

use arrow_array::{Array, FixedSizeBinaryArray};

use crate::sketch::{BitSketch, RejectReason};

use super::popcount::{positional_counts_with, subtract_row, Kernel};

/// Folds packed bit-flip reports (`FixedSizeBinary(⌈d/8⌉)`, LSB first) into per-bit counts.
/// Padding bits (at or beyond d in the last byte) must be zero, else the report is rejected
/// as `padding_bits_set`; null reports are counted as `null`.
pub fn fold_bits(array: &FixedSizeBinaryArray, sketch: &mut BitSketch) {
    fold_bits_with(Kernel::detect(), array, sketch);
}

/// [`fold_bits`] with a chosen positional-popcount kernel.
///
/// The kernel counts every row of the batch, nulls and padding violations included, in
/// one pass over the contiguous value buffer; those rows are then taken out again one by
/// one. Rejected rows are rare, and the padding positions' own totals tell whether any
/// row sets a padding bit, so a clean batch never looks at a row twice.
pub fn fold_bits_with(kernel: Kernel, array: &FixedSizeBinaryArray, sketch: &mut BitSketch) {
    let d = sketch.bit_counts().len();
    let width = d.div_ceil(8);
    let nulls = array.null_count() as u64;
    if array.value_length() as usize != width {
        let valid = array.len() as u64 - nulls;
        sketch.rejected_mut().add(RejectReason::BadSize, valid);
        sketch.rejected_mut().add(RejectReason::Null, nulls);
        return;
    }
    // A sliced array's value buffer is sliced with it; anything else takes the old path.
    let Some(data) = array.value_data().get(..array.len() * width) else {
        fold_bits_scalar(array, sketch);
        return;
    };
    let mut totals = vec![0u64; width * 8];
    positional_counts_with(kernel, data, width, &mut totals);
    if let Some(valid) = array.nulls().filter(|n| n.null_count() > 0) {
        for i in (0..array.len()).filter(|&i| valid.is_null(i)) {
            subtract_row(&data[i * width..(i + 1) * width], &mut totals);
        }
    }
    let mut padding = 0u64;
    if totals[d..].iter().any(|&c| c != 0) {
        let mask = padding_mask(d);
        for (i, row) in data.chunks_exact(width).enumerate() {
            if row[width - 1] & mask != 0 && !array.is_null(i) {
                padding += 1;
                subtract_row(row, &mut totals);
            }
        }
    }
    let (bit_counts, n) = sketch.parts_mut();
    for (count, total) in bit_counts.iter_mut().zip(&totals) {
        *count += total;
    }
    *n += array.len() as u64 - nulls - padding;
    sketch
        .rejected_mut()
        .add(RejectReason::PaddingBitsSet, padding);
    sketch.rejected_mut().add(RejectReason::Null, nulls);
}

/// Folds the rows `rows` of `array` into `sketch` one report at a time, without
/// allocating: what a grouped fold runs on a group's few rows of a batch, where setting
/// up the vector kernel costs more than the rows. The result is [`fold_bits`]' on the
/// same rows.
pub fn fold_bits_rows(array: &FixedSizeBinaryArray, rows: Range<usize>, sketch: &mut BitSketch) {
    let d = sketch.bit_counts().len();
    let width = d.div_ceil(8);
    let nulls = array
        .nulls()
        .map_or(0, |n| rows.clone().filter(|&i| n.is_null(i)).count()) as u64;
    if array.value_length() as usize != width {
        let valid = rows.len() as u64 - nulls;
        sketch.rejected_mut().add(RejectReason::BadSize, valid);
        sketch.rejected_mut().add(RejectReason::Null, nulls);
        return;
    }
    let mask = padding_mask(d);
    let mut padding = 0u64;
    let mut folded = 0u64;
    let (bit_counts, n) = sketch.parts_mut();
    for i in rows {
        if array.is_null(i) {
            continue;
        }
        let row = array.value(i);
        if row[width - 1] & mask != 0 {
            padding += 1;
            continue;
        }
        // Bit j is bit j % 8 of byte j / 8: eight bytes read little-endian number their
        // bits as the report does.
        let mut words = row.chunks_exact(8);
        let mut base = 0;
        for word in &mut words {
            let mut x = u64::from_le_bytes([
                word[0], word[1], word[2], word[3], word[4], word[5], word[6], word[7],
            ]);
            while x != 0 {
                bit_counts[base + x.trailing_zeros() as usize] += 1;
                x &= x - 1;
            }
            base += 64;
        }
        for &byte in words.remainder() {
            let mut x = byte;
            while x != 0 {
                bit_counts[base + x.trailing_zeros() as usize] += 1;
                x &= x - 1;
            }
            base += 8;
        }
        folded += 1;
    }
    *n += folded;
    sketch
        .rejected_mut()
        .add(RejectReason::PaddingBitsSet, padding);
    sketch.rejected_mut().add(RejectReason::Null, nulls);
}

/// The bits of the last byte at or beyond d, which a report must leave zero.
fn padding_mask(d: usize) -> u8 {
    if d.is_multiple_of(8) {
        0
    } else {
        !((1u16 << (d % 8)) as u8 - 1)
    }
}

/// The scalar fold kept as the reference the vector kernels are tested against: one
/// histogram of byte values per byte position, turned into bit counts once per batch.
pub fn fold_bits_scalar(array: &FixedSizeBinaryArray, sketch: &mut BitSketch) {
    let d = sketch.bit_counts().len();
    let width = d.div_ceil(8);
    let nulls = array.null_count() as u64;
    if array.value_length() as usize != width {
        let valid = array.len() as u64 - nulls;
        sketch.rejected_mut().add(RejectReason::BadSize, valid);
        sketch.rejected_mut().add(RejectReason::Null, nulls);
        return;
    }
    // Bits at or beyond d in the last byte must be zero.
    let padding_mask: u8 = if d.is_multiple_of(8) {
        0
    } else {
        !((1u16 << (d % 8)) as u8 - 1)
    };
    let mut hist = vec![0u64; width * 256];
    let mut folded = 0u64;
    let mut padding = 0u64;
    let data = array.value_data();
    let contiguous = data.len() == array.len() * width;
    for i in 0..array.len() {
        if nulls > 0 && array.is_null(i) {
            continue;
        }
        let row = if contiguous {
            &data[i * width..(i + 1) * width]
        } else {
            array.value(i)
        };
        if row[width - 1] & padding_mask != 0 {
            padding += 1;
            continue;
        }
        for (position, &byte) in row.iter().enumerate() {
            hist[position * 256 + byte as usize] += 1;
        }
        folded += 1;
    }
    let (bit_counts, n) = sketch.parts_mut();
    for position in 0..width {
        let h = &hist[position * 256..(position + 1) * 256];
        for bit in 0..8 {
            let j = position * 8 + bit;
            if j >= d {
                break;
            }
            bit_counts[j] += h
                .iter()
                .enumerate()
                .filter(|(v, _)| v & (1 << bit) != 0)
                .map(|(_, c)| c)
                .sum::<u64>();
        }
    }
    *n += folded;
    sketch
        .rejected_mut()
        .add(RejectReason::PaddingBitsSet, padding);
    sketch.rejected_mut().add(RejectReason::Null, nulls);
}
