// A device's client of a longitudinal kind (lgrr, losue, lsue): one report per metric per
// period, each drawn from the memo of the value the device holds, with the memos in a
// store the device owns. The order of its steps is the portable spec every client follows
// (conformance/README.md, "Longitudinal"); the Rust `Device` and the Python `client()` are
// the same state machine.

import { checkInput, LongitudinalConfig } from "./config.js";
import { encodeBinary, encodeJson, MessageOptions } from "./encode.js";
import { LdpClientError } from "./errors.js";
import { fingerprint } from "./fingerprint.js";
import { asReport, checkResponse, memoize, PreparedLongitudinal, prepareLongitudinal, reportFrom } from "./longitudinal.js";
import { Report } from "./mechanisms.js";
import { emptyMemo, InMemoryMemoStore, MemoStore, memoFromJson, memoToJson, MetricMemo, Response } from "./memo.js";
import { CryptoSource, WordSource } from "./source.js";

export const DEFAULT_MAX_MEMOIZED_VALUES = 16;
/** The most memory `maxMemoizedValues` × ⌈d/8⌉ may ask a device to keep per metric. */
export const MAX_MEMO_BYTES = 64 * 2 ** 20;

/** The device's own options (none of them is the server's business). */
export interface LongitudinalOptions {
  /** Where the memos live; an in-memory store if absent (tests and simulations only). */
  store?: MemoStore;
  /** The most distinct values a metric may memoize (default 16); a new value past it stops the metric. */
  maxMemoizedValues?: number;
  /**
   * A second report in one period: "refuse" (the default: the server counts every message,
   * so a second one would count the device twice) or "repeat" (the first report's bytes
   * again, for resending a message that was never delivered).
   */
  samePeriod?: "refuse" | "repeat";
}

/** The refusals' codes, as in conformance/README.md and the other clients. */
export type RefusalCode = "same_period" | "clock_went_back" | "memo_full" | "stopped" | "memo_mismatch";

/** The device did not report, by the rules of the longitudinal kinds; `code` names the rule. */
export class LdpRefusal extends Error {
  readonly code: RefusalCode;
  readonly metric: string;

  constructor(code: RefusalCode, metric: string, why: string) {
    super(`${code}: metric ${JSON.stringify(metric)}: ${why}`);
    this.name = "LdpRefusal";
    this.code = code;
    this.metric = metric;
  }
}

/** The memo store failed to load or save, or held a memo that does not read back: no report. */
export class LdpMemoStoreError extends Error {
  readonly metric: string;
  /** The store's own error, if it threw one. */
  readonly cause: unknown;

  constructor(metric: string, message: string, cause?: unknown) {
    super(`metric ${JSON.stringify(metric)}: the memo store failed: ${message}`);
    this.name = "LdpMemoStoreError";
    this.metric = metric;
    this.cause = cause;
  }
}

/**
 * The key of the method that reports from a caller's words. Not exported from the package
 * (a replayable source would be a seed option, which defeats local privacy): the
 * conformance replay imports it from this module.
 */
export const REPLAY: unique symbol = Symbol("ldpstream replay");

let shared: CryptoSource | undefined;

/**
 * Per store object, the tail of the reports run on it. Every client sharing a store (two
 * metrics of one device, two clients built over one file) takes its turn here: a report
 * loads, saves and saves again with awaits between them, and two interleaved ones would
 * both see the period free, or each save a memo map without the other's new memo.
 */
const turns = new WeakMap<MemoStore, Promise<unknown>>();

/** The period index ⌊ts / period⌋, rounding down before 1970 too, exactly (integers). */
export function periodOf(tsMs: number, periodMs: number): number {
  const [t, p] = [BigInt(tsMs), BigInt(periodMs)];
  const q = t / p; // truncates toward zero
  return Number(t % p !== 0n && t < 0n ? q - 1n : q);
}

/** One device's client of a longitudinal mechanism; every draw is `crypto.getRandomValues`. */
export class LongitudinalClient {
  readonly config: LongitudinalConfig;
  readonly domain: number;
  /** The fingerprint every message carries (covers the kind, both ε, d and the period). */
  readonly fingerprint: number;
  readonly periodMs: number;
  readonly maxMemoizedValues: number;
  readonly samePeriod: "refuse" | "repeat";
  readonly #m: PreparedLongitudinal;
  readonly #store: MemoStore;

