import {
  checkCohorts,
  checkDomain,
  checkEpsilon,
  checkInput,
  checkK,
  checkMatrix,
  checkSeed,
  MechanismConfig,
} from "./config.js";
import { LdpClientError } from "./errors.js";
import { expNeg } from "./exp.js";
import { drawNoise, NoiseGrid, noiseGrid } from "./noise.js";
import { bernoulliExact, uniformBelow, unitDouble } from "./sampling.js";
import { WordSource } from "./source.js";
import { sampleIndices } from "./subset_sampling.js";
import { splitmix64 } from "./splitmix.js";
import { drawOlh, PreparedOlh, prepareOlh } from "./olh.js";

/** One privatized report, in the shape of the stream's report columns. */
export type Report =
  | { kind: "grr"; report: number }
  | { kind: "matrix"; report: number }
  | { kind: "bitflip" | "oue"; report: Uint8Array }
  | { kind: "hadamard"; row: number; report: 1 | -1 }
  | { kind: "cohort"; cohort: number; report: 1 | -1 }
  | { kind: "gauss" | "laplace"; report: Float64Array }
  | { kind: "subset"; report: Uint32Array }
  /** olh: the pool index and the reported bucket. */
  | { kind: "olh"; seed: number; report: number };

/** A validated mechanism with its probabilities computed once, exactly as the engine does. */
export type Prepared =
  | { kind: "grr"; domain: number; lie: number }
  /** Unary encoding: a true 1 reported as 0 with `drop`, a true 0 reported as 1 with `flip`. */
  | { kind: "bitflip" | "oue"; domain: number; drop: number; flip: number }
  | { kind: "hadamard"; domain: number; rows: number; lie: number }
  | { kind: "cohort"; domain: number; cohorts: number; seed: bigint; lie: number }
  | { kind: "matrix"; domain: number; matrix: number[][]; cumulative: number[][] }
  | { kind: "subset"; domain: number; k: number; keep: number }
  | PreparedOlh
  | NoiseGrid;

/** `1/(1+e^ε)` as `e^{−ε}/(1+e^{−ε})`, which neither overflows nor rounds to 0 (sign_lie). */
function signLie(epsilon: number): number {
  const decay = expNeg(epsilon);
  return decay / (1 + decay);
}

/**
 * The default subset size `⌈d/(e^ε+1)⌉`, clamped into 1..d−1, in the engine's operations
 * (`subset::default_k`), so that the client's k and fingerprint are the server's.
 */
export function defaultK(epsilon: number, domain: number): number {
  const k = Math.ceil(domain * signLie(epsilon));
  return Math.min(Math.max(k, 1), Math.max(domain - 1, 1));
}

/** `P(x ∈ S) = k e^ε/(k e^ε + d − k)` as `1/(1 + t)`, t = (d − k)/k·e^{−ε}: no overflow. */
function subsetKeep(epsilon: number, domain: number, k: number): number {
  const t = ((domain - k) / k) * expNeg(epsilon);
  return 1 / (1 + t);
}

function nextPowerOfTwo(d: number): number {
  let k = 1;
  while (k < d) k *= 2;
  return k;
}

export function prepare(config: MechanismConfig): Prepared {
  if (config === null || typeof config !== "object") {
    throw new LdpClientError("mechanism", config, "a mechanism table");
  }
  switch (config.kind) {
    case "grr": {
      const epsilon = checkEpsilon(config.epsilon);
      const domain = checkDomain(config.domain);
      const others = domain - 1;
      const decay = expNeg(epsilon);
      return { kind: "grr", domain, lie: (others * decay) / (1 + others * decay) };
    }
    case "bitflip": {
      const epsilon = checkEpsilon(config.epsilon);
      const flip = signLie(epsilon / 2);
      return { kind: "bitflip", domain: checkDomain(config.domain), drop: flip, flip };
    }
    case "oue": {
      // Optimized unary encoding (Wang et al. 2017): p = 1/2, q = 1/(e^ε + 1).
      const epsilon = checkEpsilon(config.epsilon);
      return { kind: "oue", domain: checkDomain(config.domain), drop: 0.5, flip: signLie(epsilon) };
    }
    case "hadamard": {
      const epsilon = checkEpsilon(config.epsilon);
      const domain = checkDomain(config.domain);
      return { kind: "hadamard", domain, rows: nextPowerOfTwo(domain), lie: signLie(epsilon) };
    }
    case "cohort": {
      const epsilon = checkEpsilon(config.epsilon);
      const domain = checkDomain(config.domain);
      const cohorts = checkCohorts(config.cohorts, domain);
      return { kind: "cohort", domain, cohorts, seed: checkSeed(config.seed), lie: signLie(epsilon) };
    }
    case "matrix": {
      const matrix = checkMatrix(config.matrix);
      return { kind: "matrix", domain: matrix[0].length, matrix, cumulative: cumulativeColumns(matrix) };
    }
    case "subset": {
      const epsilon = checkEpsilon(config.epsilon);
      const domain = checkDomain(config.domain);
      const k = checkK(config.k ?? defaultK(epsilon, domain), domain);
      return { kind: "subset", domain, k, keep: subsetKeep(epsilon, domain, k) };
    }
    case "olh":
      return prepareOlh(config);
    case "gauss":
      return noiseGrid("gauss", config.rho, config.domain);
    case "laplace":
      return noiseGrid("laplace", config.epsilon, config.domain);
    case "lgrr":
    case "losue":
    case "lsue":
      // A fresh memo per report would spend epsilon_perm on every report.
      throw new LdpClientError(
        "kind",
        config.kind,
        "a one-shot kind for Randomizer: lgrr, losue and lsue report through LongitudinalClient, which keeps the device's memo",
      );
    default:
      throw new LdpClientError(
        "kind",
        (config as { kind?: unknown }).kind,
        "one of grr, bitflip, oue, hadamard, cohort, matrix, gauss, laplace, subset, olh",
      );
  }
}

