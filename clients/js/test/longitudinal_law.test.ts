// The law of the longitudinal client's reports, drawn from the CSPRNG through the public
// `LongitudinalClient` (docs/STATISTICS.md §1.9): one report of a fresh device follows the
// one-shot kind at ε1, the memo follows the one-shot kind at ε∞, and a device's reports in
// later periods are the second round applied to that same memo. The golden replay
// (longitudinal_conformance.test.ts) pins the words; this pins the law, by χ² tests.
//
// The CSPRNG cannot be seeded, so every check rejects only below p = 1e-6 (12 checks: a
// false alarm about once in 80,000 runs), and the sample sizes are chosen so that a client
// without a memo, or with its two rounds swapped, fails by a wide margin (asserted below
// from the noncentrality, and seen by breaking the client).
import { test } from "node:test";
import assert from "node:assert/strict";

import { InMemoryMemoStore, LongitudinalClient, LongitudinalConfig } from "../src/index.js";

const DAY = 86_400_000;
const T0 = 1767225600000; // 2026-01-01, a period boundary
const ALPHA = 1e-6;
const KINDS = ["lgrr", "losue", "lsue"] as const;
type Kind = (typeof KINDS)[number];
const [EPS_PERM, EPS_1, D, X] = [2, 1, 4, 1];
// ~5,000 devices × 4 periods per kind keeps the file near 3 s on a loaded 2-core machine.
const DEVICES = 5_000;
const PERIODS = 4;

// χ² survival function: the regularized upper incomplete gamma Q(df/2, x/2), by the series
// for P below a + 1 and Lentz's continued fraction for Q above (Numerical Recipes §6.2).
const LANCZOS = [
  0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059, 12.507343278686905,
  -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
];

function lgamma(x: number): number {
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - lgamma(1 - x);
  const z = x - 1;
  let a = LANCZOS[0];
  for (let i = 1; i < LANCZOS.length; i++) a += LANCZOS[i] / (z + i);
  const t = z + 7.5;
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(a);
}

function gammaQ(a: number, x: number): number {
  if (x <= 0) return 1;
  const front = Math.exp(-x + a * Math.log(x) - lgamma(a));
  if (x < a + 1) {
    let [term, sum] = [1 / a, 1 / a];
    for (let n = 1; n < 10_000 && Math.abs(term) > Math.abs(sum) * 1e-16; n++) {
      term *= x / (a + n);
      sum += term;
    }
    return 1 - sum * front;
  }
  const tiny = 1e-300;
  let b = x + 1 - a;
  let c = 1 / tiny;
  let d = 1 / b;
  let h = d;
  for (let i = 1; i < 10_000; i++) {
    const an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (Math.abs(d) < tiny) d = tiny;
    c = b + an / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    const delta = d * c;
    h *= delta;
    if (Math.abs(delta - 1) < 1e-16) break;
  }
  return front * h;
}

function chi2Sf(x: number, df: number): number {
  return gammaQ(df / 2, x / 2);
}

/** The χ² quantile with survival probability `p`, by bisection (for the power checks). */
function chi2Isf(p: number, df: number): number {
  let [lo, hi] = [0, 10 * df + 1000];
  for (let i = 0; i < 200; i++) {
    const mid = (lo + hi) / 2;
    if (chi2Sf(mid, df) > p) lo = mid;
    else hi = mid;
  }
  return hi;
}

interface Chi2 {
  stat: number;
  df: number;
}

/**
 * Pearson's χ² of counts against expected counts, the cells of smallest expectation merged
 * (in increasing order) until every cell expects at least 5, so the χ² tail is accurate at
 * p = 1e-6. A count in a cell of expectation 0 is an impossible report: infinite χ².
 */
function chiSquare(observed: number[], expected: number[]): Chi2 {
  const order = expected.map((_, i) => i).sort((a, b) => expected[a] - expected[b]);
  const bins: [number, number][] = [];
  let [o, e] = [0, 0];
  for (const i of order) {
    if (expected[i] === 0 && observed[i] > 0) return { stat: Infinity, df: 1 };
    o += observed[i];
    e += expected[i];
    if (e >= 5) {
      bins.push([o, e]);
      [o, e] = [0, 0];
    }
  }
  if (bins.length === 0) return { stat: 0, df: 0 };
  bins[bins.length - 1][0] += o;
  bins[bins.length - 1][1] += e;
  return { stat: bins.reduce((s, [bo, be]) => s + (bo - be) ** 2 / be, 0), df: bins.length - 1 };
}

function sum(...parts: Chi2[]): Chi2 {
  return { stat: parts.reduce((s, p) => s + p.stat, 0), df: parts.reduce((s, p) => s + p.df, 0) };
}

// The laws, written from the definitions (docs/STATISTICS.md §1.9), not read from the
// client. A report or memo is a cell: the category (lgrr) or the bits as an integer,
// bit j = 2^j (LSB first, d ≤ 8: one byte).
type Law = number[][]; // law[input][output]

