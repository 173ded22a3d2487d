import { nextU64, WordSource } from "./source.js";

// Both samplers are ports of the Rust engine's, step for step, so that the same words give
// the same draw in every implementation (conformance/README.md).

const TWO32 = 2 ** 32;
const MASK64 = (1n << 64n) - 1n;

/** The 64-bit product w·n of two 32-bit integers as [high, low] 32-bit halves, exactly. */
export function wideMul(w: number, n: number): [number, number] {
  const a = Math.floor(w / 65536) * n; // < 2^48
  const b = (w % 65536) * n; // < 2^48
  const low = (a % 65536) * 65536 + b; // < 2^49: exact
  return [Math.floor(a / 65536) + Math.floor(low / TWO32), low % TWO32];
}

/**
 * A uniform integer in [0, range), range in [1, 2^32): Canon's method, as rand 0.9's
 * `random_range` with its `unbiased` feature. It computes ⌊range·U⌋ for U = 0.w1 w2 … (32-bit
 * words) exactly, reading another word only while a carry from the later words is still
 * possible, so every value has probability exactly 1/range: no modulo bias and no floats.
 */
export function uniformBelow(source: WordSource, range: number): number {
  const threshold = (TWO32 - range) % TWO32; // range.wrapping_neg()
  let [result, lo] = wideMul(source.nextU32(), range);
  while (lo > threshold) {
    const [nextHi, nextLo] = wideMul(source.nextU32(), range);
    const sum = lo + nextHi;
    if (sum < TWO32 - 1) break;
    if (sum > TWO32 - 1) {
      result += 1;
      break;
    }
    lo = nextLo;
  }
  return result;
}

const f64View = new DataView(new ArrayBuffer(8));

/** p's binary expansion, 64 bits at a time: chunk k is ⌊p·2^(64(k+1))⌋ mod 2^64. */
interface Expansion {
  m: bigint;
  shift: number;
  /** The first chunk as 32-bit halves, for the draw that almost always ends there. */
  firstHi: number;
  firstLo: number;
}

const expansions = new Map<number, Expansion>();

function expansion(p: number): Expansion {
  let e = expansions.get(p);
  if (e === undefined) {
    f64View.setFloat64(0, p);
    const bits = f64View.getBigUint64(0);
    const exponent = Number((bits >> 52n) & 0x7ffn);
    const fraction = bits & ((1n << 52n) - 1n);
    // p = m·2^(−shift), m < 2^53 an integer.
    const m = exponent === 0 ? fraction : fraction | (1n << 52n);
    const shift = exponent === 0 ? 1074 : 1075 - exponent;
    const first = chunk(m, shift, 64);
    e = { m, shift, firstHi: Number(first >> 32n), firstLo: Number(first & 0xffffffffn) };
    if (expansions.size < 64) expansions.set(p, e);
  }
  return e;
}

/** Bits (chunkEnd − 64, chunkEnd] of p's expansion: ⌊p·2^chunkEnd⌋ mod 2^64. */
function chunk(m: bigint, shift: number, chunkEnd: number): bigint {
  const up = chunkEnd - shift;
  if (up >= 64) return 0n;
  if (up >= 0) return (m << BigInt(up)) & MASK64;
  if (up > -64) return m >> BigInt(-up);
  return 0n;
}

/**
 * A Bernoulli(p) draw exact for the double p (the Rust `bernoulli_exact`): U = 0.w1 w2 …
 * (64-bit words) is compared with p's binary expansion until they differ, so P(U < p) = p
 * however small p is (`Math.random() < p` never fires below 2^-53).
 */
export function bernoulliExact(source: WordSource, p: number): boolean {
  if (Number.isNaN(p) || p <= 0) return false;
  if (p >= 1) return true;
  const e = expansion(p);
  // The first 64-bit word, low half read first, compared without big integers.
  const lo = source.nextU32();
  const hi = source.nextU32();
  if (hi !== e.firstHi) return hi < e.firstHi;
  if (lo !== e.firstLo) return lo < e.firstLo;
  if (64 - e.shift >= 64) return false;
  for (let chunkEnd = 128; ; chunkEnd += 64) {
    const c = chunk(e.m, e.shift, chunkEnd);
    const word = nextU64(source);
    if (word !== c) return word < c;
    // Every later bit of p is 0: U ≥ p unless all of U's later bits are 0 too.
    if (chunkEnd - e.shift >= 64) return false;
  }
}

/** A double uniform on the 2^-53 grid in [0, 1), as rand's `random::<f64>()`. */
export function unitDouble(source: WordSource): number {
  return Number(nextU64(source) >> 11n) * 2 ** -53;
}
