// The memo stores used carelessly: two clients over one store, saves not awaited, a
// directory or nothing where the file should be, a damaged file or a memo that parses but
// that the mechanism could not have drawn, a text that is not a memo, absurd options.
// Each is a typed error naming what is wrong (or works), and none changes a memo or lets
// a second report out in a period.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import {
  IndexedDBMemoStore,
  InMemoryMemoStore,
  LdpClientError,
  LdpMemoStoreError,
  LdpRefusal,
  LocalStorageMemoStore,
  LongitudinalClient,
  LongitudinalConfig,
  MemoFormatError,
  MemoStore,
} from "../src/index.js";
import { MemoFileError, NodeFileMemoStore } from "../src/node.js";

const DAY = 86_400_000;
const losue: LongitudinalConfig = { kind: "losue", epsilon_perm: 2, epsilon_1: 1, domain: 12, period: "1d" };
const lgrr: LongitudinalConfig = { kind: "lgrr", epsilon_perm: 2, epsilon_1: 1, domain: 4, period: "1d" };

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), "ldp-memo-misuse-"));
}

test("two clients over one store take turns: one report per period, one memo per value", async () => {
  const dir = tempDir();
  try {
    const stores: MemoStore[] = [new InMemoryMemoStore(), await NodeFileMemoStore.open(join(dir, "memo.json"))];
    for (const store of stores) {
      const [a, b] = [new LongitudinalClient(losue, { store }), new LongitudinalClient(losue, { store })];
      const settled = await Promise.allSettled([a.report("m", 1, 0), b.report("m", 1, 0)]);
      assert.deepEqual(
        settled.map((s) => (s.status === "fulfilled" ? "report" : (s.reason as LdpRefusal).code)),
        ["report", "same_period"],
      );
      // The next period, at once again: the memo both draw from is the one stored.
      const memo = JSON.parse((await store.load("m"))!);
      await Promise.allSettled([a.report("m", 1, DAY), b.report("m", 1, DAY)]);
      const after = JSON.parse((await store.load("m"))!);
      assert.deepEqual(after.values, memo.values);
      assert.equal(after.reports, 2);
    }
    // Two metrics of one device at once, through two clients over one file: both kept.
    const file = stores[1] as NodeFileMemoStore;
    const c = new LongitudinalClient(lgrr, { store: file });
    const d = new LongitudinalClient(losue, { store: file });
    await Promise.all([c.report("lang", 1, 0), d.report("apps", 1, 0)]);
    assert.deepEqual(Object.keys(JSON.parse(readFileSync(file.path, "utf8")).metrics), ["apps", "lang", "m"]);
    await file.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the Node file store: saves not awaited are all kept, in call order", async () => {
  const dir = tempDir();
  try {
    const path = join(dir, "memo.json");
    const store = await NodeFileMemoStore.open(path);
    const source = new InMemoryMemoStore();
    const texts: string[] = [];
    for (const [i, metric] of ["a", "b", "c"].entries()) {
      const c = new LongitudinalClient(lgrr, { store: source });
      await c.report(metric, i, 0);
      texts.push(source.load(metric)!);
    }
    await Promise.all([store.save("a", texts[0]), store.save("b", texts[1]), store.save("c", texts[2]), store.save("a", texts[1])]);
    const metrics = JSON.parse(readFileSync(path, "utf8")).metrics;
    assert.deepEqual(Object.keys(metrics), ["a", "b", "c"]);
    assert.deepEqual(metrics.a, JSON.parse(texts[1]), "the last save of a metric wins");
    await store.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the Node file store: a directory, no path, a missing directory, a damaged file: typed errors, nothing left behind", async () => {
  const dir = tempDir();
  try {
    const reason = (r: string) => (e: unknown) => e instanceof MemoFileError && e.reason === r;
    mkdirSync(join(dir, "memo.json"));
    await assert.rejects(NodeFileMemoStore.open(join(dir, "memo.json")), reason("unreadable"));
    assert.ok(!existsSync(join(dir, "memo.json.lock")), "no lock left behind");
    for (const path of ["", undefined, null, 7, "a\0b"]) {
      await assert.rejects(NodeFileMemoStore.open(path as unknown as string), reason("path"), String(path));
    }
    assert.ok(!existsSync("undefined.lock") && !existsSync(".lock"));
    await assert.rejects(NodeFileMemoStore.open(join(dir, "gone", "memo.json")), reason("lock_failed"));
    const path = join(dir, "torn.json");
    const whole = '{"version":1,"metrics":{}}\n';
    for (const text of [whole.slice(0, 20), "", "\u0000\u0000\u0000", "[]", "null"]) {
      writeFileSync(path, text);
      await assert.rejects(NodeFileMemoStore.open(path), reason("damaged"), JSON.stringify(text));
      assert.equal(readFileSync(path, "utf8"), text, "left as it was");
    }
    writeFileSync(path, whole);
    const store = await NodeFileMemoStore.open(path);
    await store.close();
    await assert.rejects(store.save("m", "{}"), reason("closed"));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the Node file store follows a symlink: the file it points to is replaced, the link stays, one lock", async () => {
  const dir = tempDir();
  try {
    mkdirSync(join(dir, "persist"));
    const target = join(dir, "persist", "memo.json");
    writeFileSync(target, '{"version":1,"metrics":{}}\n');
    const link = join(dir, "memo.json");
    symlinkSync(target, link);
    const store = await NodeFileMemoStore.open(link);
    await new LongitudinalClient(lgrr, { store }).report("m", 1, 0);
    await store.close();
    assert.ok(lstatSync(link).isSymbolicLink(), "the link stays a link");
    assert.deepEqual(Object.keys(JSON.parse(readFileSync(target, "utf8")).metrics), ["m"]);
    // Through the link and through the real path it is one store, with one lock.
    const held = await NodeFileMemoStore.open(link);
    await assert.rejects(NodeFileMemoStore.open(target), (e: unknown) => e instanceof MemoFileError && e.reason === "locked");
    await held.close();
    const again = await NodeFileMemoStore.open(target);
    await assert.rejects(NodeFileMemoStore.open(link), (e: unknown) => e instanceof MemoFileError && e.reason === "locked");
    await again.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a store refuses to save a text that is not a memo, and writes nothing", async () => {
  const dir = tempDir();
  try {
    const path = join(dir, "memo.json");
    const store = await NodeFileMemoStore.open(path);
    for (const text of ["{}", "not json", '{"version":1}']) {
      await assert.rejects(store.save("m", text), (e: unknown) => e instanceof MemoFormatError, text);
    }
    await assert.rejects(store.save(5 as unknown as string, "{}"), (e: unknown) => e instanceof MemoFileError);
    assert.ok(!existsSync(path), "nothing written");
    await store.close();
    const items = new Map<string, string>();
    const storage = { getItem: (k: string) => items.get(k) ?? null, setItem: (k: string, v: string) => void items.set(k, v) };
    assert.throws(() => new LocalStorageMemoStore({ storage }).save("m", "{}"), MemoFormatError);
    assert.equal(items.size, 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a memo that parses but that the mechanism could not have drawn is an LdpMemoStoreError, not a report", async () => {
  const fingerprint = (c: LongitudinalConfig) => new LongitudinalClient(c).fingerprint.toString(16).padStart(8, "0");
  const memo = (c: LongitudinalConfig, values: [number, number | string][], lastReport: number | string | null = null) =>
    JSON.stringify({
      version: 1,
      kind: c.kind,
      fingerprint: fingerprint(c),
      period_ms: DAY,
      values,
      last_period: null,
      last_report: lastReport,
      stopped: false,
      reports: 0,
    });
  const cases: [LongitudinalConfig, string, string][] = [
    [lgrr, memo(lgrr, [[9, 1]]), "value 9"],
    [lgrr, memo(lgrr, [[1, 4]]), "the memo of value 1"],
    [lgrr, memo(lgrr, [[1, "01"]]), "the memo of value 1"],
    [lgrr, memo(lgrr, [], 7), "last_report"],
    [losue, memo(losue, [[1, "0010"]]), "the memo of value 1"], // bit 12 of d = 12
    [losue, memo(losue, [[1, "00"]]), "the memo of value 1"],
    [losue, memo(losue, [[1, 3]]), "the memo of value 1"],
  ];
  for (const [config, text, what] of cases) {
    const store = new InMemoryMemoStore();
    store.save("m", text);
    const c = new LongitudinalClient(config, { store });
    await assert.rejects(
      c.report("m", 1, 0),
      (e: Error) => e instanceof LdpMemoStoreError && e.message.includes(what) && /does not read back/.test(e.message),
      text,
    );
    assert.equal(store.load("m"), text, "nothing drawn or saved");
    await c.reset("m");
    await c.report("m", 1, 0);
  }
  // d = 16: the top bit of the second byte is a category, not padding.
  const wide = { ...losue, domain: 16 };
  const store = new InMemoryMemoStore();
  store.save("m", memo(wide, [[1, "ff80"]]));
  await new LongitudinalClient(wide, { store }).report("m", 1, 0);
});

test("options that are not options, and a store that is not a store, are refused naming them", () => {
  const named = (f: () => unknown, parameter: string) =>
    assert.throws(f, (e: unknown) => e instanceof LdpClientError && e.parameter === parameter, parameter);
  named(() => new LongitudinalClient(lgrr, null as unknown as object), "options");
  named(() => new LongitudinalClient(lgrr, { store: {} as MemoStore }), "store");
  named(() => new LongitudinalClient(lgrr, { store: { load: () => null, save: 1 } as unknown as MemoStore }), "store");
  named(() => new LongitudinalClient(lgrr, { maxMemoizedValues: 1e12 }), "maxMemoizedValues");
  named(() => new LongitudinalClient(lgrr, { maxMemoizedValues: NaN }), "maxMemoizedValues");
  named(() => new LongitudinalClient({ ...lgrr, period: "0s" }), "period");
  named(() => new LongitudinalClient({ ...lgrr, epsilon_perm: 0.5, epsilon_1: 1 }), "epsilon_1");
  // Node has neither localStorage nor indexedDB.
  named(() => new LocalStorageMemoStore(), "storage");
  named(() => new LocalStorageMemoStore({ storage: {} as never }), "storage");
});

test("IndexedDBMemoStore.open without an IDBFactory is refused naming it", async () => {
  await assert.rejects(IndexedDBMemoStore.open(), (e: unknown) => e instanceof LdpClientError && e.parameter === "factory");
});