function cells(kind: Kind): number {
  return kind === "lgrr" ? D : 2 ** D;
}

function bit(cell: number, j: number): number {
  return (cell >> j) & 1;
}

/** GenRR on d categories keeping the input with probability `keep`. */
function genrr(keep: number): Law {
  return Array.from({ length: D }, (_, i) => Array.from({ length: D }, (_, j) => (i === j ? keep : (1 - keep) / (D - 1))));
}

/** Unary encoding of category x: bit j is 1 with probability `one(j === x)`, independently. */
function unary(one: (isX: boolean) => number): Law {
  return Array.from({ length: D }, (_, x) =>
    Array.from({ length: 2 ** D }, (_, y) => {
      let p = 1;
      for (let j = 0; j < D; j++) p *= bit(y, j) ? one(j === x) : 1 - one(j === x);
      return p;
    }),
  );
}

/** Every bit of a pattern flipped with probability `flip`, independently. */
function flips(flip: number): Law {
  return Array.from({ length: 2 ** D }, (_, b) =>
    Array.from({ length: 2 ** D }, (_, y) => {
      let p = 1;
      for (let j = 0; j < D; j++) p *= bit(y, j) !== bit(b, j) ? flip : 1 - flip;
      return p;
    }),
  );
}

/** The one-shot kind at ε: grr, oue (½ at x, 1/(e^ε+1) elsewhere), bitflip (SUE, at ε/2 per bit). */
function oneShot(kind: Kind, eps: number): Law {
  const e = Math.exp(eps);
  if (kind === "lgrr") return genrr(e / (e + D - 1));
  if (kind === "losue") return unary((isX) => (isX ? 0.5 : 1 / (e + 1)));
  const h = Math.exp(eps / 2);
  return unary((isX) => (isX ? h / (h + 1) : 1 / (h + 1)));
}

/**
 * Round 2, from the composition rule rather than the client's closed form: GenRR channels
 * γI + ρ11ᵀ compose by multiplying γ, γ(ε) = (e^ε − 1)/(e^ε + d − 1); symmetric bit flips
 * compose by multiplying 1 − 2·flip (OUE's off-x bits: 1 − 2q = tanh(ε/2); SUE: tanh(ε/4)).
 */
function secondRound(kind: Kind): Law {
  if (kind === "lgrr") {
    const gamma = (eps: number) => (Math.exp(eps) - 1) / (Math.exp(eps) + D - 1);
    const g2 = gamma(EPS_1) / gamma(EPS_PERM);
    return genrr(g2 + (1 - g2) / D);
  }
  const t = (eps: number) => Math.tanh(kind === "losue" ? eps / 2 : eps / 4);
  return flips((1 - t(EPS_1) / t(EPS_PERM)) / 2);
}

function compose(first: Law, second: Law): Law {
  return first.map((row) => second[0].map((_, y) => row.reduce((s, p, b) => s + p * second[b][y], 0)));
}

/** P(first report = y1, second = y2 | x) for a device whose reports share the memo drawn by `first`. */
function pairLaw(first: Law, second: Law, x: number): number[] {
  const n = second[0].length;
  const out = new Array(n * n).fill(0);
  first[x].forEach((pb, b) => {
    for (let y1 = 0; y1 < n; y1++) for (let y2 = 0; y2 < n; y2++) out[y1 * n + y2] += pb * second[b][y1] * second[b][y2];
  });
  return out;
}

/** P(y1, y2 | x) for a client that draws every report afresh (no memo): the product of the marginals. */
function independentPairLaw(composed: Law, x: number): number[] {
  return composed[x].flatMap((p1) => composed[x].map((p2) => p1 * p2));
}

/** n·Σ(p_alt − p)²/p: the noncentrality of Pearson's χ² for n draws from `alt` tested against `p`. */
function noncentrality(n: number, p: number[], alt: number[]): number {
  return n * p.reduce((s, pi, i) => s + (alt[i] - pi) ** 2 / pi, 0);
}

/** A check that fails at p = 1e-6 with overwhelming probability: mean − 5 s.d. of the noncentral χ² past the critical value. */
function powerful(lambda: number, df: number): boolean {
  return df + lambda - 5 * Math.sqrt(2 * (df + 2 * lambda)) > chi2Isf(ALPHA, df);
}

function cellOf(r: number | Uint8Array | string): number {
  if (typeof r === "number") return r;
  if (typeof r === "string") return parseInt(r, 16); // a memo in the store's JSON: hex of one byte
  return r[0];
}

test("chi2Sf matches scipy.stats.chi2.sf", () => {
  // scipy 1.17.1: chi2.sf(40, 6), chi2.sf(3.5, 1), chi2.sf(120.5, 63), chi2.sf(300, 255)
  const cases: [number, number, number][] = [
    [40, 6, 4.5551495055892125e-7],
    [3.5, 1, 0.0613688291394023],
    [120.5, 63, 1.770899119704579e-5],
    [300, 255, 0.02772752205390483],
  ];
  for (const [x, df, want] of cases) {
    const got = chi2Sf(x, df);
    assert.ok(Math.abs(got - want) <= 1e-10 * want, `chi2.sf(${x}, ${df}) = ${got}, scipy ${want}`);
  }
  // scipy: chi2.isf(1e-6, 3) = 30.664849706213598
  assert.ok(Math.abs(chi2Isf(ALPHA, 3) - 30.664849706213598) < 1e-9);
});

