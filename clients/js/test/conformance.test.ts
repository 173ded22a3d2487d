// The JS half of the golden conformance suite (conformance/README.md): replay each case's
// words through the client's randomizer and compare the report and the message bytes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

import { MechanismConfig } from "../src/config.js";
import { encodeBinary, encodeJson } from "../src/encode.js";
import { fingerprint, fingerprintHex } from "../src/fingerprint.js";
import { draw, prepare, Report } from "../src/mechanisms.js";
import { ReplaySource } from "../src/source.js";
import { bernoulliExp, discreteGaussian, discreteLaplace } from "../src/discrete_noise.js";
import { rangeExact, rangeU128, rangeU64 } from "../src/wide_range.js";
import { olhBucket, olhKeyHigh, olhPool, prepareOlh } from "../src/olh.js";

interface Case {
  name: string;
  mechanism: Record<string, unknown>;
  probability_bits: string | null;
  grid: { exponent: number; scale: number } | null;
  fingerprint: string;
  value: number;
  ts: number | null;
  groups: Array<[string, string]>;
  words: number[];
  report: { index?: number; report: number | string | number[] };
  json: string;
  binary: string;
}

interface OlhPool {
  pool_seed: string;
  pool_size: number;
  g: number;
  pool: Array<[string, string]>;
  values: number[];
  keys: number[][];
  buckets: number[][];
}

interface SamplerCase {
  sampler: string;
  args: string[];
  words: number[];
  value: string | boolean;
}

const golden = JSON.parse(
  readFileSync(new URL("../../../../conformance/golden.json", import.meta.url), "utf8"),
) as { cases: Case[]; samplers: SamplerCase[]; olh_pools: OlhPool[] };

/** Seeds are decimal strings in the golden file (they may exceed 2^53). */
function config(m: Record<string, unknown>): MechanismConfig {
  if (m.kind === "cohort") return { ...m, seed: BigInt(m.seed as string) } as MechanismConfig;
  if (m.kind === "olh") return { ...m, pool_seed: BigInt(m.pool_seed as string) } as MechanismConfig;
  return m as MechanismConfig;
}

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function bits(p: number): string {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, p);
  return view.getBigUint64(0).toString(16).padStart(16, "0");
}

function flat(r: Report): { index?: number; report: number | string | number[] } {
  switch (r.kind) {
    case "gauss":
    case "laplace":
    case "subset":
      return { report: Array.from(r.report) };
    case "bitflip":
    case "oue":
      return { report: hex(r.report) };
    case "hadamard":
      return { index: r.row, report: r.report };
    case "cohort":
      return { index: r.cohort, report: r.report };
    case "olh":
      return { index: r.seed, report: r.report };
    default:
      return { report: r.report };
  }
}

test("the golden file has every mechanism", () => {
  const kinds = new Set(golden.cases.map((c) => c.mechanism.kind));
  assert.deepEqual([...kinds].sort(), ["bitflip", "cohort", "gauss", "grr", "hadamard", "laplace", "matrix", "olh", "oue", "subset"]);
});

for (const c of golden.cases) {
  test(`golden ${c.name}`, () => {
    const m = prepare(config(c.mechanism));
    assert.equal(fingerprintHex(fingerprint(config(c.mechanism))), c.fingerprint, "fingerprint");
    if (c.probability_bits !== null) {
      const p = m.kind === "bitflip" || m.kind === "oue" ? m.flip : m.kind === "subset" ? m.keep : (m as { lie: number }).lie;
      assert.equal(bits(p), c.probability_bits, "the probability the words are compared with");
    }
    if (c.grid !== null) {
      assert.ok(m.kind === "gauss" || m.kind === "laplace");
      assert.deepEqual({ exponent: m.exponent, scale: Number(m.scale) }, c.grid, "the noise's grid");
    }
    const source = new ReplaySource(c.words);
    const report = draw(m, c.value, source);
    assert.deepEqual(flat(report), c.report);
    assert.equal(source.consumed(), c.words.length, "words consumed");
    const options = { ts: c.ts ?? undefined, groups: c.groups };
    assert.equal(encodeJson(report, options), c.json);
    assert.equal(hex(encodeBinary(report, options)), c.binary);
  });
}

// olh's pool and hash by themselves (conformance/README.md, "olh_pools").
for (const p of golden.olh_pools) {
  test(`golden olh pool seed ${p.pool_seed} size ${p.pool_size} g ${p.g}`, () => {
    const seed = BigInt(p.pool_seed);
    const hex = (v: bigint) => v.toString(16).padStart(16, "0");
    assert.deepEqual(olhPool(seed, p.pool_size).map(([a, b]) => [hex(a), hex(b)]), p.pool);
    const m = prepareOlh({ epsilon: 1, domain: 2, g: p.g, pool_size: p.pool_size, pool_seed: seed });
    assert.deepEqual(p.pool.map((_, i) => p.values.map((v) => olhKeyHigh(m.pool, i, v))), p.keys);
    const buckets = p.pool.map((_, i) => p.values.map((v) => olhBucket(m.pool, i, p.g, v)));
    assert.deepEqual(buckets, p.buckets);
  });
}

// The integer draws the noise is built from, each from its own words (conformance/README.md).
for (const [i, c] of golden.samplers.entries()) {
  test(`golden sampler ${i} ${c.sampler}(${c.args.join(", ")})`, () => {
    const args = c.args.map(BigInt);
    const run = (source: ReplaySource): string | boolean => {
      switch (c.sampler) {
        case "range_u64":
          return rangeU64(source, args[0]).toString();
        case "range_u128":
          return rangeU128(source, args[0]).toString();
        case "bernoulli_exp":
          return bernoulliExp(source, args[0], args[1]);
        case "discrete_laplace":
          return discreteLaplace(source, args[0]).toString();
        case "discrete_gaussian":
          return discreteGaussian(source, args[0]).toString();
        default:
          throw new Error(`unknown sampler ${c.sampler}`);
      }
    };
    const source = new ReplaySource(c.words);
    assert.equal(run(source), c.value);
    assert.equal(source.consumed(), c.words.length, "words consumed");
    if (c.sampler.startsWith("range_")) {
      // The double-precision fast path and the big-integer loop read the same words.
      const exact = new ReplaySource(c.words);
      const bits = c.sampler === "range_u64" ? 64 : 128;
      assert.equal(rangeExact(exact, args[0], bits).toString(), c.value);
      assert.equal(exact.consumed(), c.words.length);
    }
  });
}
