import { nextU64, WordSource } from "./source.js";

// Both samplers are ports of the Rust engine's, step for step, so that the same words give
// the same draw in every implementation (conformance/README.md).

const TWO32 = 1n << 32n;
const U32_MAX = TWO32 - 1n;
const MASK64 = (1n << 64n) - 1n;

/**
 * A uniform integer in [0, range), range in [1, 2^32): Canon's method, as rand 0.9's
 * `random_range` with its `unbiased` feature. It computes ⌊range·U⌋ for U = 0.w1 w2 … (32-bit
 * words) exactly, reading another word only while a carry from the later words is still
 * possible, so every value has probability exactly 1/range: no modulo bias and no floats.
 */
export function uniformBelow(source: WordSource, range: number): number {
  const r = BigInt(range);
  const threshold = (TWO32 - r) & U32_MAX; // range.wrapping_neg()
  const first = BigInt(source.nextU32()) * r;
  let result = first >> 32n;
  let lo = first & U32_MAX;
  while (lo > threshold) {
    const next = BigInt(source.nextU32()) * r;
    const sum = lo + (next >> 32n);
    if (sum < U32_MAX) break;
    if (sum > U32_MAX) {
      result += 1n;
      break;
    }
    lo = next & U32_MAX;
  }
  return Number(result);
}

const f64View = new DataView(new ArrayBuffer(8));

/**
 * A Bernoulli(p) draw exact for the double p (the Rust `bernoulli_exact`): U = 0.w1 w2 …
 * (64-bit words) is compared with p's binary expansion until they differ, so P(U < p) = p
 * however small p is (`Math.random() < p` never fires below 2^-53).
 */
export function bernoulliExact(source: WordSource, p: number): boolean {
  if (Number.isNaN(p) || p <= 0) return false;
  if (p >= 1) return true;
  f64View.setFloat64(0, p);
  const bits = f64View.getBigUint64(0);
  const exponent = Number((bits >> 52n) & 0x7ffn);
  const fraction = bits & ((1n << 52n) - 1n);
  // p = m·2^(−shift), m < 2^53 an integer.
  const m = exponent === 0 ? fraction : fraction | (1n << 52n);
  const shift = exponent === 0 ? 1074 : 1075 - exponent;
  for (let chunkEnd = 64; ; chunkEnd += 64) {
    // Bits (chunkEnd − 64, chunkEnd] of p's expansion: ⌊p·2^chunkEnd⌋ mod 2^64.
    const up = chunkEnd - shift;
    let chunk = 0n;
    if (up >= 64) chunk = 0n;
    else if (up >= 0) chunk = (m << BigInt(up)) & MASK64;
    else if (up > -64) chunk = m >> BigInt(-up);
    const word = nextU64(source);
    if (word !== chunk) return word < chunk;
    // Every later bit of p is 0: U ≥ p unless all of U's later bits are 0 too.
    if (up >= 64) return false;
  }
}

/** A double uniform on the 2^-53 grid in [0, 1), as rand's `random::<f64>()`. */
export function unitDouble(source: WordSource): number {
  return Number(nextU64(source) >> 11n) * 2 ** -53;
}
