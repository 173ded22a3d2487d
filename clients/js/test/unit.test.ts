import { test } from "node:test";
import assert from "node:assert/strict";

import { encodeBinary, encodeJson, LdpClientError, Randomizer } from "../src/index.js";
import { draw, prepare } from "../src/mechanisms.js";
import { bernoulliExact, uniformBelow } from "../src/sampling.js";
import { CryptoSource, ReplaySource } from "../src/source.js";
import { defaultG, olhBucket, olhKeyHigh, olhPool, prepareOlh } from "../src/olh.js";

/** 64-bit words as the 32-bit words a source yields (low half first). */
function words64(...ws: bigint[]): number[] {
  return ws.flatMap((w) => [Number(w & 0xffffffffn), Number(w >> 32n)]);
}

test("bernoulliExact compares U with p's binary expansion (the Rust test vectors)", () => {
  const b = (p: number, ...ws: bigint[]) => bernoulliExact(new ReplaySource(words64(...ws, 0n, 0n, 0n)), p);
  assert.equal(b(0.5, (1n << 63n) - 1n), true);
  assert.equal(b(0.5, 1n << 63n), false);
  const p = 3 * 2 ** -66;
  assert.equal(b(p, 0n, (3n << 62n) - 1n), true);
  assert.equal(b(p, 0n, 3n << 62n), false);
  assert.equal(b(p, 1n, 0n), false);
  assert.equal(b(Number.MIN_VALUE, ...Array(17).fill(0n)), true);
  assert.equal(bernoulliExact(new ReplaySource([]), 0), false);
  assert.equal(bernoulliExact(new ReplaySource([]), 1), true);
});

// P(lie) at ε = 700 is about 1e-304, far below the 2^-53 that `Math.random() < p` resolves.
// The draw says "lie" exactly when U = 0.w1 w2 … < p: here U just below p lies, U = p (and
// anything above) does not, so the lie region has measure p exactly.
test("P(lie) at epsilon = 700 is the exact double, not 0", () => {
  const m = prepare({ kind: "grr", epsilon: 700, domain: 2 });
  assert.equal(m.kind, "grr");
  const lie = (m as { lie: number }).lie;
  const decay = Math.exp(-700);
  assert.ok(lie > 0 && Math.abs(lie / (decay / (1 + decay)) - 1) < 1e-15, `lie ${lie}`);
  // p = m·2^-shift; its expansion's first non-zero 64-bit chunk sits at chunk index k.
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, lie);
  const bits = view.getBigUint64(0);
  const mant = (bits & ((1n << 52n) - 1n)) | (1n << 52n);
  const shift = 1075 - Number(bits >> 52n);
  // U's bits as one big integer over 64·K bits: p·2^(64K) = mant·2^(64K − shift).
  const K = Math.ceil(shift / 64) + 1;
  const pScaled = mant << BigInt(64 * K - shift);
  const toWords = (u: bigint) =>
    Array.from({ length: K }, (_, i) => (u >> BigInt(64 * (K - 1 - i))) & ((1n << 64n) - 1n));
  const draw = (u: bigint) => bernoulliExact(new ReplaySource(words64(...toWords(u))), lie);
  assert.equal(draw(pScaled - 1n), true, "U just below p lies");
  assert.equal(draw(pScaled), false, "U = p does not");
  assert.equal(draw(pScaled + (1n << 64n)), false);
  assert.equal(draw(0n), true);
  // Everything decided within the words that cover p: the lie region is exactly [0, p).
  assert.ok(K <= 18, `K ${K}`);
});

