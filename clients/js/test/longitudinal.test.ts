// The longitudinal client's rules and its memo stores (the golden replay is
// longitudinal_conformance.test.ts): the period rule, the cap, a failed save, a memo of
// another mechanism, the Node file store across a restart and when damaged, and the
// localStorage store over a Storage stand-in.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import {
  InMemoryMemoStore,
  LdpClientError,
  LdpMemoStoreError,
  LdpRefusal,
  LocalStorageMemoStore,
  LongitudinalClient,
  LongitudinalConfig,
  MemoStore,
  Randomizer,
} from "../src/index.js";
import { periodOf } from "../src/device.js";
import { emptyMemo, memoToJson } from "../src/memo.js";
import { NodeFileMemoStore } from "../src/node.js";

const DAY = 86_400_000;
const T0 = 1767225600000; // 2026-01-01, a period boundary
const lgrr: LongitudinalConfig = { kind: "lgrr", epsilon_perm: 2, epsilon_1: 1, domain: 4, period: "1d" };

async function refusal(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    if (e instanceof LdpRefusal) return e.code;
    throw e;
  }
  assert.fail("not refused");
}

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), "ldp-memo-test-"));
}

test("one report per metric per period, the memo reused across periods, the clock may not go back", async () => {
  const store = new InMemoryMemoStore();
  const c = new LongitudinalClient(lgrr, { store });
  await c.report("m", 2, T0 + 5);
  assert.equal(await refusal(c.report("m", 2, T0 + DAY - 1)), "same_period");
  const first = JSON.parse(store.load("m")!).values;
  for (let t = 1; t < 30; t++) await c.report("m", 2, T0 + t * DAY);
  const memo = JSON.parse(store.load("m")!);
  assert.deepEqual(memo.values, first, "the memo of the value is drawn once");
  assert.equal(memo.reports, 30);
  assert.equal(await refusal(c.report("m", 2, T0 + 3 * DAY)), "clock_went_back");
  // Metrics are independent.
  await c.report("other", 1, T0);
  assert.equal(periodOf(-1, DAY), -1, "before 1970 the period rounds down");
  assert.equal(periodOf(2 ** 53 - 1, 1000), Math.floor((2 ** 53 - 1) / 1000));
});

test("repeat returns the first report's bytes; concurrent reports of one client are serialized", async () => {
  const c = new LongitudinalClient({ ...lgrr, kind: "losue", domain: 20 }, { samePeriod: "repeat" });
  const all = await Promise.all([0, 1, 2, 3].map((v) => c.binary("m", v % 2, { ts: T0 })));
  for (const b of all) assert.deepEqual(b, all[0]);
  // Without repeat, of four concurrent reports in one period exactly one goes out.
  const d = new LongitudinalClient(lgrr);
  const settled = await Promise.allSettled([0, 1, 2, 3].map((v) => d.json("m", v, { ts: T0 })));
  assert.equal(settled.filter((s) => s.status === "fulfilled").length, 1);
  for (const s of settled) if (s.status === "rejected") assert.equal((s.reason as LdpRefusal).code, "same_period");
});

test("past maxMemoizedValues the metric stops, for every value", async () => {
  const store = new InMemoryMemoStore();
  const c = new LongitudinalClient(lgrr, { store, maxMemoizedValues: 2 });
  await c.report("m", 0, T0);
  await c.report("m", 1, T0 + DAY);
  await c.report("m", 0, T0 + 2 * DAY);
  await assert.rejects(c.report("m", 2, T0 + 3 * DAY), (e: LdpRefusal) => e.code === "memo_full" && /maxMemoizedValues = 2/.test(e.message));
  assert.equal(await refusal(c.report("m", 0, T0 + 4 * DAY)), "stopped");
  assert.equal(JSON.parse(store.load("m")!).stopped, true);
});

test("a memo of another mechanism is refused until reset, and the reset keeps the period", async () => {
  const store = new InMemoryMemoStore();
  await new LongitudinalClient(lgrr, { store }).report("m", 1, T0);
  const c = new LongitudinalClient({ ...lgrr, epsilon_1: 0.5 }, { store });
  await assert.rejects(c.report("m", 1, T0 + DAY), (e: LdpRefusal) => e.code === "memo_mismatch" && /epsilon_perm again/.test(e.message));
  await c.reset("m");
  assert.equal(await refusal(c.report("m", 1, T0)), "same_period");
  await c.report("m", 1, T0 + DAY);
});

