// Optimized local hashing with a fixed public pool of S hash seeds (docs/STATISTICS.md §1.8),
// ported from engine/src/mechanism/olh.rs: the same pool, the same hash, the same draws.

import { checkDomain, checkEpsilon, checkOlhShape, checkSeed, OLH_DEFAULT_POOL_SIZE, OLH_MAX_G } from "./config.js";
import { expNeg, expPos } from "./exp.js";
import { bernoulliExact, uniformBelow, wideMul } from "./sampling.js";
import { WordSource } from "./source.js";
import { GOLDEN, MASK64, splitmix64 } from "./splitmix.js";

const TWO32 = 2 ** 32;

export interface OlhParameters {
  epsilon: number;
  domain: number;
  g?: number;
  pool_size?: number;
  pool_seed?: bigint | number;
}

/** A validated olh mechanism: the pool as 32-bit words, aHi, aLo, bHi, bLo per entry. */
export interface PreparedOlh {
  kind: "olh";
  domain: number;
  g: number;
  poolSize: number;
  pool: Uint32Array;
  /** `(g−1)/(e^ε+g−1)`, GenRR's lie probability over the g buckets. */
  lie: number;
}

/**
 * The default g = round(e^ε) + 1, capped at 2^16, as `ldpstream_config::olh_default_g`:
 * from the correctly rounded e^ε (as the engine's f64::exp), so that the rounding to an
 * integer agrees wherever e^ε is not within an ulp of a half-integer.
 */
export function defaultG(epsilon: number): number {
  // e^12 > 2^16: the cap, without computing e^700.
  if (epsilon >= 12) return OLH_MAX_G;
  const g = Math.round(expPos(epsilon)) + 1;
  return g < OLH_MAX_G ? Math.max(g, 2) : OLH_MAX_G;
}

/** Pool entries (a_i, b_i) as BigInt: a_i = next() | 1, b_i = next() of the SplitMix64
 * stream started at `seed`, output k being splitmix64(seed + k·GOLDEN). */
export function olhPool(seed: bigint, size: number): Array<[bigint, bigint]> {
  const next = (k: bigint) => splitmix64((seed + k * GOLDEN) & MASK64);
  const out: Array<[bigint, bigint]> = [];
  for (let i = 0n; i < BigInt(size); i++) out.push([next(2n * i) | 1n, next(2n * i + 1n)]);
  return out;
}

function poolWords(pool: Array<[bigint, bigint]>): Uint32Array {
  const words = new Uint32Array(4 * pool.length);
  pool.forEach(([a, b], i) => {
    words.set([Number(a >> 32n), Number(a & 0xffffffffn), Number(b >> 32n), Number(b & 0xffffffffn)], 4 * i);
  });
  return words;
}

/**
 * `((a_i·v + b_i) mod 2^64) >> 32` in exact doubles: aHi·v + hi(aLo·v) + bHi + the carry
 * of lo(aLo·v) + bLo, mod 2^32. (The carry moves a bucket only with probability g/2^32, so
 * the tests check this word itself.)
 */
export function olhKeyHigh(pool: Uint32Array, i: number, v: number): number {
  const at = 4 * i;
  const [high, low] = wideMul(pool[at + 1], v);
  const carry = low + pool[at + 3] >= TWO32 ? 1 : 0;
  return ((Math.imul(pool[at], v) >>> 0) + high + pool[at + 2] + carry) % TWO32;
}

/** `h(v) = ((((a·v + b) mod 2^64) >> 32)·g) >> 32`: the product is below 2^48, exact. */
export function olhBucket(pool: Uint32Array, i: number, g: number, v: number): number {
  return Math.floor((olhKeyHigh(pool, i, v) * g) / TWO32);
}

export function prepareOlh(config: OlhParameters): PreparedOlh {
  const epsilon = checkEpsilon(config.epsilon);
  const domain = checkDomain(config.domain);
  const [g, poolSize] = checkOlhShape(config.g ?? defaultG(epsilon), config.pool_size ?? OLH_DEFAULT_POOL_SIZE, domain);
  const seed = checkSeed(config.pool_seed, "pool_seed");
  // GenRR over g buckets (the engine's Grr::new(ε, g)).
  const decay = expNeg(epsilon);
  const lie = ((g - 1) * decay) / (1 + (g - 1) * decay);
  return { kind: "olh", domain, g, poolSize, pool: poolWords(olhPool(seed, poolSize)), lie };
}

/**
 * The engine's `Olh::randomize_with`: the pool index uniform over [S] (rand's
 * `random_range`), then GenRR's draws on the bucket h_i(x): an exact Bernoulli for the lie,
 * and a lie uniform over the g − 1 other buckets.
 */
export function drawOlh(m: PreparedOlh, x: number, source: WordSource): [number, number] {
  const i = uniformBelow(source, m.poolSize);
  const bucket = olhBucket(m.pool, i, m.g, x);
  if (!bernoulliExact(source, m.lie)) return [i, bucket];
  const y = uniformBelow(source, m.g - 1);
  return [i, y >= bucket ? y + 1 : y];
}