// OUE (Wang et al. 2017): the true bit is dropped with 1/2, another set with 1/(e^ε+1),
// each an exact Bernoulli in bit order, so at ε = 700 the set probability is the exact
// double (about 1e-304), not 0.
test("oue draws the true bit with 1/2 and the others with 1/(e^eps+1), exactly", () => {
  const m = prepare({ kind: "oue", epsilon: 700, domain: 3 });
  assert.ok(m.kind === "oue");
  assert.equal(m.drop, 0.5);
  const decay = Math.exp(-700);
  assert.ok(m.flip > 0 && Math.abs(m.flip / (decay / (1 + decay)) - 1) < 1e-15, `flip ${m.flip}`);
  const ones = (1n << 64n) - 1n;
  const bits = (...ws: bigint[]) => Array.from((draw(m, 1, new ReplaySource(words64(...ws))).report as Uint8Array));
  // Bit 0 not set, bit 1 dropped (U < 1/2), bit 2 not set.
  assert.deepEqual(bits(ones, (1n << 63n) - 1n, ones), [0]);
  // Bit 1 kept (U > 1/2).
  assert.deepEqual(bits(ones, (1n << 63n) + 1n, ones), [2]);
  // Bit 0 set: U = 0 lies below the tiny q (decided at the 16th chunk of its expansion, as
  // golden grr-eps700-lie), then bit 1 kept.
  assert.deepEqual(bits(...Array(16).fill(0n), ones, ones), [3]);
  // bitflip at the same ε flips the true bit with q too: a U just under 1/2 keeps it.
  const b = prepare({ kind: "bitflip", epsilon: 700, domain: 3 });
  assert.deepEqual(Array.from(draw(b, 1, new ReplaySource(words64(ones, (1n << 63n) - 1n, ones))).report as Uint8Array), [2]);
});

test("uniformBelow is Canon's method: the carry from later words decides exactly", () => {
  const u = (range: number, ...ws: number[]) => uniformBelow(new ReplaySource(ws), range);
  assert.equal(u(3, 0xffffffff), 2);
  assert.equal(u(3, 0), 0);
  // 0x55555556·3 = 2^32 + 2: lo = 2, no carry possible (2 ≤ 2^32 − 3).
  assert.equal(u(3, 0x55555556), 1);
  // 0x55555555·3 = 2^32 − 1: lo = 2^32 − 1 > 2^32 − 3, the next word decides.
  assert.equal(u(3, 0x55555555, 0), 0);
  assert.equal(u(3, 0x55555555, 0xffffffff), 1);
  // lo + hi(next) = 2^32 − 1 exactly and the next lo can still carry: a third word decides.
  assert.equal(u(3, 0x55555555, 0x55555555, 0xffffffff), 1);
  assert.equal(u(3, 0x55555555, 0x55555555, 0), 0);
  // The sum is 2^32 − 1 but the new lo (0) cannot carry: decided without a third word.
  assert.equal(u(3, 0x55555555, 0), 0);
});

test("uniformBelow and grr frequencies match their laws (crypto source)", () => {
  const src = new CryptoSource();
  const counts = new Array(7).fill(0);
  const n = 700_000;
  for (let i = 0; i < n; i++) counts[uniformBelow(src, 7)]++;
  const chi2 = counts.reduce((s, c) => s + (c - n / 7) ** 2 / (n / 7), 0);
  assert.ok(chi2 < 40, `chi2 ${chi2} ${counts}`); // 6 dof: P(chi2 > 40) < 1e-6

  const r = new Randomizer({ kind: "grr", epsilon: 1, domain: 5 });
  const seen = new Array(5).fill(0);
  for (let i = 0; i < 400_000; i++) seen[(r.randomize(2) as { report: number }).report]++;
  const keep = Math.E / (Math.E + 4);
  for (let y = 0; y < 5; y++) {
    const p = y === 2 ? keep : (1 - keep) / 4;
    const se = Math.sqrt((p * (1 - p)) / 400_000);
    assert.ok(Math.abs(seen[y] / 400_000 - p) < 5 * se, `${seen}`);
  }
});

