// e^{−x}, correctly rounded. The lie probabilities are built from it, and the same random
// words must give the same decision as the engine, whose f64::exp (glibc, ARM's
// optimized-routines exp) is correctly rounded in all but rare cases; V8's Math.exp
// (fdlibm) is not: Math.exp(-10) is one ulp below e^{-10} (conformance/README.md). Run
// once per randomizer, so exact big-integer arithmetic costs nothing that matters.

const PRECISION = 1400; // fixed-point bits: e^{-745} ≈ 2^{-1075} keeps > 300 bits
const ONE = 1n << BigInt(PRECISION);
const view = new DataView(new ArrayBuffer(8));

/** x = m·2^e exactly, m an odd-or-zero integer. */
function dyadic(x: number): [bigint, number] {
  view.setFloat64(0, x);
  const bits = view.getBigUint64(0);
  const exponent = Number((bits >> 52n) & 0x7ffn);
  const fraction = bits & ((1n << 52n) - 1n);
  return exponent === 0 ? [fraction, -1074] : [fraction | (1n << 52n), exponent - 1075];
}

/** The double nearest v·2^-PRECISION (v > 0), ties to even. */
function roundToDouble(v: bigint): number {
  const length = v.toString(2).length;
  const shift = length - 53;
  if (shift <= 0) return Number(v) * 2 ** -PRECISION;
  let m = v >> BigInt(shift);
  const rest = v - (m << BigInt(shift));
  const half = 1n << BigInt(shift - 1);
  if (rest > half || (rest === half && (m & 1n) === 1n)) m += 1n;
  // Two power-of-two factors, each exact, so that no intermediate leaves the range.
  const e = shift - PRECISION;
  return Number(m) * 2 ** Math.ceil(e / 2) * 2 ** Math.floor(e / 2);
}

/** e^{−x}·2^PRECISION in fixed point, for 0 < x ≤ 745. */
function expNegFixed(x: number): bigint {
  const [m, e] = dyadic(x);
  // t = x/2^s < 2^-16, then e^{−x} = (e^{−t})^(2^s).
  const s = Math.max(0, Math.ceil(Math.log2(x)) + 16);
  const scale = PRECISION + e - s; // t·2^P = m·2^scale
  const t = scale >= 0 ? m << BigInt(scale) : m >> BigInt(-scale);
  let term = ONE;
  let sum = ONE;
  for (let k = 1n; term !== 0n; k++) {
    term = -((term * t) >> BigInt(PRECISION)) / k;
    sum += term;
  }
  for (let i = 0; i < s; i++) sum = (sum * sum) >> BigInt(PRECISION);
  return sum;
}

/** e^{−x} for 0 ≤ x ≤ 745, correctly rounded to the nearest double. */
export function expNeg(x: number): number {
  if (!(x >= 0 && x <= 745)) throw new RangeError(`expNeg(${x}): outside [0, 745]`);
  if (x === 0) return 1;
  return roundToDouble(expNegFixed(x));
}

/**
 * e^{x} for 0 ≤ x ≤ 700, correctly rounded (olh's default g rounds it to an integer as the
 * engine's f64::exp does: Math.exp can be an ulp off).
 */
export function expPos(x: number): number {
  if (!(x >= 0 && x <= 700)) throw new RangeError(`expPos(${x}): outside [0, 700]`);
  if (x === 0) return 1;
  return roundToDouble((ONE * ONE) / expNegFixed(x));
}