test("the laws: two rounds compose to the one-shot kind at ε1, and the checks have power against a client without a memo or with its rounds swapped", () => {
  for (const kind of KINDS) {
    const [first, second] = [oneShot(kind, EPS_PERM), secondRound(kind)];
    const composed = compose(first, second);
    const target = oneShot(kind, EPS_1);
    for (let x = 0; x < D; x++) {
      for (let y = 0; y < cells(kind); y++) assert.ok(Math.abs(composed[x][y] - target[x][y]) < 1e-14, `${kind} ${x} ${y}`);
    }
    if (kind === "lgrr") {
      // The p* = p1·p2 + (1 − p1)·q2 is the diagonal of the composition.
      const [p1, p2, q2] = [first[0][0], second[0][0], second[0][1]];
      assert.ok(Math.abs(p1 * p2 + (1 - p1) * q2 - target[0][0]) < 1e-15);
    }
    // A device's two reports from one memo, against a client that draws every report afresh.
    const pairs = pairLaw(first, second, X);
    const fresh = independentPairLaw(composed, X);
    assert.ok(powerful(noncentrality(DEVICES, pairs, fresh), pairs.length - 1), `${kind}: no power against a memoryless client`);
  }
  // lgrr with its rounds swapped (memo at the second round's law): the memo's law and the pairs' law move.
  const [first, second] = [oneShot("lgrr", EPS_PERM), secondRound("lgrr")];
  assert.ok(powerful(noncentrality(DEVICES, first[X], second[X]), D - 1), "no power against swapped rounds (memo)");
  assert.ok(powerful(noncentrality(DEVICES, pairLaw(first, second, X), pairLaw(second, first, X)), D * D - 1), "no power against swapped rounds (pairs)");
});

for (const kind of KINDS) {
  test(`${kind}: reports drawn from the CSPRNG follow the composed channel, and a device's reports in later periods share its memo (χ², p > 1e-6)`, async () => {
    const config: LongitudinalConfig = { kind, epsilon_perm: EPS_PERM, epsilon_1: EPS_1, domain: D, period: "1d" };
    const store = new InMemoryMemoStore();
    // Each metric has its own memo: DEVICES metrics of one client are DEVICES devices.
    const client = new LongitudinalClient(config, { store });
    const n = cells(kind);
    const reports: number[][] = [];
    for (let i = 0; i < DEVICES; i++) {
      const mine: number[] = [];
      for (let t = 0; t < PERIODS; t++) mine.push(cellOf((await client.report(`device-${i}`, X, T0 + t * DAY)).report as number | Uint8Array));
      reports.push(mine);
    }
    const memos = reports.map((_, i) => {
      const values = JSON.parse(store.load(`device-${i}`)!).values as [number, number | string][];
      assert.equal(values.length, 1);
      return cellOf(values[0][1]);
    });
    const [first, second] = [oneShot(kind, EPS_PERM), secondRound(kind)];
    const composed = compose(first, second);
    const counts = (xs: number[], size: number) => xs.reduce((c, x) => (c[x]++, c), new Array(size).fill(0));
    const checks: [string, Chi2][] = [];
    // One report of a fresh device (its first): the one-shot kind at ε1.
    checks.push(["first report", chiSquare(counts(reports.map((r) => r[0]), n), composed[X].map((p) => p * DEVICES))]);
    // The memo: the one-shot kind at ε∞.
    checks.push(["memo", chiSquare(counts(memos, n), first[X].map((p) => p * DEVICES))]);
    // Every report given the device's memo: the second round, the same memo every period.
    const byMemo = Array.from({ length: n }, () => new Array(n).fill(0));
    reports.forEach((r, i) => r.forEach((y) => byMemo[memos[i]][y]++));
    checks.push([
      "reports given the memo",
      sum(...byMemo.map((row, b) => chiSquare(row, second[b].map((p) => p * row.reduce((s, c) => s + c, 0))))),
    ]);
    // The first two periods' reports of a device, jointly, without looking at the memo.
    const pairs = counts(reports.map((r) => r[0] * n + r[1]), n * n);
    checks.push(["pairs of periods", chiSquare(pairs, pairLaw(first, second, X).map((p) => p * DEVICES))]);
    const found = checks.map(([what, c]) => ({ what, ...c, p: chi2Sf(c.stat, c.df) }));
    const summary = found.map((f) => `${f.what}: χ² ${f.stat.toFixed(1)} on ${f.df} df, p = ${f.p.toPrecision(3)}`).join("; ");
    assert.ok(found.every((f) => f.df > 0 && f.p > ALPHA), `${kind}: ${summary}`);
  });
}
