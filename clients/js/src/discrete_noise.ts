import { WordSource } from "./source.js";
import { rangeU128, rangeU64, SMALL_RANGE, smallRange } from "./wide_range.js";

// The exact discrete Laplace and discrete Gaussian samplers of Canonne, Kamath and Steinke
// (NeurIPS 2020, Algorithms 1-3), ported step for step from the engine
// (engine/src/mechanism/discrete_noise.rs): the same words give the same integer. Every
// decision compares a uniform integer, so no probability is ever rounded. Integers the
// engine holds in u128 are bigints here, and the engine's overflow exits are kept.

const MAX_U128 = (1n << 128n) - 1n;
const MAX_I64 = (1n << 63n) - 1n;

/** Bernoulli(exp(−num/den)) exactly; den > 0 (`bernoulli_exp`). */
export function bernoulliExp(source: WordSource, num: bigint, den: bigint): boolean {
  const whole = num / den;
  // exp(−γ) = exp(−1)^⌊γ⌋ · exp(−(γ − ⌊γ⌋)): each factor an independent trial.
  for (let i = 0n; i < whole; i++) {
    if (!bernoulliExpUnit(source, 1n, 1n)) return false;
  }
  return bernoulliExpUnit(source, num % den, den);
}

/** Bernoulli(exp(−γ)), γ = num/den in [0, 1]: A_k ~ Bernoulli(γ/k) until one is 0; odd k. */
function bernoulliExpUnit(source: WordSource, num: bigint, den: bigint): boolean {
  if (den < SMALL_RANGE) {
    // The same loop in doubles while den·k stays exact and small (nearly always).
    const n = Number(num);
    const d = Number(den);
    for (let k = 1; ; k++) {
      if (d * k >= SMALL_RANGE) return bernoulliExpUnitFrom(source, num, den, BigInt(k));
      if (smallRange(source, d * k, 128) >= n) return k % 2 === 1;
    }
  }
  return bernoulliExpUnitFrom(source, num, den, 1n);
}

function bernoulliExpUnitFrom(source: WordSource, num: bigint, den: bigint, from: bigint): boolean {
  for (let k = from; ; k++) {
    const range = den * k;
    // The engine's `checked_mul` exit: unreachable in practice, kept for word equality.
    if (range > MAX_U128) return k % 2n === 1n;
    if (rangeU128(source, range) >= num) return k % 2n === 1n;
  }
}

/** One draw of the discrete Laplace, P(y) ∝ exp(−|y|/t), integer t ≥ 1 (`discrete_laplace`). */
export function discreteLaplace(source: WordSource, scale: bigint): bigint {
  const t = scale < 1n ? 1n : scale;
  for (;;) {
    const u = rangeU64(source, t);
    if (!bernoulliExp(source, u, t)) continue;
    let v = 0n;
    while (bernoulliExp(source, 1n, 1n)) v++;
    // x = u + t·v; the engine starts over when it leaves i64.
    const x = v * t + u;
    if (x > MAX_I64) continue;
    // rand's `random::<bool>()`: the top bit of one 32-bit word.
    const negative = source.nextU32() >= 0x80000000;
    if (negative && x === 0n) continue;
    return negative ? -x : x;
  }
}

/**
 * One draw of N_ℤ(0, s²), integer σ = s ≥ 1 (`discrete_gaussian`): a discrete Laplace
 * proposal with t = s + 1, accepted with probability exp(−(|y|·t − s²)²/(2s²t²)).
 */
export function discreteGaussian(source: WordSource, sigma: bigint): bigint {
  const s = sigma < 1n ? 1n : sigma;
  const t = s + 1n;
  const s2 = s * s;
  const den = 2n * s2 * t * t;
  for (;;) {
    const y = discreteLaplace(source, t);
    const yt = (y < 0n ? -y : y) * t;
    const a = yt > s2 ? yt - s2 : s2 - yt;
    const num = a * a;
    // The engine rejects a proposal whose square leaves u128 (acceptance < exp(−2^40)).
    if (yt > MAX_U128 || num > MAX_U128) continue;
    if (bernoulliExp(source, num, den)) return y;
  }
}
