//! The vector fold kernels against the scalar kernels they replace: the same counts and
//! rejections, bit for bit, on random batches with nulls, bad reports and unaligned starts.

use crate::kernels::popcount::{positional_counts_with, Kernel};
use crate::kernels::{
    fold_bits_rows, fold_bits_scalar, fold_bits_with, fold_pool, fold_pool_direct, fold_signed,
    fold_signed_scalar,
};
use crate::sketch::{BitSketch, PoolSketch, RejectReason, SignedSketch};
use arrow_array::{Array, FixedSizeBinaryArray, Int8Array, UInt32Array};
use arrow_buffer::NullBuffer;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A batch of `len` packed reports of `d` bits, sliced at `offset` rows into a larger
/// array so that its values start at an arbitrary (unaligned) byte.
fn bit_batch(
    d: usize,
    len: usize,
    offset: usize,
    null_rate: f64,
    padding_rate: f64,
    seed: u64,
) -> FixedSizeBinaryArray {
    let width = d.div_ceil(8);
    let mut rng = StdRng::seed_from_u64(seed);
    let total = offset + len;
    let mut bytes: Vec<u8> = (0..total * width).map(|_| rng.random()).collect();
    let keep: u8 = if d.is_multiple_of(8) {
        0xFF
    } else {
        (1u16 << (d % 8)) as u8 - 1
    };
    for row in bytes.chunks_exact_mut(width) {
        if !rng.random_bool(padding_rate) {
            row[width - 1] &= keep;
        }
    }
    let nulls = (null_rate > 0.0).then(|| {
        NullBuffer::from(
            (0..total)
                .map(|_| !rng.random_bool(null_rate))
                .collect::<Vec<_>>(),
        )
    });
    FixedSizeBinaryArray::try_new(width as i32, bytes.into(), nulls)
        .expect("valid reports")
        .slice(offset, len)
}

