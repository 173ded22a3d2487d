//! AVX2 positional popcount: Harley–Seal carry-save adders on 256-bit vectors, five
//! bitwise operations per adder.

use std::arch::x86_64::{
    __m256i, _mm256_add_epi8, _mm256_and_si256, _mm256_loadu_si256, _mm256_or_si256,
    _mm256_set1_epi8, _mm256_setzero_si256, _mm256_srli_epi16, _mm256_storeu_si256,
    _mm256_xor_si256,
};

use super::{Layout, BLOCKS_PER_FLUSH};

const VECTOR: usize = 32;

/// The adder tree of one phase: the running digits of weight 1, 2, 4 and 8 of every lane
/// bit, and per bit `k` an 8-bit count, per lane, of carries of weight 16.
#[derive(Clone, Copy)]
struct Adders {
    ones: __m256i,
    twos: __m256i,
    fours: __m256i,
    eights: __m256i,
    sixteens: [__m256i; 8],
}

/// Counts the whole blocks at the start of `data` (rows of `width` bytes) into `totals`
/// and returns how many bytes that was; 0 on a CPU without AVX2.
pub fn positional_counts(data: &[u8], width: usize, totals: &mut [u64]) -> usize {
    if !std::arch::is_x86_feature_detected!("avx2") {
        return 0;
    }
    // SAFETY: the feature `count_blocks` enables was detected on this CPU just above.
    unsafe { count_blocks(data, width, totals) }
}

#[target_feature(enable = "avx2")]
unsafe fn count_blocks(data: &[u8], width: usize, totals: &mut [u64]) -> usize {
    let layout = Layout::new(width, VECTOR);
    let blocks = data.len() / layout.block;
    if blocks == 0 {
        return 0;
    }
    let zero = _mm256_setzero_si256();
    let empty = Adders {
        ones: zero,
        twos: zero,
        fours: zero,
        eights: zero,
        sixteens: [zero; 8],
    };
    let mut adders = vec![empty; layout.phases];
    let mut acc = vec![0u64; layout.phases * 8 * VECTOR];
    let chunk = layout.chunk_blocks();
    let (mut first, mut since_flush) = (0usize, 0usize);
    while first < blocks {
        let end = (first + chunk).min(blocks);
        if since_flush + (end - first) > BLOCKS_PER_FLUSH {
            flush(&mut adders, &mut acc);
            since_flush = 0;
        }
        for (q, phase) in adders.iter_mut().enumerate() {
            // A local copy lets the tree live in registers across the blocks of the chunk.
            let mut tree = *phase;
            for b in first..end {
                let start = b * layout.block + q * VECTOR;
                let mut v = [zero; 16];
                for (i, slot) in v.iter_mut().enumerate() {
                    // SAFETY: the load reads bytes [at, at + 32) with
                    // at = b·block + q·32 + i·period, q < phases, i ≤ 15, so
                    // at + 32 ≤ b·block + phases·32 + 15·period = (b + 1)·block, because
                    // phases·32 = period and block = 16·period; b < blocks and
                    // blocks·block ≤ data.len(). `loadu` has no alignment requirement.
                    *slot = unsafe {
                        _mm256_loadu_si256(data.as_ptr().add(start + i * layout.period).cast())
                    };
                }
                add16(&mut tree, &v);
            }
            *phase = tree;
        }
        since_flush += end - first;
        first = end;
    }
    flush(&mut adders, &mut acc);
    add_digits(&adders, &mut acc);
    layout.add_lanes(&acc, width, totals);
    blocks * layout.block
}

/// A carry-save adder: (carry, sum) of three bit vectors, each a majority / parity.
#[target_feature(enable = "avx2")]
#[inline]
fn csa(a: __m256i, b: __m256i, c: __m256i) -> (__m256i, __m256i) {
    let u = _mm256_xor_si256(a, b);
    (
        _mm256_or_si256(_mm256_and_si256(a, b), _mm256_and_si256(u, c)),
        _mm256_xor_si256(u, c),
    )
}