/** A store whose saves fail after the first `ok` of them. */
class Failing implements MemoStore {
  inner = new InMemoryMemoStore();
  constructor(public ok: number) {}
  load(metric: string) {
    return this.inner.load(metric);
  }
  async save(metric: string, text: string) {
    if (this.ok === 0) throw new Error("disk full");
    this.ok -= 1;
    this.inner.save(metric, text);
  }
}

test("the memo is saved before round 2 and the period before the report: a failed save returns no report", async () => {
  const store = new Failing(1);
  const c = new LongitudinalClient({ ...lgrr, kind: "lsue", domain: 12 }, { store });
  await assert.rejects(c.report("m", 2, T0), (e: LdpMemoStoreError) => e instanceof LdpMemoStoreError && /disk full/.test(e.message));
  const memo = JSON.parse(store.inner.load("m")!);
  assert.equal(memo.values.length, 1, "the memo was saved first");
  assert.equal(memo.last_period, null, "no report went out");
  store.ok = 10;
  await c.report("m", 2, T0);
  assert.deepEqual(JSON.parse(store.inner.load("m")!).values, memo.values, "the memo was not redrawn");
});

test("parameters, options and inputs are refused naming them; Randomizer points to LongitudinalClient", async () => {
  const named = (f: () => unknown, parameter: string) =>
    assert.throws(f, (e: LdpClientError) => e instanceof LdpClientError && e.parameter === parameter, parameter);
  named(() => new LongitudinalClient({ ...lgrr, epsilon_1: 2 }), "epsilon_1");
  named(() => new LongitudinalClient({ ...lgrr, epsilon_perm: 0 }), "epsilon_perm");
  named(() => new LongitudinalClient({ ...lgrr, period: "1w" }), "period");
  named(() => new LongitudinalClient({ ...lgrr, period: "999ms" }), "period");
  named(() => new LongitudinalClient({ ...lgrr, period: "3651d" }), "period");
  named(() => new LongitudinalClient({ ...lgrr, domain: 1 }), "domain");
  named(() => new LongitudinalClient(lgrr, { maxMemoizedValues: 0 }), "maxMemoizedValues");
  named(() => new LongitudinalClient({ ...lgrr, kind: "lsue", domain: 2 ** 24 }, { maxMemoizedValues: 64 }), "maxMemoizedValues");
  named(() => new LongitudinalClient(lgrr, { samePeriod: "twice" as "repeat" }), "samePeriod");
  named(() => new LongitudinalClient({ kind: "grr", epsilon: 1, domain: 4 } as unknown as LongitudinalConfig), "kind");
  named(() => new Randomizer(lgrr), "kind");
  const c = new LongitudinalClient(lgrr);
  await assert.rejects(c.report("m", 4, T0), (e: LdpClientError) => e.parameter === "value");
  await assert.rejects(c.report("m", 1, 1.5), (e: LdpClientError) => e.parameter === "ts");
  await assert.rejects(c.report(7 as unknown as string, 1, T0), (e: LdpClientError) => e.parameter === "metric");
  // The default period is a day, as the server's.
  assert.equal(new LongitudinalClient({ ...lgrr, period: undefined }).periodMs, DAY);
});

test("messages carry ts and the longitudinal fingerprint; the report has the composed kind's format", async () => {
  const c = new LongitudinalClient({ ...lgrr, kind: "losue", domain: 10 });
  const m = JSON.parse(await c.json("m", 3, { ts: T0, groups: { country: "fr" } }));
  assert.match(m.report, /^[0-9a-f]{4}$/);
  assert.equal(m.ts, T0);
  assert.equal(m.country, "fr");
  assert.equal(m.fingerprint, c.fingerprint.toString(16).padStart(8, "0"));
  const b = await c.binary("m", 3, { ts: T0 + DAY });
  assert.equal(b[0], 2);
  assert.equal(new DataView(b.buffer).getUint32(1, true), c.fingerprint);
  assert.equal(b.length, 13 + 2);
  // Without a ts the message is stamped with now, and the period is now's.
  const now = new LongitudinalClient(lgrr);
  const stamped = JSON.parse(await now.json("m", 1));
  assert.ok(Number.isSafeInteger(stamped.ts));
  assert.equal(await refusal(now.json("m", 1, { ts: stamped.ts })), "same_period");
});

