import { LdpClientError } from "./errors.js";

// The server's limits (ldpstream_config::values and validate/mechanism.rs): a client that
// accepts less emits nothing the server would refuse.
export const MIN_EPSILON = 1e-9;
export const MAX_EPSILON = 700;
export const MAX_DOMAIN = 2 ** 24;
export const MAX_COHORTS = 2 ** 20;
export const MAX_COHORT_GRAM_WORK = 4e9;
export const CHANNEL_SUM_TOLERANCE = 1e-9;
// gauss's ρ and laplace's ε (validate/mechanism.rs): beyond them the noise's grid could not
// hold every report exactly in f32 (docs/STATISTICS.md §1.3.1).
export const MIN_RHO = 1e-11;
export const MAX_RHO = (MAX_EPSILON * MAX_EPSILON) / 2;
export const MIN_LAPLACE_EPSILON = 1e-5;
// olh (ldpstream_config::OLH_* and validate/mechanism.rs): the table and the hashes a
// snapshot evaluates.
export const OLH_MAX_G = 2 ** 16;
export const OLH_MAX_POOL_SIZE = 2 ** 16;
export const OLH_DEFAULT_POOL_SIZE = 1024;
export const MAX_OLH_TABLE_CELLS = 2 ** 24;
export const MAX_OLH_SUPPORT_WORK = 2 ** 32;

/** A stream's `mechanism` table, with the config's key names and defaults. */
export type MechanismConfig =
  | { kind: "grr"; epsilon: number; domain: number }
  | { kind: "bitflip"; epsilon: number; domain: number }
  | { kind: "oue"; epsilon: number; domain: number }
  | { kind: "hadamard"; epsilon: number; domain: number }
  | { kind: "cohort"; epsilon: number; domain: number; cohorts: number; seed?: bigint | number }
  | { kind: "matrix"; matrix: number[][] }
  | { kind: "gauss"; rho: number; domain: number }
  | { kind: "laplace"; epsilon: number; domain: number }
  | { kind: "subset"; epsilon: number; domain: number; k?: number }
  | { kind: "olh"; epsilon: number; domain: number; g?: number; pool_size?: number; pool_seed?: bigint | number }
  | LongitudinalConfig;

/**
 * The longitudinal kinds (docs/clients.md): a memo drawn once per value at `epsilon_perm`,
 * then one report per `period` (a duration such as "1d", the default) at `epsilon_1`.
 */
export type LongitudinalConfig = {
  kind: "lgrr" | "losue" | "lsue";
  epsilon_perm: number;
  epsilon_1: number;
  domain: number;
  period?: string;
};

export const DEFAULT_PERIOD = "1d";
// The server's range for `period` (validate/longitudinal.rs): from 1s to 3650 days.
export const MIN_PERIOD_MS = 1000;
export const MAX_PERIOD_MS = 3650 * 86_400_000;

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** A duration string as the server parses it ("<integer><ms|s|m|h|d>"), in milliseconds. */
export function checkPeriod(period: unknown): number {
  const expected = 'a duration from "1s" to "3650d", an integer and a unit (ms, s, m, h, d), e.g. "1d"';
  const match = typeof period === "string" ? /^(\d+)(ms|s|m|h|d)$/.exec(period.trim()) : null;
  if (match === null) throw new LdpClientError("period", period, expected);
  const ms = Number(match[1]) * DURATION_UNITS[match[2]];
  if (!Number.isSafeInteger(ms) || ms < MIN_PERIOD_MS || ms > MAX_PERIOD_MS) {
    throw new LdpClientError("period", period, expected);
  }
  return ms;
}

export function checkEpsilon(epsilon: unknown, name = "epsilon"): number {
  if (typeof epsilon !== "number" || !(epsilon >= MIN_EPSILON && epsilon <= MAX_EPSILON)) {
    throw new LdpClientError(
      name,
      epsilon,
      `a finite number from ${MIN_EPSILON} to ${MAX_EPSILON} (the server's range)`,
    );
  }
  return epsilon;
}

export function checkRho(rho: unknown): number {
  if (typeof rho !== "number" || !(rho >= MIN_RHO && rho <= MAX_RHO)) {
    throw new LdpClientError(
      "rho",
      rho,
      `a finite number from ${MIN_RHO} to ${MAX_RHO} (below it the noise's grid is not exact in f32)`,
    );
  }
  return rho;
}

export function checkLaplaceEpsilon(epsilon: unknown): number {
  if (typeof epsilon !== "number" || !(epsilon >= MIN_LAPLACE_EPSILON && epsilon <= MAX_EPSILON)) {
    throw new LdpClientError(
      "epsilon",
      epsilon,
      `a finite number from ${MIN_LAPLACE_EPSILON} to ${MAX_EPSILON} for laplace (below it the noise's grid is not exact in f32)`,
    );
  }
  return epsilon;
}