/// Adds sixteen vectors to the tree; the weight-16 carry goes into the 8-bit counters.
#[target_feature(enable = "avx2")]
#[inline]
fn add16(t: &mut Adders, v: &[__m256i; 16]) {
    let (twos_a, ones) = csa(t.ones, v[0], v[1]);
    let (twos_b, ones) = csa(ones, v[2], v[3]);
    let (fours_a, twos) = csa(t.twos, twos_a, twos_b);
    let (twos_a, ones) = csa(ones, v[4], v[5]);
    let (twos_b, ones) = csa(ones, v[6], v[7]);
    let (fours_b, twos) = csa(twos, twos_a, twos_b);
    let (eights_a, fours) = csa(t.fours, fours_a, fours_b);
    let (twos_a, ones) = csa(ones, v[8], v[9]);
    let (twos_b, ones) = csa(ones, v[10], v[11]);
    let (fours_a, twos) = csa(twos, twos_a, twos_b);
    let (twos_a, ones) = csa(ones, v[12], v[13]);
    let (twos_b, ones) = csa(ones, v[14], v[15]);
    let (fours_b, twos) = csa(twos, twos_a, twos_b);
    let (eights_b, fours) = csa(fours, fours_a, fours_b);
    let (sixteens, eights) = csa(t.eights, eights_a, eights_b);
    (t.ones, t.twos, t.fours, t.eights) = (ones, twos, fours, eights);
    let one = _mm256_set1_epi8(1);
    // Bit k of each byte, moved to bit 0 of that byte (the 16-bit shift brings the
    // neighbouring byte's bits into the top of the lane, which the mask drops).
    let s = &mut t.sixteens;
    s[0] = _mm256_add_epi8(s[0], _mm256_and_si256(sixteens, one));
    s[1] = _mm256_add_epi8(
        s[1],
        _mm256_and_si256(_mm256_srli_epi16::<1>(sixteens), one),
    );
    s[2] = _mm256_add_epi8(
        s[2],
        _mm256_and_si256(_mm256_srli_epi16::<2>(sixteens), one),
    );
    s[3] = _mm256_add_epi8(
        s[3],
        _mm256_and_si256(_mm256_srli_epi16::<3>(sixteens), one),
    );
    s[4] = _mm256_add_epi8(
        s[4],
        _mm256_and_si256(_mm256_srli_epi16::<4>(sixteens), one),
    );
    s[5] = _mm256_add_epi8(
        s[5],
        _mm256_and_si256(_mm256_srli_epi16::<5>(sixteens), one),
    );
    s[6] = _mm256_add_epi8(
        s[6],
        _mm256_and_si256(_mm256_srli_epi16::<6>(sixteens), one),
    );
    s[7] = _mm256_add_epi8(
        s[7],
        _mm256_and_si256(_mm256_srli_epi16::<7>(sixteens), one),
    );
}

fn to_bytes(v: __m256i) -> [u8; VECTOR] {
    let mut out = [0u8; VECTOR];
    // SAFETY: `out` is 32 writable bytes, the width of one unaligned store; this function
    // is only reached from `count_blocks`, which runs after AVX2 was detected.
    unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), v) };
    out
}

/// Moves the 8-bit weight-16 counters into the exact totals and zeroes them.
#[target_feature(enable = "avx2")]
fn flush(adders: &mut [Adders], acc: &mut [u64]) {
    for (q, t) in adders.iter_mut().enumerate() {
        for (k, counter) in t.sixteens.iter_mut().enumerate() {
            let lanes = &mut acc[(q * 8 + k) * VECTOR..(q * 8 + k + 1) * VECTOR];
            for (total, c) in lanes.iter_mut().zip(to_bytes(*counter)) {
                *total += 16 * u64::from(c);
            }
            *counter = _mm256_setzero_si256();
        }
    }
}

/// Adds the digits left in the trees (weights 1, 2, 4, 8) to the totals.
#[target_feature(enable = "avx2")]
fn add_digits(adders: &[Adders], acc: &mut [u64]) {
    for (q, t) in adders.iter().enumerate() {
        let digits = [t.ones, t.twos, t.fours, t.eights].map(to_bytes);
        for k in 0..8 {
            let lanes = &mut acc[(q * 8 + k) * VECTOR..(q * 8 + k + 1) * VECTOR];
            for (lane, total) in lanes.iter_mut().enumerate() {
                for (weight, d) in digits.iter().enumerate() {
                    *total += u64::from((d[lane] >> k) & 1) << weight;
                }
            }
        }
    }
}
