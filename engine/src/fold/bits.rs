use arrow::array::{Array, FixedSizeBinaryArray};

use crate::sketch::{BitSketch, RejectReason};

/// Folds packed bit-flip reports (`FixedSizeBinary(⌈d/8⌉)`, LSB first) into per-bit counts
/// with a positional popcount: one histogram of byte values per byte position, turned into
/// bit counts once per batch. The inner loop is one table increment per byte.
pub fn fold_bits(array: &FixedSizeBinaryArray, sketch: &mut BitSketch) {
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
    let padding_mask: u8 = if d % 8 == 0 {
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