test("bad parameters and inputs are refused naming the parameter", () => {
  const refuses = (f: () => unknown, parameter: string) =>
    assert.throws(f, (e: unknown) => e instanceof LdpClientError && e.parameter === parameter && e.message.includes(parameter));
  refuses(() => new Randomizer({ kind: "grr", epsilon: 0, domain: 4 }), "epsilon");
  refuses(() => new Randomizer({ kind: "grr", epsilon: -1, domain: 4 }), "epsilon");
  refuses(() => new Randomizer({ kind: "grr", epsilon: Infinity, domain: 4 }), "epsilon");
  refuses(() => new Randomizer({ kind: "bitflip", epsilon: NaN, domain: 4 }), "epsilon");
  refuses(() => new Randomizer({ kind: "oue", epsilon: 0, domain: 4 }), "epsilon");
  refuses(() => new Randomizer({ kind: "oue", epsilon: 1, domain: 1 }), "domain");
  refuses(() => new Randomizer({ kind: "hadamard", epsilon: 701, domain: 4 }), "epsilon");
  refuses(() => new Randomizer({ kind: "grr", epsilon: 1, domain: 1 }), "domain");
  refuses(() => new Randomizer({ kind: "grr", epsilon: 1, domain: 2 ** 24 + 1 }), "domain");
  refuses(() => new Randomizer({ kind: "grr", epsilon: 1, domain: 2.5 }), "domain");
  refuses(() => new Randomizer({ kind: "cohort", epsilon: 1, domain: 8, cohorts: 4 }), "cohorts");
  refuses(() => new Randomizer({ kind: "cohort", epsilon: 1, domain: 8, cohorts: 8, seed: -1 }), "seed");
  refuses(() => new Randomizer({ kind: "matrix", matrix: [[0.5, 0.5, 1]] }), "matrix");
  refuses(() => new Randomizer({ kind: "matrix", matrix: [[0.5, 0.2], [0.5]] }), "matrix[1]");
  refuses(() => new Randomizer({ kind: "matrix", matrix: [[1.5, 0.5], [-0.5, 0.5]] }), "matrix[1][0]");
  refuses(() => new Randomizer({ kind: "matrix", matrix: [[0.5, 0.2], [0.4, 0.8]] }), "matrix");
  refuses(() => new Randomizer({ kind: "matrix", matrix: [[1]] }), "matrix");
  refuses(() => new Randomizer({ kind: "gaussian", rho: 1, domain: 4 } as never), "kind");
  const r = new Randomizer({ kind: "grr", epsilon: 1, domain: 4 });
  refuses(() => r.randomize(4), "value");
  refuses(() => r.randomize(-1), "value");
  refuses(() => r.randomize(1.5), "value");
  refuses(() => r.json(1, { ts: 1.5 }), "ts");
  refuses(() => r.json(1, { groups: { g: "x".repeat(129) } }), "groups.g");
});

test("messages follow docs/clients.md, 'Kafka messages'", () => {
  const grr = { kind: "grr" as const, report: 3 };
  assert.equal(encodeJson(grr, { ts: 1767225600000, groups: { group: "a" } }), '{"report":3,"ts":1767225600000,"group":"a"}');
  assert.equal(encodeJson({ kind: "bitflip", report: new Uint8Array([10, 1]) }), '{"report":"0a01"}');
  assert.equal(encodeJson({ kind: "hadamard", row: 5, report: -1 }), '{"row":5,"report":-1}');
  assert.equal(encodeJson({ kind: "cohort", cohort: 2, report: 1 }, { columns: { cohort: "c" } }), '{"c":2,"report":1}');
  const bin = encodeBinary(grr);
  assert.equal(bin.length, 13); // "A GenRR report is 13 bytes"
  assert.deepEqual(Array.from(bin), [1, 0, 0, 0, 0, 0, 0, 0, 0x80, 3, 0, 0, 0]);
  const withGroup = encodeBinary({ kind: "cohort", cohort: 258, report: -1 }, { ts: 1, groups: [["g", "é"]] });
  assert.deepEqual(Array.from(withGroup), [1, 1, 0, 0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 0xff, 2, 0, 0xc3, 0xa9]);
});

