// The noise mechanisms (gauss, laplace): the grid, exactness in f32, the messages, the
// parameter checks, and the double-precision fast path of the wide uniform draws.
import { test } from "node:test";
import assert from "node:assert/strict";

import { LdpClientError, Randomizer } from "../src/index.js";
import { encodeBinary, encodeJson } from "../src/encode.js";
import { prepare } from "../src/mechanisms.js";
import { CryptoSource, ReplaySource } from "../src/source.js";
import { rangeExact, rangeU128, rangeU64 } from "../src/wide_range.js";

const configs = [
  { kind: "gauss" as const, rho: 0.5, domain: 5 },
  { kind: "gauss" as const, rho: 1e-11, domain: 3 },
  { kind: "gauss" as const, rho: 245000, domain: 3 },
  { kind: "laplace" as const, epsilon: 1, domain: 5 },
  { kind: "laplace" as const, epsilon: 700, domain: 3 },
  { kind: "laplace" as const, epsilon: 1e-5, domain: 3 },
];

test("every coordinate is a multiple of the grid step and exactly an f32", () => {
  for (const config of configs) {
    const m = prepare(config);
    assert.ok(m.kind === "gauss" || m.kind === "laplace");
    const step = 2 ** -m.exponent;
    const r = new Randomizer(config);
    for (let i = 0; i < 500; i++) {
      for (const v of (r.randomize(1) as { report: Float64Array }).report) {
        assert.equal(Math.fround(v), v, `${JSON.stringify(config)}: ${v} is not an f32`);
        assert.ok(Number.isInteger(v / step), `${JSON.stringify(config)}: ${v} is off the grid`);
      }
    }
  }
});

// The engine's values (Noise::grid_scale, grid_step), as conformance/golden.json pins for
// its cases, plus two more: the same f64 operations give the same integers.
test("the grid and the integer scale are the engine's", () => {
  const grid = (config: Parameters<typeof prepare>[0]) => {
    const m = prepare(config) as { exponent: number; scale: bigint };
    return [m.exponent, Number(m.scale)];
  };
  assert.deepEqual(grid({ kind: "gauss", rho: 0.5, domain: 3 }), [18, 370728]);
  assert.deepEqual(grid({ kind: "gauss", rho: 1e-11, domain: 3 }), [0, 316228]);
  assert.deepEqual(grid({ kind: "gauss", rho: 245000, domain: 3 }), [23, 16948]);
  assert.deepEqual(grid({ kind: "laplace", epsilon: 1, domain: 3 }), [17, 262145]);
  assert.deepEqual(grid({ kind: "laplace", epsilon: 700, domain: 3 }), [23, 23968]);
  // ⌈200000.00000000003·(1 + 1e-12)⌉: the margin moves it up a step, as in the engine.
  assert.deepEqual(grid({ kind: "laplace", epsilon: 1e-5, domain: 3 }), [0, 200001]);
});

test("noise messages: JSON numbers that parse back exactly, binary d × f32", () => {
  const report = { kind: "gauss" as const, report: new Float64Array([-1.21057891845703125, 2 ** -24, 1]) };
  assert.equal(encodeJson(report), '{"report":[-1.2105789184570312,5.960464477539063e-8,1]}');
  assert.deepEqual(JSON.parse(encodeJson(report)).report, Array.from(report.report));
  const bin = encodeBinary(report, { ts: 5 });
  assert.equal(bin.length, 9 + 4 * 3);
  const view = new DataView(bin.buffer);
  assert.deepEqual([0, 1, 2].map((j) => view.getFloat32(9 + 4 * j, true)), Array.from(report.report));
  const r = new Randomizer({ kind: "laplace", epsilon: 1, domain: 4 });
  const stamped = r.binary(2, { groups: [["g", "ab"]] });
  assert.equal(stamped.length, 13 + 16 + 4);
  assert.equal(stamped[0], 2);
  assert.ok(r.json(2).endsWith(`"fingerprint":"${r.fingerprint.toString(16).padStart(8, "0")}"}`));
});

test("noise parameters outside the server's ranges are refused naming the parameter", () => {
  const refuses = (config: unknown, parameter: string) =>
    assert.throws(
      () => new Randomizer(config as never),
      (e: unknown) => e instanceof LdpClientError && e.parameter === parameter && e.message.includes(parameter),
    );
  for (const rho of [0, -1, 9e-12, 245001, NaN, Infinity, "1"]) refuses({ kind: "gauss", rho, domain: 4 }, "rho");
  for (const epsilon of [0, 9e-6, 701, NaN]) refuses({ kind: "laplace", epsilon, domain: 4 }, "epsilon");
  refuses({ kind: "gauss", rho: 1, domain: 1 }, "domain");
  refuses({ kind: "laplace", epsilon: 1, domain: 2 ** 24 + 1 }, "domain");
  assert.throws(() => new Randomizer({ kind: "gauss", rho: 1, domain: 4 }).randomize(4), LdpClientError);
  // The bounds themselves are accepted, as the config accepts them.
  new Randomizer({ kind: "gauss", rho: 1e-11, domain: 2 });
  new Randomizer({ kind: "laplace", epsilon: 1e-5, domain: 2 });
});

test("the wide draws' fast path reads the same words and gives the same integer as the exact loop", () => {
  const src = new CryptoSource();
  const words = (n: number) => Array.from({ length: n }, () => src.nextU32());
  const ranges = [1n, 2n, 3n, 7n, 262145n, 419432n, (1n << 37n) - 1n];
  for (const range of ranges) {
    for (let i = 0; i < 2000; i++) {
      for (const bits of [64, 128] as const) {
        // Random words, and words whose product's high limbs are all ones (the carry path).
        const w = i % 2 === 0 ? words(12) : [...words(1), ...Array(11).fill(0xffffffff)];
        const fast = new ReplaySource(w);
        const exact = new ReplaySource(w);
        const a = bits === 64 ? rangeU64(fast, range) : rangeU128(fast, range);
        assert.equal(a, rangeExact(exact, range, bits), `${range} ${bits} ${w}`);
        assert.equal(fast.consumed(), exact.consumed());
      }
    }
  }
});