test("the Node file store: a restart continues from the file, in the Rust store's format", async () => {
  const dir = tempDir();
  const path = join(dir, "memo.json");
  try {
    let store = await NodeFileMemoStore.open(path);
    const a = new LongitudinalClient(lgrr, { store });
    await a.report("b metric", 1, T0);
    await a.report("a \"quoted\"", 3, T0);
    const before = readFileSync(path, "utf8");
    assert.match(before, /^\{"version":1,"metrics":\{"a \\"quoted\\"":\{"version":1,"kind":"lgrr",/);
    assert.ok(before.endsWith("}}\n"));
    await store.close();
    store = await NodeFileMemoStore.open(path);
    assert.deepEqual(store.metrics(), ["a \"quoted\"", "b metric"]);
    const b = new LongitudinalClient(lgrr, { store });
    assert.equal(await refusal(b.report("b metric", 1, T0 + 1)), "same_period", "the period survives the restart");
    await b.report("b metric", 1, T0 + DAY);
    const memo = JSON.parse(store.load("b metric")!);
    assert.deepEqual(memo.values, JSON.parse(before).metrics["b metric"].values, "the memo survives the restart");
    assert.equal(memo.reports, 2);
    await store.close();
    assert.ok(!existsSync(`${path}.lock`), "close releases the lock");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the Node file store: a damaged file is an error naming it, never a fresh start", async () => {
  const dir = tempDir();
  const path = join(dir, "memo.json");
  try {
    for (const text of [
      '{"version":1,"metrics":{"a":{"version":1}}}',
      '{"version":2,"metrics":{}}',
      '{"version":1}',
      '{"version":1,"metrics":{},"x":1}',
      '{"version":1,"metrics":{"a"',
      "",
    ]) {
      writeFileSync(path, text);
      await assert.rejects(NodeFileMemoStore.open(path), (e: Error) => e.message.includes(path) && /epsilon_perm again/.test(e.message), text);
      assert.equal(readFileSync(path, "utf8"), text, "left as it was");
      assert.ok(!existsSync(`${path}.lock`), "no lock left behind");
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the Node file store: one client at a time, a crashed holder's lock is taken over", async () => {
  const dir = tempDir();
  const path = join(dir, "memo.json");
  try {
    const held = await NodeFileMemoStore.open(path);
    await assert.rejects(NodeFileMemoStore.open(path), /another client/);
    await held.close();
    await assert.rejects(async () => held.load("m"), /closed/);
    // A lock file whose process is gone (pid 2^22 + 1 is above Linux's pid_max default).
    writeFileSync(`${path}.lock`, String(2 ** 22 + 1));
    const next = await NodeFileMemoStore.open(path);
    await next.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the Node file store: a failed save leaves the file and the store as they were", async () => {
  const dir = tempDir();
  const sub = join(dir, "gone");
  try {
    const { mkdirSync } = await import("node:fs");
    mkdirSync(sub);
    const path = join(sub, "memo.json");
    const store = await NodeFileMemoStore.open(path);
    const [first, second] = [0, 1].map((reports) => memoToJson({ ...emptyMemo("lgrr", 1, DAY), reports }));
    await store.save("a", first);
    // The directory is replaced by a file: the temporary file cannot be made.
    rmSync(sub, { recursive: true });
    writeFileSync(sub, "");
    await assert.rejects(store.save("a", second), (e: Error) => e.message.includes(path));
    assert.equal(store.load("a"), first);
    await store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** window.localStorage's behaviour for the two methods the store uses. */
class FakeStorage {
  readonly items = new Map<string, string>();
  getItem(key: string): string | null {
    return this.items.get(key) ?? null;
  }
  setItem(key: string, value: string): void {
    this.items.set(key, String(value));
  }
}

test("the localStorage store: a reload continues from the storage; a damaged entry names its key", async () => {
  const storage = new FakeStorage();
  const c = new LongitudinalClient(lgrr, { store: new LocalStorageMemoStore({ storage }) });
  await c.report("m", 2, T0);
  assert.deepEqual([...storage.items.keys()], ["ldpstream-memo:m"]);
  // A new page: a new client and a new store over the same storage.
  const again = new LongitudinalClient(lgrr, { store: new LocalStorageMemoStore({ storage }) });
  assert.equal(await refusal(again.report("m", 2, T0 + 1)), "same_period");
  await again.report("m", 2, T0 + DAY);
  assert.equal(JSON.parse(storage.getItem("ldpstream-memo:m")!).reports, 2);
  storage.setItem("ldpstream-memo:m", "{not json");
  await assert.rejects(
    again.report("m", 2, T0 + 2 * DAY),
    (e: Error) => e instanceof LdpMemoStoreError && e.message.includes('"ldpstream-memo:m"') && /epsilon_perm again/.test(e.message),
  );
  assert.equal(storage.getItem("ldpstream-memo:m"), "{not json", "left as it was");
  assert.throws(() => new LocalStorageMemoStore(), /no localStorage/);
});