  /** Throws `LdpClientError` naming a parameter the server (or the device's limits) would refuse. */
  constructor(config: LongitudinalConfig, options: LongitudinalOptions = {}) {
    if (options === null || typeof options !== "object") {
      throw new LdpClientError("options", options, "an object of LongitudinalOptions (or nothing)");
    }
    if (config === null || typeof config !== "object" || !["lgrr", "losue", "lsue"].includes(config.kind)) {
      throw new LdpClientError("kind", config?.kind, "lgrr, losue or lsue (the one-shot kinds use Randomizer)");
    }
    this.#m = prepareLongitudinal(config);
    this.config = config;
    this.domain = this.#m.domain;
    this.periodMs = this.#m.periodMs;
    this.fingerprint = fingerprint(config);
    const perValue = Math.max(Math.ceil(this.domain / 8), 4);
    const cap = options.maxMemoizedValues ?? DEFAULT_MAX_MEMOIZED_VALUES;
    if (!Number.isInteger(cap) || cap < 1 || cap * perValue > MAX_MEMO_BYTES) {
      throw new LdpClientError(
        "maxMemoizedValues",
        cap,
        `an integer from 1 to ${Math.floor(MAX_MEMO_BYTES / perValue)} at d = ${this.domain} (each memo takes ${perValue} bytes, a metric's at most ${MAX_MEMO_BYTES})`,
      );
    }
    this.maxMemoizedValues = cap;
    const same = options.samePeriod ?? "refuse";
    if (same !== "refuse" && same !== "repeat") throw new LdpClientError("samePeriod", same, '"refuse" or "repeat"');
    this.samePeriod = same;
    const store: MemoStore = options.store ?? new InMemoryMemoStore();
    if (
      store === null ||
      typeof store !== "object" ||
      typeof store.load !== "function" ||
      typeof store.save !== "function" ||
      (store.exclusive !== undefined && typeof store.exclusive !== "function")
    ) {
      throw new LdpClientError("store", store, "a MemoStore: an object with load(metric) and save(metric, text) methods");
    }
    this.#store = store;
  }

  /** The report of category `value` for `metric` at event time `ts` (ms since the epoch; default now). */
  report(metric: string, value: number, ts: number = Date.now()): Promise<Report> {
    return this[REPLAY](metric, value, ts, (shared ??= new CryptoSource()));
  }

  /** `report` then the JSON message, stamped with `ts` (default now) and the fingerprint. */
  async json(metric: string, value: number, options: MessageOptions = {}): Promise<string> {
    const ts = options.ts ?? Date.now();
    const report = await this.report(metric, value, ts);
    return encodeJson(report, { ...options, ts, fingerprint: this.fingerprint });
  }

  /** `report` then the binary message, stamped with `ts` (default now) and the fingerprint. */
  async binary(metric: string, value: number, options: MessageOptions = {}): Promise<Uint8Array> {
    const ts = options.ts ?? Date.now();
    const report = await this.report(metric, value, ts);
    return encodeBinary(report, { ...options, ts, fingerprint: this.fingerprint });
  }