export function checkDomain(domain: unknown): number {
  if (!Number.isInteger(domain) || (domain as number) < 2 || (domain as number) > MAX_DOMAIN) {
    throw new LdpClientError("domain", domain, `an integer from 2 to ${MAX_DOMAIN}`);
  }
  return domain as number;
}

export function checkCohorts(cohorts: unknown, domain: number): number {
  if (!Number.isInteger(cohorts) || (cohorts as number) < domain || (cohorts as number) > MAX_COHORTS) {
    throw new LdpClientError("cohorts", cohorts, `an integer from the domain (${domain}) to ${MAX_COHORTS}`);
  }
  const c = cohorts as number;
  if (c * domain * domain > MAX_COHORT_GRAM_WORK) {
    throw new LdpClientError("cohorts", c, `cohorts × domain² at most ${MAX_COHORT_GRAM_WORK}`);
  }
  return c;
}

/** A public seed (`seed` of cohort, `pool_seed` of olh), 0 when absent. */
export function checkSeed(seed: unknown, name = "seed"): bigint {
  if (seed === undefined) return 0n;
  const ok =
    (typeof seed === "bigint" && seed >= 0n && seed < 1n << 64n) ||
    (typeof seed === "number" && Number.isSafeInteger(seed) && seed >= 0);
  if (!ok) {
    throw new LdpClientError(name, seed, "an integer from 0 to 2^64 − 1 (a bigint above 2^53)");
  }
  return BigInt(seed as bigint | number);
}

/** A rectangular, column-stochastic |S|×d matrix with d ≥ 2, as the server validates it. */
export function checkMatrix(matrix: unknown): number[][] {
  if (!Array.isArray(matrix) || matrix.length === 0 || !Array.isArray(matrix[0]) || matrix[0].length < 2) {
    throw new LdpClientError("matrix", matrix, "at least one signal row and at least 2 type columns");
  }
  const d = (matrix[0] as unknown[]).length;
  if (d > MAX_DOMAIN) throw new LdpClientError("matrix", matrix, `at most ${MAX_DOMAIN} columns`);
  matrix.forEach((row, s) => {
    if (!Array.isArray(row) || row.length !== d) {
      throw new LdpClientError(`matrix[${s}]`, row, `a row of ${d} entries, like row 0`);
    }
  });
  const rows = matrix as number[][];
  for (let x = 0; x < d; x++) {
    let sum = 0;
    for (let s = 0; s < rows.length; s++) {
      const v = rows[s][x];
      if (typeof v !== "number" || !Number.isFinite(v) || v < 0) {
        throw new LdpClientError(`matrix[${s}][${x}]`, v, `column ${x}: a probability (finite, >= 0)`);
      }
      sum += v;
    }
    if (Math.abs(sum - 1) > CHANNEL_SUM_TOLERANCE) {
      throw new LdpClientError("matrix", `column ${x} summing to ${sum}`, "columns summing to 1 within 1e-9");
    }
  }
  return rows;
}

/** A subset size, given or the default: an integer with 1 ≤ k < domain, as the server checks. */
export function checkK(k: unknown, domain: number): number {
  if (!Number.isInteger(k) || (k as number) < 1 || (k as number) >= domain) {
    throw new LdpClientError("k", k, `an integer with 1 <= k < domain (${domain}), the subset size`);
  }
  return k as number;
}

/** olh's g (resolved) and pool size (resolved), in the server's order of checks. */
export function checkOlhShape(g: unknown, poolSize: unknown, domain: number): [number, number] {
  if (!Number.isInteger(g) || (g as number) < 2 || (g as number) > OLH_MAX_G) {
    throw new LdpClientError("g", g, `an integer from 2 to ${OLH_MAX_G} (default round(e^ε) + 1)`);
  }
  if (!Number.isInteger(poolSize) || (poolSize as number) < 1 || (poolSize as number) > OLH_MAX_POOL_SIZE) {
    throw new LdpClientError("pool_size", poolSize, `an integer from 1 to ${OLH_MAX_POOL_SIZE} (default ${OLH_DEFAULT_POOL_SIZE})`);
  }
  const [gi, s] = [g as number, poolSize as number];
  if (s * gi > MAX_OLH_TABLE_CELLS) {
    throw new LdpClientError("pool_size", s, `pool_size × g at most ${MAX_OLH_TABLE_CELLS} (here ${s} × ${gi})`);
  }
  if (s * domain > MAX_OLH_SUPPORT_WORK) {
    throw new LdpClientError("pool_size", s, `pool_size × domain at most ${MAX_OLH_SUPPORT_WORK} (here ${s} × ${domain})`);
  }
  return [gi, s];
}

export function checkInput(x: unknown, domain: number): number {
  if (!Number.isInteger(x) || (x as number) < 0 || (x as number) >= domain) {
    throw new LdpClientError("value", x, `an integer category from 0 to ${domain - 1}`);
  }
  return x as number;
}