test("expNeg is correctly rounded where Math.exp is not, and within an ulp of it elsewhere", async () => {
  const { expNeg } = await import("../src/exp.js");
  const bitsOf = (x: number) => {
    const v = new DataView(new ArrayBuffer(8));
    v.setFloat64(0, x);
    return v.getBigUint64(0);
  };
  // e^{-10} = 4.53999297624848515355…e-5: 0x3f07cd79b5647c9b is 2.6e-21 above it, Math.exp's
  // 0x…9a 4.1e-21 below.
  assert.equal(bitsOf(expNeg(10)).toString(16), "3f07cd79b5647c9b");
  assert.equal(expNeg(0), 1);
  assert.equal(expNeg(1), Math.exp(-1));
  for (let i = 0; i < 2000; i++) {
    const x = i === 0 ? 700 : Math.random() * 700;
    const d = bitsOf(expNeg(x)) - bitsOf(Math.exp(-x));
    assert.ok(d >= -1n && d <= 1n, `x ${x}: ${d} ulps`);
  }
});

test("a stamped message carries the fingerprint: JSON field, binary kind 2", () => {
  const grr = { kind: "grr" as const, report: 3 };
  assert.equal(encodeJson(grr, { fingerprint: 0x0a0b0c0d }), '{"report":3,"fingerprint":"0a0b0c0d"}');
  assert.deepEqual(
    Array.from(encodeBinary(grr, { fingerprint: 0x0a0b0c0d })),
    [2, 0x0d, 0x0c, 0x0b, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0x80, 3, 0, 0, 0],
  );
  const a = new Randomizer({ kind: "grr", epsilon: 1, domain: 4 });
  const b = new Randomizer({ kind: "grr", epsilon: 2, domain: 4 });
  assert.notEqual(a.fingerprint, b.fingerprint);
  assert.ok(a.json(1).endsWith(`"fingerprint":"${a.fingerprint.toString(16).padStart(8, "0")}"}`));
  assert.equal(a.binary(1)[0], 2);
});

test("subset: parameters named, the default k, sorted distinct reports, both encodings", () => {
  const refused = (config: object, parameter: string) =>
    assert.throws(
      () => new Randomizer(config as never),
      (e: unknown) => e instanceof LdpClientError && e.parameter === parameter,
      parameter,
    );
  refused({ kind: "subset", epsilon: 1, domain: 16, k: 0 }, "k");
  refused({ kind: "subset", epsilon: 1, domain: 16, k: 16 }, "k");
  refused({ kind: "subset", epsilon: 1, domain: 16, k: 2.5 }, "k");
  refused({ kind: "subset", epsilon: 0, domain: 16 }, "epsilon");
  refused({ kind: "subset", epsilon: 1, domain: 1 }, "domain");
  const r = new Randomizer({ kind: "subset", epsilon: 2, domain: 1000 });
  assert.throws(() => r.randomize(1000), (e: unknown) => e instanceof LdpClientError && e.parameter === "value");
  // ⌈1000/(e²+1)⌉ = ⌈119.2⌉, the engine's default_k test vector; the same fingerprint as
  // with k = 120 spelled out, another one with k = 121.
  const report = r.randomize(999);
  assert.equal(report.kind, "subset");
  const items = Array.from(report.report as Uint32Array);
  assert.equal(items.length, 120);
  assert.ok(items.every((v, i) => v < 1000 && (i === 0 || items[i - 1] < v)), "sorted, distinct, below d");
  assert.equal(new Randomizer({ kind: "subset", epsilon: 2, domain: 1000, k: 120 }).fingerprint, r.fingerprint);
  assert.notEqual(new Randomizer({ kind: "subset", epsilon: 2, domain: 1000, k: 121 }).fingerprint, r.fingerprint);
  const fixed = { kind: "subset" as const, report: Uint32Array.from([0, 7, 300]) };
  assert.equal(encodeJson(fixed, { ts: 5 }), '{"report":[0,7,300],"ts":5}');
  assert.deepEqual(
    Array.from(encodeBinary(fixed).subarray(9)),
    [3, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0x2c, 1, 0, 0],
  );
  // The binary count is a u16: a larger k must go as JSON (the server refuses the stream).
  const huge = { kind: "subset" as const, report: new Uint32Array(65536) };
  assert.throws(() => encodeBinary(huge), (e: unknown) => e instanceof LdpClientError && e.parameter === "k");
});