fn assert_bits_match(array: &FixedSizeBinaryArray, d: usize) -> Result<(), TestCaseError> {
    let mut expected = BitSketch::new(d);
    fold_bits_scalar(array, &mut expected);
    prop_assert_eq!(
        expected.n() + expected.rejected().total(),
        array.len() as u64
    );
    // The row-at-a-time fold of a grouped fold's small runs, over the whole batch and
    // over two parts of it.
    let mut rows = BitSketch::new(d);
    fold_bits_rows(array, 0..array.len(), &mut rows);
    prop_assert_eq!(&rows, &expected, "fold_bits_rows, d = {}", d);
    let cut = array.len() / 3;
    let mut parts = BitSketch::new(d);
    fold_bits_rows(array, 0..cut, &mut parts);
    fold_bits_rows(array, cut..array.len(), &mut parts);
    prop_assert_eq!(&parts, &expected, "fold_bits_rows in parts, d = {}", d);
    for kernel in Kernel::available() {
        let mut got = BitSketch::new(d);
        fold_bits_with(kernel, array, &mut got);
        prop_assert_eq!(
            &got,
            &expected,
            "{:?}, d = {}, len = {}",
            kernel,
            d,
            array.len()
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Random batch lengths 0..4096, every d up to 256, unaligned starts, nulls and
    /// padding violations.
    #[test]
    fn bit_kernels_match_the_scalar_fold(
        d in 1usize..=256,
        len in 0usize..4096,
        offset in 0usize..70,
        null_rate in prop_oneof![Just(0.0), Just(0.01), Just(0.5)],
        padding_rate in prop_oneof![Just(0.0), Just(0.001), Just(0.3)],
        seed in any::<u64>(),
    ) {
        assert_bits_match(&bit_batch(d, len, offset, null_rate, padding_rate, seed), d)?;
    }
}

/// Every d in 1..=256 at lengths either side of the vector kernels' block boundaries
/// (sixteen periods of lcm(width, vector) bytes), where the scalar tail takes over.
#[test]
fn bit_kernels_match_at_every_width_and_block_boundary() {
    for d in 1usize..=256 {
        let width = d.div_ceil(8);
        let mut lengths = vec![0usize, 1, 2, 7];
        for vector in [32usize, 64] {
            let period = width / gcd(width, vector) * vector;
            let block_rows = 16 * period / width;
            if block_rows <= 4096 {
                lengths.extend([block_rows - 1, block_rows, block_rows + 1]);
            }
        }
        for (i, &len) in lengths.iter().enumerate() {
            let array = bit_batch(d, len, i % 5, 0.02, 0.01, (d * 31 + i) as u64);
            assert_bits_match(&array, d).expect("kernels agree");
        }
    }
}

/// Every batch length 0..4096 for the positional popcount itself, at a width that is a
/// power of two and one that is not.
#[test]
fn positional_counts_match_at_every_length() {
    for width in [8usize, 3] {
        let mut rng = StdRng::seed_from_u64(width as u64);
        let data: Vec<u8> = (0..4096 * width + 1).map(|_| rng.random()).collect();
        for len in 0..4096 {
            // Start one byte in, so no kernel sees an aligned buffer.
            let rows = &data[1..1 + len * width];
            let mut expected = vec![0u64; width * 8];
            positional_counts_with(Kernel::Scalar, rows, width, &mut expected);
            for kernel in Kernel::available() {
                let mut got = vec![0u64; width * 8];
                positional_counts_with(kernel, rows, width, &mut got);
                assert_eq!(got, expected, "{kernel:?}, width {width}, len {len}");
            }
        }
    }
}

/// Counters stay exact past the point where the vector kernels' 8-bit counters wrap.
#[test]
fn positional_counts_are_exact_on_long_inputs() {
    let width = 8;
    let rows = 255 * 16 * 8 * 3 + 5;
    let data = vec![0xFFu8; rows * width];
    for kernel in Kernel::available() {
        let mut got = vec![0u64; width * 8];
        positional_counts_with(kernel, &data, width, &mut got);
        assert!(got.iter().all(|&c| c == rows as u64), "{kernel:?}");
    }
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// A validity buffer with each entry null at `rate`, or none when `rate` is 0.
fn random_nulls(rng: &mut StdRng, total: usize, rate: f64) -> Option<NullBuffer> {
    (rate > 0.0).then(|| {
        NullBuffer::from(
            (0..total)
                .map(|_| !rng.random_bool(rate))
                .collect::<Vec<_>>(),
        )
    })
}

/// A batch of (index, sign) pairs: indices up to a bit beyond `rows`, signs mostly ±1.
fn signed_batch(
    rows: u32,
    len: usize,
    offset: usize,
    null_rate: f64,
    seed: u64,
) -> (UInt32Array, Int8Array) {
    let mut rng = StdRng::seed_from_u64(seed);
    let total = offset + len;
    let index: Vec<u32> = (0..total)
        .map(|_| rng.random_range(0..rows + rows / 50 + 1))
        .collect();
    let signs: Vec<i8> = (0..total)
        .map(|_| match rng.random_range(0..100) {
            0 => 0,
            1 => 7,
            2 => -128,
            x if x % 2 == 0 => 1,
            _ => -1,
        })
        .collect();
    let (index_nulls, sign_nulls) = (
        random_nulls(&mut rng, total, null_rate),
        random_nulls(&mut rng, total, null_rate),
    );
    (
        UInt32Array::new(index.into(), index_nulls).slice(offset, len),
        Int8Array::new(signs.into(), sign_nulls).slice(offset, len),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The laned Hadamard / cohort fold against the scalar one.
    #[test]
    fn signed_kernel_matches_the_scalar_fold(
        rows in prop_oneof![1u32..64, Just(1024u32), Just(2048u32), Just(5000u32)],
        len in 0usize..9000,
        offset in 0usize..9,
        null_rate in prop_oneof![Just(0.0), Just(0.05)],
        seed in any::<u64>(),
    ) {
        let (index, signs) = signed_batch(rows, len, offset, null_rate, seed);
        for reason in [RejectReason::RowOutOfRange, RejectReason::CohortOutOfRange] {
            let mut expected = SignedSketch::new(rows as usize);
            fold_signed_scalar(&index, &signs, &mut expected, reason);
            let mut got = SignedSketch::new(rows as usize);
            fold_signed(&index, &signs, &mut got, reason);
            prop_assert_eq!(&got, &expected);
            prop_assert_eq!(got.n() + got.rejected().total(), len as u64);
        }
    }
}

/// OLH (seed index, bucket) columns: indices up to a bit beyond `rows`, buckets up to a bit
/// beyond `g`, and now and then any u32.
fn pool_batch(
    (rows, g): (u32, u32),
    len: usize,
    offset: usize,
    null_rate: f64,
    seed: u64,
) -> (UInt32Array, UInt32Array) {
    let mut rng = StdRng::seed_from_u64(seed);
    let total = offset + len;
    let mut column = |bound: u32| -> Vec<u32> {
        (0..total)
            .map(|_| match rng.random_range(0..100) {
                0 => rng.random(),
                _ => rng.random_range(0..bound + bound / 20 + 1),
            })
            .collect()
    };
    let (index, buckets) = (column(rows), column(g));
    let (index_nulls, bucket_nulls) = (
        random_nulls(&mut rng, total, null_rate),
        random_nulls(&mut rng, total, null_rate),
    );
    (
        UInt32Array::new(index.into(), index_nulls).slice(offset, len),
        UInt32Array::new(buckets.into(), bucket_nulls).slice(offset, len),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// OLH's vector fold (slots and counts a block at a time, through a 32-bit copy)
    /// against the direct scalar one, from unaligned starts.
    #[test]
    fn pool_kernel_matches_the_scalar_fold(
        shape in prop_oneof![(1u32..64, 2u32..40), Just((1024u32, 8u32)), Just((300u32, 17u32))],
        len in 0usize..9000,
        offset in 0usize..9,
        null_rate in prop_oneof![Just(0.0), Just(0.05)],
        seed in any::<u64>(),
    ) {
        let (index, buckets) = pool_batch(shape, len, offset, null_rate, seed);
        let (rows, g) = (shape.0 as usize, shape.1 as usize);
        let mut expected = PoolSketch::new(rows, g);
        fold_pool_direct(&index, &buckets, &mut expected);
        let mut got = PoolSketch::new(rows, g);
        fold_pool(&index, &buckets, &mut got);
        prop_assert_eq!(&got, &expected);
        prop_assert_eq!(got.n() + got.rejected().total(), len as u64);
    }
}
