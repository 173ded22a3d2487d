import { WordSource } from "./source.js";

// Uniform integers in [0, range) for 64- and 128-bit ranges, as the engine's discrete noise
// draws them: rand 0.9's `random_range(0..range)` on u64 and u128 with its `unbiased`
// feature (`UniformInt::sample_single_inclusive`, Canon's method), so that the same words
// give the same integer (conformance/README.md). A u64 sample is two 32-bit words, low half
// first; a u128 sample is two u64 samples, low one first (rand's `StandardUniform` for u128).

export const SMALL_RANGE = 2 ** 37; // 16-bit limb × range stays below 2^53: exact in a double
const TWO16 = 65536;
const scratch = new Uint32Array(4);

function sampleWord(source: WordSource, bits: 64 | 128): bigint {
  let w = 0n;
  for (let i = 0; i < bits / 32; i++) w |= BigInt(source.nextU32()) << BigInt(32 * i);
  return w;
}

/**
 * Canon's loop, word for word as rand's: `(result, lo) = w·range` (high and low halves of
 * the 2·bits product); while `lo > range.wrapping_neg()`, take the next sample's high half:
 * below MAX stop, past MAX (overflow) add 1 and stop, exactly MAX continue with its low half.
 */
function canon(source: WordSource, first: bigint, range: bigint, bits: 64 | 128): bigint {
  const shift = BigInt(bits);
  const max = (1n << shift) - 1n;
  const threshold = ((1n << shift) - range) & max;
  const product = first * range;
  let result = product >> shift;
  let lo = product & max;
  while (lo > threshold) {
    const next = sampleWord(source, bits) * range;
    const sum = lo + (next >> shift);
    if (sum < max) break;
    if (sum > max) {
      result += 1n;
      break;
    }
    lo = next & max;
  }
  return result;
}

/**
 * The common case without big integers: for range < 2^37 the product's low half can only
 * exceed 2^bits − range if all its bits from 48 up are ones; otherwise the first sample's
 * high half is the answer. In the rare other case the exact loop takes over, with the same
 * first sample, so the words read are the same either way.
 */
export function smallRange(source: WordSource, range: number, bits: 64 | 128): number {
  const words = bits / 32;
  let carry = 0;
  let topOnes = true;
  for (let i = 0; i < words; i++) {
    const w = source.nextU32();
    scratch[i] = w;
    // The product w·range, 16-bit limb by limb: each partial product is below 2^53.
    let p = (w % TWO16) * range + carry;
    carry = Math.floor(p / TWO16);
    if (2 * i >= 3 && p % TWO16 !== TWO16 - 1) topOnes = false;
    p = Math.floor(w / TWO16) * range + carry;
    carry = Math.floor(p / TWO16);
    // Limbs 3 and up (bits 48 and above) must all be ones for a carry to be possible.
    if (2 * i + 1 >= 3 && p % TWO16 !== TWO16 - 1) topOnes = false;
  }
  if (!topOnes) return carry;
  let first = 0n;
  for (let i = 0; i < words; i++) first |= BigInt(scratch[i]) << BigInt(32 * i);
  return Number(canon(source, first, BigInt(range), bits));
}

/** A uniform integer in [0, range) as rand 0.9's `random_range` on u64 (1 ≤ range < 2^64). */
export function rangeU64(source: WordSource, range: bigint): bigint {
  if (range < SMALL_RANGE) return BigInt(smallRange(source, Number(range), 64));
  return canon(source, sampleWord(source, 64), range, 64);
}

/** A uniform integer in [0, range) as rand 0.9's `random_range` on u128 (1 ≤ range < 2^128). */
export function rangeU128(source: WordSource, range: bigint): bigint {
  if (range < SMALL_RANGE) return BigInt(smallRange(source, Number(range), 128));
  return canon(source, sampleWord(source, 128), range, 128);
}

/** The exact loop alone, for the tests that check the fast path against it. */
export function rangeExact(source: WordSource, range: bigint, bits: 64 | 128): bigint {
  return canon(source, sampleWord(source, bits), range, bits);
}