test("subset: item frequencies are P(x in S) at x and q elsewhere (crypto source)", () => {
  // d = 7, k = 3, ε = 1: keep = 3e/(3e + 4), q = (3 − keep)/6; 5 s.e. over 60,000 reports.
  const r = new Randomizer({ kind: "subset", epsilon: 1, domain: 7, k: 3 });
  const n = 60000;
  const hits = new Array(7).fill(0);
  for (let i = 0; i < n; i++) for (const j of r.randomize(2).report as Uint32Array) hits[j]++;
  const keep = (3 * Math.E) / (3 * Math.E + 4);
  const q = (3 - keep) / 6;
  hits.forEach((h, j) => {
    const p = j === 2 ? keep : q;
    assert.ok(Math.abs(h / n - p) < 5 * Math.sqrt((p * (1 - p)) / n), `item ${j}: ${h / n} vs ${p}`);
  });
});

test("olh: the pool and the hash are the engine's (olh.rs golden values) and exact", () => {
  // engine/src/mechanism/olh.rs pool_and_buckets_golden_values: Vigna's splitmix64.c from 0.
  assert.deepEqual(olhPool(0n, 2), [
    [0xe220a8397b1dcdafn, 0x6e789e6aa1b965f4n],
    [0x06c45d188009454fn, 0xf88bb8a8724c81ecn],
  ]);
  const m = prepareOlh({ epsilon: 2, domain: 1000, g: 8, pool_size: 4, pool_seed: 0 });
  const buckets = [0, 1, 2, 3].flatMap((i) => [0, 1, 2, 999].map((v) => olhBucket(m.pool, i, 8, v)));
  assert.deepEqual(buckets, [3, 2, 1, 6, 7, 7, 0, 3, 2, 3, 4, 4, 6, 7, 0, 3]);
  // The double arithmetic against the BigInt definition, on keys that carry (v = 2^32 − 1,
  // g = 2^16) and on a seed above 2^63.
  const big = prepareOlh({ epsilon: 1, domain: 100, g: 65536, pool_size: 64, pool_seed: 0xfedcba9876543210n });
  const pool = olhPool(0xfedcba9876543210n, 64);
  for (const [i, [a, b]] of pool.entries()) {
    for (const v of [0, 1, 99, 0x7fffffff, 0xffffffff, (i * 2654435761) >>> 0]) {
      const mixed = ((a * BigInt(v) + b) & ((1n << 64n) - 1n)) >> 32n;
      assert.equal(olhKeyHigh(big.pool, i, v), Number(mixed), `i ${i} v ${v}`);
      for (const g of [2, 3, 1000, 65536]) {
        assert.equal(olhBucket(big.pool, i, g, v), Number((mixed * BigInt(g)) >> 32n), `i ${i} v ${v} g ${g}`);
      }
    }
  }
});

