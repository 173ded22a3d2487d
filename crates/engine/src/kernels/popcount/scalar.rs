//! Portable positional popcount: the fallback on CPUs without AVX2, the tail of the SIMD
//! kernels, and (through `fold_bits_scalar`) the reference the SIMD kernels are tested
//! against.

/// Below this many rows a per-position byte histogram costs more to reduce than it saves.
const HISTOGRAM_FROM_ROWS: usize = 1024;
/// Above this width the histograms (`width × 256` counters) no longer fit in cache.
const HISTOGRAM_MAX_WIDTH: usize = 64;

/// Adds to `totals[8p + k]` the number of rows of `data` (rows of `width` bytes) whose byte
/// `p` has bit `k` set. `data.len()` is a multiple of `width`; `totals.len() == 8 × width`.
pub fn positional_counts(data: &[u8], width: usize, totals: &mut [u64]) {
    debug_assert_eq!(totals.len(), width * 8);
    if width == 0 {
        return;
    }
    let rows = data.len() / width;
    if rows >= HISTOGRAM_FROM_ROWS && width <= HISTOGRAM_MAX_WIDTH {
        histogram_counts(data, width, totals);
    } else {
        bitwise_counts(data, width, totals);
    }
}

/// One table increment per byte, then bit counts once per call.
fn histogram_counts(data: &[u8], width: usize, totals: &mut [u64]) {
    let mut hist = vec![0u64; width * 256];
    for row in data.chunks_exact(width) {
        for (position, &byte) in row.iter().enumerate() {
            hist[position * 256 + byte as usize] += 1;
        }
    }
    for (position, h) in hist.chunks_exact(256).enumerate() {
        for (value, &count) in h.iter().enumerate() {
            if count == 0 {
                continue;
            }
            for bit in 0..8 {
                if value & (1 << bit) != 0 {
                    totals[position * 8 + bit] += count;
                }
            }
        }
    }
}

/// Eight branch-free additions per byte.
fn bitwise_counts(data: &[u8], width: usize, totals: &mut [u64]) {
    for row in data.chunks_exact(width) {
        for (byte, counts) in row.iter().zip(totals.chunks_exact_mut(8)) {
            for (bit, c) in counts.iter_mut().enumerate() {
                *c += u64::from((byte >> bit) & 1);
            }
        }
    }
}

/// Removes one row's bits from `totals` (the row was counted and must not be).
pub fn subtract_row(row: &[u8], totals: &mut [u64]) {
    for (position, &byte) in row.iter().enumerate() {
        let mut rest = byte;
        while rest != 0 {
            let bit = rest.trailing_zeros() as usize;
            totals[position * 8 + bit] -= 1;
            rest &= rest - 1;
        }
    }
}