/** Per type x, the running sums down column x, added in the engine's order. */
function cumulativeColumns(matrix: number[][]): number[][] {
  const d = matrix[0].length;
  const out: number[][] = [];
  for (let x = 0; x < d; x++) {
    let acc = 0;
    out.push(matrix.map((row) => (acc += row[x])));
  }
  return out;
}

/** The cohort family's public sign f_c(x) (docs/configuration.md, `cohort`). */
export function cohortSign(seed: bigint, cohort: number, x: number): 1 | -1 {
  const h = splitmix64(seed ^ splitmix64((BigInt(cohort) << 32n) | BigInt(x)));
  return (h & 1n) === 0n ? 1 : -1;
}

/** `H[j, x] = (−1)^popcount(j & x)`. */
export function hadamardEntry(j: number, x: number): 1 | -1 {
  let v = (j & x) >>> 0;
  let parity = 0;
  while (v !== 0) {
    parity ^= v & 1;
    v >>>= 1;
  }
  return parity === 0 ? 1 : -1;
}

/** Privatizes x, consuming words from `source` in the engine's order. */
export function draw(m: Prepared, x: number, source: WordSource): Report {
  checkInput(x, m.domain);
  switch (m.kind) {
    case "grr": {
      if (!bernoulliExact(source, m.lie)) return { kind: "grr", report: x };
      // Uniform over the d − 1 other categories: skip over x.
      const y = uniformBelow(source, m.domain - 1);
      return { kind: "grr", report: y >= x ? y + 1 : y };
    }
    case "bitflip":
    case "oue": {
      // The engine's order: one exact Bernoulli per bit, `drop` for the true bit (for
      // bitflip it equals `flip`), `flip` for every other.
      const out = new Uint8Array(Math.ceil(m.domain / 8));
      for (let j = 0; j < m.domain; j++) {
        const flipped = bernoulliExact(source, j === x ? m.drop : m.flip);
        if ((j === x) !== flipped) out[j >> 3] |= 1 << (j & 7);
      }
      return { kind: m.kind, report: out };
    }
    case "hadamard": {
      const row = uniformBelow(source, m.rows);
      const truth = hadamardEntry(row, x);
      const lie = bernoulliExact(source, m.lie);
      return { kind: "hadamard", row, report: lie ? (-truth as 1 | -1) : truth };
    }
    case "cohort": {
      const cohort = uniformBelow(source, m.cohorts);
      const truth = cohortSign(m.seed, cohort, x);
      const lie = bernoulliExact(source, m.lie);
      return { kind: "cohort", cohort, report: lie ? (-truth as 1 | -1) : truth };
    }
    case "matrix":
      return { kind: "matrix", report: matrixSignal(m, x, unitDouble(source)) };
    case "gauss":
    case "laplace":
      return { kind: m.kind, report: drawNoise(m, x, source) };
    case "subset":
      return { kind: "subset", report: drawSubset(m, x, source) };
    case "olh": {
      const [seed, report] = drawOlh(m, x, source);
      return { kind: "olh", seed, report };
    }
  }
}

/**
 * The engine's `Subset::randomize_into`: one exact Bernoulli for "x is in the set", then a
 * uniform subset of the d − 1 other categories (index i ≥ x stands for i + 1), sorted.
 */
function drawSubset(m: Extract<Prepared, { kind: "subset" }>, x: number, source: WordSource): Uint32Array {
  const holdsX = bernoulliExact(source, m.keep);
  const drawn = sampleIndices(source, m.domain - 1, holdsX ? m.k - 1 : m.k);
  const out = new Uint32Array(m.k);
  drawn.forEach((i, at) => (out[at] = i >= x ? i + 1 : i));
  if (holdsX) out[m.k - 1] = x;
  return out.sort();
}

function matrixSignal(m: Extract<Prepared, { kind: "matrix" }>, x: number, u: number): number {
  const column = m.cumulative[x];
  const s = column.findIndex((c) => u < c);
  if (s >= 0) return s;
  // Rounding can leave the last running sum a hair under 1: the last possible signal.
  for (let t = m.matrix.length - 1; t >= 0; t--) if (m.matrix[t][x] > 0) return t;
  return 0;
}
