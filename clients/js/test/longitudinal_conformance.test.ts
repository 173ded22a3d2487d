// The longitudinal golden cases (conformance/README.md, "Longitudinal clients"): every step
// replayed twice, once through a client whose in-memory store holds the step's
// `memo_before`, and once in sequence through the Node file store, torn down and reopened
// (a new store and a new client on the same file) wherever a step has `restart_before`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { LongitudinalConfig } from "../src/config.js";
import { LdpRefusal, LongitudinalClient, REPLAY } from "../src/device.js";
import { encodeBinary, encodeJson } from "../src/encode.js";
import { fingerprint, fingerprintHex } from "../src/fingerprint.js";
import { prepareLongitudinal } from "../src/longitudinal.js";
import { InMemoryMemoStore, MemoStore } from "../src/memo.js";
import { Report } from "../src/mechanisms.js";
import { NodeFileMemoStore } from "../src/node.js";
import { ReplaySource } from "../src/source.js";

interface Step {
  metric: string;
  value: number;
  ts: number;
  restart_before: boolean;
  memo_before: unknown;
  words: number[];
  report: { report: number | string } | null;
  refusal: string | null;
  memo_after: unknown;
  json: string | null;
  binary: string | null;
}

interface Case {
  name: string;
  mechanism: LongitudinalConfig;
  period_ms: number;
  fingerprint: string;
  probability_bits: [string, string];
  options: { max_memoized_values: number; same_period: "refuse" | "repeat" };
  groups: Array<[string, string]>;
  steps: Step[];
}

const golden = JSON.parse(
  readFileSync(new URL("../../../../conformance/golden.json", import.meta.url), "utf8"),
) as { longitudinal: Case[] };

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function bits(p: number): string {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, p);
  return view.getBigUint64(0).toString(16).padStart(16, "0");
}

function flat(r: Report): { report: number | string } {
  if (r.kind === "grr") return { report: r.report };
  if (r.kind === "oue" || r.kind === "bitflip") return { report: hex(r.report) };
  throw new Error(`a longitudinal report cannot be ${r.kind}`);
}

function client(c: Case, store: MemoStore): LongitudinalClient {
  return new LongitudinalClient(c.mechanism, {
    store,
    maxMemoizedValues: c.options.max_memoized_values,
    samePeriod: c.options.same_period,
  });
}

async function stored(store: MemoStore, metric: string): Promise<unknown> {
  const text = await store.load(metric);
  return text === null ? null : JSON.parse(text);
}

/** Runs one step and checks everything the case pins but the memo after it. */
async function check(c: Case, s: Step, cl: LongitudinalClient, where: string): Promise<void> {
  const source = new ReplaySource(s.words);
  let report: Report | null = null;
  let refusal: string | null = null;
  try {
    report = await cl[REPLAY](s.metric, s.value, s.ts, source);
  } catch (e) {
    if (!(e instanceof LdpRefusal)) throw e;
    refusal = e.code;
  }
  assert.equal(refusal, s.refusal, `${where}: refusal`);
  assert.deepEqual(report === null ? null : flat(report), s.report, `${where}: report`);
  assert.equal(source.consumed(), s.words.length, `${where}: words consumed`);
  const options = { ts: s.ts, groups: c.groups };
  assert.equal(report === null ? null : encodeJson(report, options), s.json, `${where}: json`);
  assert.equal(report === null ? null : hex(encodeBinary(report, options)), s.binary, `${where}: binary`);
}

test("the longitudinal golden cases cover every longitudinal kind, the restart and every refusal", () => {
  const kinds = new Set(golden.longitudinal.map((c) => c.mechanism.kind));
  assert.deepEqual([...kinds].sort(), ["lgrr", "losue", "lsue"]);
  const refusals = new Set(golden.longitudinal.flatMap((c) => c.steps.map((s) => s.refusal)));
  for (const r of ["same_period", "clock_went_back", "memo_full", "stopped", "memo_mismatch"]) assert.ok(refusals.has(r), r);
  assert.ok(golden.longitudinal.some((c) => c.steps.some((s) => s.restart_before)));
});

for (const c of golden.longitudinal) {
  test(`golden longitudinal ${c.name}: parameters and fingerprint`, () => {
    const m = prepareLongitudinal(c.mechanism);
    assert.equal(m.periodMs, c.period_ms);
    assert.equal(fingerprintHex(fingerprint(c.mechanism)), c.fingerprint);
    const first = m.first.kind === "grr" ? m.first.lie : (m.first as { flip: number }).flip;
    assert.deepEqual([bits(first), bits(m.second)], c.probability_bits);
  });

  test(`golden longitudinal ${c.name}: each step from its memo_before`, async () => {
    for (const [i, s] of c.steps.entries()) {
      const store = new InMemoryMemoStore();
      if (s.memo_before !== null) store.save(s.metric, JSON.stringify(s.memo_before));
      await check(c, s, client(c, store), `step ${i}`);
      assert.deepEqual(await stored(store, s.metric), s.memo_after, `step ${i}: memo_after`);
    }
  });

  test(`golden longitudinal ${c.name}: in sequence on the Node file store, restarted where marked`, async () => {
    const dir = mkdtempSync(join(tmpdir(), "ldp-memo-"));
    const path = join(dir, "memo.json");
    let store = await NodeFileMemoStore.open(path);
    try {
      const s0 = c.steps[0];
      if (s0.memo_before !== null) await store.save(s0.metric, JSON.stringify(s0.memo_before));
      let cl = client(c, store);
      for (const [i, s] of c.steps.entries()) {
        if (s.restart_before) {
          await store.close();
          store = await NodeFileMemoStore.open(path);
          cl = client(c, store);
        }
        assert.deepEqual(await stored(store, s.metric), s.memo_before, `step ${i}: the stored memo is memo_before`);
        await check(c, s, cl, `step ${i}`);
        assert.deepEqual(await stored(store, s.metric), s.memo_after, `step ${i}: memo_after`);
      }
      // What is on disk is what the last step left, in the Rust store's format.
      const file = JSON.parse(readFileSync(path, "utf8"));
      assert.equal(file.version, 1);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
