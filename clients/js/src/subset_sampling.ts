import { uniformBelow, wideMul } from "./sampling.js";
import { WordSource } from "./source.js";

// rand 0.9's `seq::index::sample(rng, length, amount)` for length < 2^32, ported step for
// step: the engine's subset randomizer draws its uniform k-subset with it, and the golden
// replay needs the same words to give the same set. Which of its three algorithms runs
// depends on (length, amount) through f32 arithmetic, kept here with Math.fround.

const TWO32 = 2 ** 32;

/** `random_range(low..=high)` on u32 (Canon's method): `uniformBelow` offset by low. */
function rangeInclusive(source: WordSource, low: number, high: number): number {
  return low + uniformBelow(source, high - low + 1);
}

/** `Uniform::new(0, range).sample` on u32: Lemire's method, rejecting low words below
 * `2^32 mod range`. */
function lemireBelow(source: WordSource, range: number): number {
  const threshold = (TWO32 - range) % range;
  for (;;) {
    const [hi, lo] = wideMul(source.nextU32(), range);
    if (lo >= threshold) return hi;
  }
}

/** Floyd's combination algorithm (rand's `sample_floyd`). */
function floyd(source: WordSource, length: number, amount: number): number[] {
  const indices: number[] = [];
  for (let j = length - amount; j < length; j++) {
    const t = rangeInclusive(source, 0, j);
    const pos = indices.indexOf(t);
    if (pos >= 0) indices[pos] = j;
    indices.push(t);
  }
  return indices;
}

/** A partial Fisher–Yates shuffle of 0..length (rand's `sample_inplace`). */
function inplace(source: WordSource, length: number, amount: number): number[] {
  const indices = new Uint32Array(length);
  for (let i = 0; i < length; i++) indices[i] = i;
  for (let i = 0; i < amount; i++) {
    const j = rangeInclusive(source, i, length - 1);
    const t = indices[i];
    indices[i] = indices[j];
    indices[j] = t;
  }
  return Array.from(indices.subarray(0, amount));
}

/** Draw and redraw on repeats (rand's `sample_rejection`). */
function rejection(source: WordSource, length: number, amount: number): number[] {
  const seen = new Set<number>();
  const indices: number[] = [];
  for (let i = 0; i < amount; i++) {
    let pos = lemireBelow(source, length);
    while (seen.has(pos)) pos = lemireBelow(source, length);
    seen.add(pos);
    indices.push(pos);
  }
  return indices;
}

const f = Math.fround;

/** `amount` distinct indices uniform in [0, length), length < 2^32, in rand's order. */
export function sampleIndices(source: WordSource, length: number, amount: number): number[] {
  if (!(amount <= length)) throw new RangeError(`sampleIndices: ${amount} of ${length}`);
  const large = length >= 500_000 ? 1 : 0;
  const lengthF = f(length);
  if (amount < 163) {
    const c = [
      [f(1.6), f(8.0 / 45.0)],
      [f(10.0), f(70.0 / 9.0)],
    ];
    const amountF = f(amount);
    const m4 = f(c[0][large] * amountF);
    if (amount > 11 && lengthF < f(f(c[1][large] + m4) * amountF)) {
      return inplace(source, length, amount);
    }
    return floyd(source, length, amount);
  }
  const c = [f(270.0), f(330.0 / 9.0)];
  if (lengthF < f(c[large] * f(amount))) return inplace(source, length, amount);
  return rejection(source, length, amount);
}
