//! Positional popcount over packed fixed-width rows: for every byte position `p` of a row
//! and bit `k`, how many rows have bit `8p + k` set. This is the inner loop of the
//! bit-flip fold (and of any unary-encoding fold).
//!
//! Three kernels, chosen once per call by runtime CPU detection:
//! - `avx512`: carry-save adders on 512-bit vectors (AVX-512F + BW);
//! - `avx2`: the same on 256-bit vectors;
//! - `scalar`: the portable fallback, which also counts what the vector kernels leave
//!   over at the end of the input.
//!
//! The vector kernels follow Klarqvist, Muła & Lemire, "Efficient computation of
//! positional population counts using SIMD instructions" (2019): sixteen vectors that
//! hold the same positions in the same lanes go through a Harley–Seal carry-save-adder
//! tree, and only its weight-16 output is spread into per-lane, per-bit 8-bit counters,
//! which are flushed into exact `u64` totals before they can overflow.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod scalar;

pub use scalar::subtract_row;

/// Which implementation counts the bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    Scalar,
    Avx2,
    Avx512,
}

impl Kernel {
    /// The fastest kernel this CPU runs.
    pub fn detect() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
            {
                return Kernel::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                return Kernel::Avx2;
            }
        }
        Kernel::Scalar
    }

    /// Every kernel this CPU runs, slowest first (for equivalence tests and benchmarks).
    pub fn available() -> Vec<Kernel> {
        let best = Kernel::detect();
        [Kernel::Scalar, Kernel::Avx2, Kernel::Avx512]
            .into_iter()
            .filter(|k| *k as u8 <= best as u8)
            .collect()
    }
}

/// How the vector kernels walk the input. A vector of `vector` bytes holds the same row
/// positions in the same lanes every `period` bytes (the least common multiple of the row
/// width and the vector width), so the input is cut into `phases = period / vector`
/// interleaved streams, each with its own adder tree. A block is sixteen periods: sixteen
/// vectors for each phase.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    pub vector: usize,
    pub period: usize,
    pub phases: usize,
    pub block: usize,
}

/// Input bytes one traversal of a chunk of blocks keeps in L2, so that the phases of a
/// wide row each re-read the chunk from cache rather than from memory.
const CHUNK_BYTES: usize = 256 * 1024;
/// Each block adds at most 1 to an 8-bit counter, so counters are flushed every 255 blocks.
pub(crate) const BLOCKS_PER_FLUSH: usize = 255;

impl Layout {
    pub(crate) fn new(width: usize, vector: usize) -> Layout {
        let period = width / gcd(width, vector) * vector;
        Layout {
            vector,
            period,
            phases: period / vector,
            block: 16 * period,
        }
    }

    /// Blocks walked per traversal: at least one, at most one flush interval.
    pub(crate) fn chunk_blocks(&self) -> usize {
        (CHUNK_BYTES / self.block).clamp(1, BLOCKS_PER_FLUSH)
    }

    /// Adds the per-lane totals `acc[(q × 8 + k) × vector + lane]` of the vector kernels to
    /// the per-position totals: lane `lane` of phase `q` is byte `(q × vector + lane) mod
    /// width` of a row. The byte is tracked as the offset advances rather than computed
    /// with a division per lane, which on a small batch cost more than the counting.
    pub(crate) fn add_lanes(&self, acc: &[u64], width: usize, totals: &mut [u64]) {
        let mut position = 0usize;
        for q in 0..self.phases {
            let phase = &acc[q * 8 * self.vector..(q + 1) * 8 * self.vector];
            for lane in 0..self.vector {
                let bits = &mut totals[position * 8..position * 8 + 8];
                for (k, total) in bits.iter_mut().enumerate() {
                    *total += phase[k * self.vector + lane];
                }
                position += 1;
                if position == width {
                    position = 0;
                }
            }
        }
    }
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Adds to `totals[8p + k]` the number of rows of `data` whose byte `p` has bit `k` set,
/// with the fastest kernel this CPU runs. Rows are `width` bytes; a trailing partial row is
/// ignored. `totals.len()` must be `8 × width`.
pub fn positional_counts(data: &[u8], width: usize, totals: &mut [u64]) {
    positional_counts_with(Kernel::detect(), data, width, totals);
}

/// [`positional_counts`] with a chosen kernel; a kernel this CPU lacks runs as the scalar
/// one, so the call is always sound.
pub fn positional_counts_with(kernel: Kernel, data: &[u8], width: usize, totals: &mut [u64]) {
    assert_eq!(totals.len(), width * 8, "one total per bit of a row");
    if width == 0 {
        return;
    }
    let data = &data[..data.len() / width * width];
    let done = match kernel {
        Kernel::Scalar => 0,
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2 => avx2::positional_counts(data, width, totals),
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx512 => avx512::positional_counts(data, width, totals),
        #[cfg(not(target_arch = "x86_64"))]
        _ => 0,
    };
    // `done` is a whole number of blocks, hence of periods, hence of rows.
    scalar::positional_counts(&data[done..], width, totals);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_periods() {
        let l = Layout::new(8, 64);
        assert_eq!((l.period, l.phases, l.block), (64, 1, 1024));
        let l = Layout::new(3, 32);
        assert_eq!((l.period, l.phases), (96, 3));
        let l = Layout::new(8192, 64);
        assert_eq!((l.period, l.phases), (8192, 128));
    }

    #[test]
    fn every_kernel_counts_like_the_scalar_one() {
        for width in [1usize, 2, 3, 8, 13, 32, 33, 100] {
            let rows = 16 * 64 * 3 + 17;
            let data: Vec<u8> = (0..rows * width)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as u8)
                .collect();
            let mut expected = vec![0u64; width * 8];
            scalar::positional_counts(&data, width, &mut expected);
            for kernel in Kernel::available() {
                for start in [0usize, 1] {
                    let mut totals = vec![0u64; width * 8];
                    positional_counts_with(kernel, &data[start * width..], width, &mut totals);
                    let mut skipped = vec![0u64; width * 8];
                    scalar::positional_counts(&data[..start * width], width, &mut skipped);
                    let sum: Vec<u64> = totals.iter().zip(&skipped).map(|(a, b)| a + b).collect();
                    assert_eq!(sum, expected, "{kernel:?}, width {width}, start {start}");
                }
            }
        }
    }
}