  /**
   * Forgets `metric`'s memo and starts a new one under this mechanism: every value reported
   * again spends epsilon_perm again. For a changed mechanism (`memo_mismatch`) or a
   * deliberate fresh start; the period rule carries over.
   */
  reset(metric: string): Promise<void> {
    return this.#serialized(async () => {
      const text = await this.#call(metric, () => this.#store.load(metric));
      let lastPeriod: number | null = null;
      if (text !== null) {
        try {
          lastPeriod = memoFromJson(text).lastPeriod;
        } catch {
          // A damaged memo is exactly what a reset replaces; its period is lost with it.
        }
      }
      const memo = this.#empty();
      memo.lastPeriod = lastPeriod;
      await this.#save(metric, memo);
    });
  }

  /** `report` with a caller's words: the conformance replay only. */
  [REPLAY](metric: string, value: number, ts: number, source: WordSource): Promise<Report> {
    return this.#serialized(() => this.#report(metric, value, ts, source));
  }

  #serialized<T>(inner: () => Promise<T>): Promise<T> {
    const store = this.#store;
    const f = store.exclusive === undefined ? inner : () => store.exclusive!(inner);
    const run = (turns.get(store) ?? Promise.resolve()).then(f, f);
    turns.set(
      store,
      run.catch(() => undefined),
    );
    return run;
  }

  async #report(metric: string, value: number, ts: number, source: WordSource): Promise<Report> {
    if (typeof metric !== "string") throw new LdpClientError("metric", metric, "a string naming the metric");
    checkInput(value, this.domain);
    if (!Number.isSafeInteger(ts)) throw new LdpClientError("ts", ts, "integer milliseconds since the epoch");
    const period = periodOf(ts, this.periodMs);
    const memo = await this.#load(metric);
    if (memo.stopped) {
      throw new LdpRefusal("stopped", metric, `stopped after its values passed maxMemoizedValues = ${this.maxMemoizedValues}; the device no longer reports it`);
    }
    if (memo.lastPeriod !== null && period === memo.lastPeriod) {
      if (this.samePeriod === "repeat" && memo.lastReport !== null) {
        return asReport(this.#m, checkResponse(this.#m, memo.lastReport, "last_report"));
      }
      throw new LdpRefusal("same_period", metric, `already reported in period ${period} (samePeriod = "refuse"): a device reports a metric at most once per period`);
    }
    if (memo.lastPeriod !== null && period < memo.lastPeriod) {
      throw new LdpRefusal(
        "clock_went_back",
        metric,
        `ts is in period ${period}, before the last report's period ${memo.lastPeriod}: the device's clock went back, and a second report in a period already reported would be counted twice`,
      );
    }
    let first = memo.values.get(value);
    if (first === undefined) {
      if (memo.values.size >= this.maxMemoizedValues) {
        memo.stopped = true;
        await this.#save(metric, memo);
        throw new LdpRefusal(
          "memo_full",
          metric,
          `value ${value} would be distinct value number ${memo.values.size + 1}, past maxMemoizedValues = ${this.maxMemoizedValues}; every new value spends epsilon_perm, so the device stops reporting this metric`,
        );
      }
      first = memoize(this.#m, value, source);
      memo.values.set(value, first);
      // Saved before round 2 is drawn: a crash now loses this report, never the memo
      // (which would be redrawn, spending epsilon_perm again).
      await this.#save(metric, memo);
    }
    const report = reportFrom(this.#m, checkResponse(this.#m, first, `the memo of value ${value}`), source);
    memo.lastPeriod = period;
    memo.lastReport = report;
    memo.reports += 1;
    // Saved before the report is returned: a crash now loses this report, never lets a
    // second one out in the same period.
    await this.#save(metric, memo);
    return asReport(this.#m, report);
  }

  #empty(): MetricMemo {
    return emptyMemo(this.config.kind, this.fingerprint, this.periodMs);
  }

  async #load(metric: string): Promise<MetricMemo> {
    const text = await this.#call(metric, () => this.#store.load(metric));
    if (text === null || text === undefined) return this.#empty();
    let memo: MetricMemo;
    try {
      memo = memoFromJson(text);
    } catch (e) {
      throw new LdpMemoStoreError(
        metric,
        `its memo does not read back (${(e as Error).message}); restore it from the device's own backup: a reset makes every value spend epsilon_perm again`,
        e,
      );
    }
    if (memo.fingerprint !== this.fingerprint || memo.kind !== this.config.kind) {
      const hex = (f: number) => f.toString(16).padStart(8, "0");
      throw new LdpRefusal(
        "memo_mismatch",
        metric,
        `its memo was drawn under another mechanism (${memo.kind}, fingerprint ${hex(memo.fingerprint)}; this client runs ${this.config.kind}, ${hex(this.fingerprint)}); a memo is only valid under the law it was drawn from. reset(metric) starts a new memo, which spends epsilon_perm again for every value`,
      );
    }
    const damage = this.#damage(memo);
    if (damage !== null) {
      throw new LdpMemoStoreError(
        metric,
        `its memo does not read back (${damage}); restore it from the device's own backup: a reset makes every value spend epsilon_perm again`,
      );
    }
    return memo;
  }

  /**
   * What is wrong with a stored memo of this mechanism, if anything: a value outside the
   * domain, or a response it cannot draw (a category outside the domain; other than
   * ⌈d/8⌉ bytes, or a bit set past d). A damaged store that still parses would otherwise
   * count towards the cap, or send reports the server refuses or, worse, folds.
   */
  #damage(memo: MetricMemo): string | null {
    const d = this.domain;
    for (const v of memo.values.keys()) if (v >= d) return `value ${v} is outside the domain [0, ${d})`;
    const responses: [string, Response][] = [...memo.values].map(([v, r]) => [`the memo of value ${v}`, r]);
    if (memo.lastReport !== null) responses.push(["last_report", memo.lastReport]);
    const bytes = Math.ceil(d / 8);
    for (const [what, r] of responses) {
      const fits =
        typeof r === "number"
          ? this.config.kind === "lgrr" && r < d
          : this.config.kind !== "lgrr" && r.length === bytes && (d % 8 === 0 || r[bytes - 1] >> d % 8 === 0);
      if (!fits) return `${what} is not a ${this.config.kind} response at d = ${d}`;
    }
    return null;
  }

  async #save(metric: string, memo: MetricMemo): Promise<void> {
    const text = memoToJson(memo);
    await this.#call(metric, () => this.#store.save(metric, text));
  }

  async #call<T>(metric: string, f: () => Promise<T> | T): Promise<T> {
    try {
      return await f();
    } catch (e) {
      if (e instanceof LdpMemoStoreError) throw e;
      throw new LdpMemoStoreError(metric, (e as Error)?.message ?? String(e), e);
    }
  }
}

export type { Response };