test("olh: the default g is round(e^eps) + 1 (the config's vectors), parameters named", () => {
  assert.deepEqual([2, 1, 0.5, 1e-9, 11, 12, 700].map(defaultG), [8, 4, 3, 2, 59875, 65536, 65536]);
  const refused = (config: object, parameter: string) =>
    assert.throws(
      () => new Randomizer({ kind: "olh", epsilon: 2, domain: 100, ...config } as never),
      (e: unknown) => e instanceof LdpClientError && e.parameter === parameter,
      `${JSON.stringify(config, (_, v) => (typeof v === "bigint" ? String(v) : v))}: ${parameter}`,
    );
  refused({ g: 1 }, "g");
  refused({ g: 65537 }, "g");
  refused({ g: 2.5 }, "g");
  refused({ pool_size: 0 }, "pool_size");
  refused({ pool_size: 65537 }, "pool_size");
  refused({ g: 65536, pool_size: 512 }, "pool_size"); // 2^25 cells
  refused({ domain: 2 ** 24, pool_size: 512 }, "pool_size"); // 2^33 hashes per snapshot
  refused({ pool_seed: -1 }, "pool_seed");
  refused({ pool_seed: 1n << 64n }, "pool_seed");
  refused({ epsilon: 0 }, "epsilon");
  refused({ domain: 1 }, "domain");
  // The limits themselves pass (the config test's bounds).
  new Randomizer({ kind: "olh", epsilon: 2, domain: 100, g: 65536, pool_size: 256 });
  new Randomizer({ kind: "olh", epsilon: 2, domain: 2 ** 24, pool_size: 256, pool_seed: (1n << 64n) - 1n });
  const r = new Randomizer({ kind: "olh", epsilon: 2, domain: 100 });
  assert.throws(() => r.randomize(100), (e: unknown) => e instanceof LdpClientError && e.parameter === "value");
  const same = new Randomizer({ kind: "olh", epsilon: 2, domain: 100, g: 8, pool_size: 1024, pool_seed: 0 });
  assert.equal(same.fingerprint, r.fingerprint, "defaults resolved before fingerprinting");
  for (const other of [{ g: 9 }, { pool_size: 1023 }, { pool_seed: 1 }]) {
    assert.notEqual(new Randomizer({ kind: "olh", epsilon: 2, domain: 100, ...other }).fingerprint, r.fingerprint);
  }
});

test("olh: reports and both encodings", () => {
  const r = new Randomizer({ kind: "olh", epsilon: 1, domain: 10, g: 5, pool_size: 3 });
  const rep = r.randomize(9);
  assert.ok(rep.kind === "olh" && rep.seed < 3 && rep.report < 5);
  const fixed = { kind: "olh" as const, seed: 17, report: 3 };
  assert.equal(encodeJson(fixed, { ts: 5 }), '{"seed":17,"report":3,"ts":5}');
  assert.equal(encodeJson(fixed, { columns: { seed: "s", report: "y" } }), '{"s":17,"y":3}');
  assert.deepEqual(Array.from(encodeBinary(fixed).subarray(9)), [17, 0, 0, 0, 3, 0, 0, 0]);
  assert.equal(encodeBinary(fixed).length, 17);
});

test("olh: given the pool index, the bucket is GenRR around h_i(x) (crypto source)", () => {
  // S = 3, g = 5, ε = 1.5: each (i, y) cell has probability (1/3)·(p or q); 5 s.e. over
  // 90,000 reports.
  const [S, g, x, n] = [3, 5, 7, 90000];
  const r = new Randomizer({ kind: "olh", epsilon: 1.5, domain: 20, g, pool_size: S, pool_seed: 11 });
  const m = prepareOlh({ epsilon: 1.5, domain: 20, g, pool_size: S, pool_seed: 11 });
  const cells = new Array(S * g).fill(0);
  for (let k = 0; k < n; k++) {
    const rep = r.randomize(x);
    if (rep.kind !== "olh") throw new Error("not an olh report");
    cells[rep.seed * g + rep.report] += 1;
  }
  const e = Math.exp(1.5);
  cells.forEach((c, cell) => {
    const [i, y] = [Math.floor(cell / g), cell % g];
    const p = ((olhBucket(m.pool, i, g, x) === y ? e : 1) / (e + g - 1)) / S;
    assert.ok(Math.abs(c / n - p) < 5 * Math.sqrt((p * (1 - p)) / n), `cell (${i}, ${y}): ${c / n} vs ${p}`);
  });
});
