// A device's memo for the longitudinal kinds: per metric, the first-round response of every
// value it has held, and what the one-report-per-period rule needs. Its canonical JSON
// (version 1) is the one every client writes (conformance/README.md, "Longitudinal"), so
// the golden cases pin it and a memo moves between clients unchanged.
//
// The memo holds the device's true values as keys: it is as sensitive as the values and
// must never leave the device. Losing it costs privacy instead: a new memo of a value
// spends epsilon_perm again. So a memo that does not read back is an error, never a
// silent fresh start.

/** The memo format version this client reads and writes. */
export const MEMO_VERSION = 1;

/** A first-round response: a category (lgrr) or the packed bits (losue, lsue). */
export type Response = number | Uint8Array;

/** One metric's memo. */
export interface MetricMemo {
  kind: string;
  /** The mechanism's fingerprint: a memo is used only under the law it was drawn from. */
  fingerprint: number;
  periodMs: number;
  /** Value → its first-round response. */
  values: Map<number, Response>;
  /** ⌊ts / period⌋ of the last report, or null before the first. */
  lastPeriod: number | null;
  /** The last report, which `samePeriod: "repeat"` returns again. */
  lastReport: Response | null;
  /** Set when a new value passed `maxMemoizedValues`: the metric is no longer reported. */
  stopped: boolean;
  reports: number;
}

/**
 * Where a client keeps its memos, one canonical JSON text per metric. `save` must be
 * durable when its promise resolves: the client saves a new value's memo before it draws
 * the report's second round, and the period before it returns the report, so that a
 * crash loses at most a report, never a memo (whose redraw would spend epsilon_perm again)
 * and never lets a second report out in one period.
 */
export interface MemoStore {
  load(metric: string): Promise<string | null> | string | null;
  save(metric: string, text: string): Promise<void> | void;
  /**
   * Optional: runs one report's load and saves exclusively across every client sharing the
   * store (e.g. the tabs of one origin). The client already runs its own reports one at a time.
   */
  exclusive?<T>(f: () => Promise<T>): Promise<T>;
}

/**
 * Memos in this object only: a restart draws every memo again, spending epsilon_perm again
 * per value. For tests and simulations; devices use a durable store.
 */
export class InMemoryMemoStore implements MemoStore {
  readonly #memos = new Map<string, string>();

  load(metric: string): string | null {
    return this.#memos.get(metric) ?? null;
  }

  save(metric: string, text: string): void {
    this.#memos.set(metric, text);
  }
}

/** A memo that does not read back: `message` says what is wrong with it. */
export class MemoFormatError extends Error {
  constructor(message: string) {
    super(`not a memo of format version ${MEMO_VERSION}: ${message}`);
    this.name = "MemoFormatError";
  }
}

export function emptyMemo(kind: string, fingerprint: number, periodMs: number): MetricMemo {
  return { kind, fingerprint, periodMs, values: new Map(), lastPeriod: null, lastReport: null, stopped: false, reports: 0 };
}

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function responseJson(r: Response): string {
  return typeof r === "number" ? String(r) : JSON.stringify(hex(r));
}

/** The canonical JSON: one line, no spaces, the keys in the documented order. */
export function memoToJson(memo: MetricMemo): string {
  const values = [...memo.values.entries()].sort(([a], [b]) => a - b);
  return (
    `{"version":${MEMO_VERSION},"kind":${JSON.stringify(memo.kind)},` +
    `"fingerprint":"${memo.fingerprint.toString(16).padStart(8, "0")}","period_ms":${memo.periodMs},` +
    `"values":[${values.map(([v, r]) => `[${v},${responseJson(r)}]`).join(",")}],` +
    `"last_period":${memo.lastPeriod === null ? "null" : memo.lastPeriod},` +
    `"last_report":${memo.lastReport === null ? "null" : responseJson(memo.lastReport)},` +
    `"stopped":${memo.stopped},"reports":${memo.reports}}`
  );
}

const KEYS = ["version", "kind", "fingerprint", "period_ms", "values", "last_period", "last_report", "stopped", "reports"];

function isCount(v: unknown): v is number {
  return Number.isSafeInteger(v) && (v as number) >= 0;
}

function response(v: unknown, what: string): Response {
  if (Number.isInteger(v) && (v as number) >= 0 && (v as number) <= 0xffffffff) return v as number;
  if (typeof v === "string" && v.length > 0 && v.length % 2 === 0 && /^[0-9a-f]+$/.test(v)) {
    const out = new Uint8Array(v.length / 2);
    for (let i = 0; i < out.length; i++) out[i] = parseInt(v.slice(2 * i, 2 * i + 2), 16);
    return out;
  }
  throw new MemoFormatError(`${what} ${JSON.stringify(v)} is neither a category nor lowercase hex of whole bytes`);
}

/** Reads a memo (text or parsed JSON), refusing anything this client would not have written. */
export function memoFromJson(input: string | unknown): MetricMemo {
  let value: unknown = input;
  if (typeof input === "string") {
    try {
      value = JSON.parse(input);
    } catch (e) {
      throw new MemoFormatError((e as Error).message);
    }
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw new MemoFormatError("not a JSON object");
  const o = value as Record<string, unknown>;
  const unknownKey = Object.keys(o).find((k) => !KEYS.includes(k));
  if (unknownKey !== undefined) throw new MemoFormatError(`unknown key ${JSON.stringify(unknownKey)}`);
  const missing = KEYS.find((k) => !(k in o));
  if (missing !== undefined) throw new MemoFormatError(`no ${JSON.stringify(missing)}`);
  if (o.version !== MEMO_VERSION) throw new MemoFormatError(`version ${JSON.stringify(o.version)}`);
  if (typeof o.kind !== "string") throw new MemoFormatError(`kind ${JSON.stringify(o.kind)}`);
  if (typeof o.fingerprint !== "string" || !/^[0-9a-fA-F]{8}$/.test(o.fingerprint)) {
    throw new MemoFormatError(`fingerprint ${JSON.stringify(o.fingerprint)}`);
  }
  if (!isCount(o.period_ms)) throw new MemoFormatError(`period_ms ${JSON.stringify(o.period_ms)}`);
  if (!Array.isArray(o.values)) throw new MemoFormatError("values is not an array");
  const values = new Map<number, Response>();
  let last = -1;
  for (const entry of o.values as unknown[]) {
    if (!Array.isArray(entry) || entry.length !== 2 || !Number.isInteger(entry[0]) || entry[0] < 0 || entry[0] > 0xffffffff) {
      throw new MemoFormatError(`values entry ${JSON.stringify(entry)} is not [value, memo]`);
    }
    if (entry[0] <= last) throw new MemoFormatError(`values not in increasing order at ${entry[0]}`);
    last = entry[0];
    values.set(entry[0], response(entry[1], `the memo of value ${entry[0]}`));
  }
  if (o.last_period !== null && !Number.isSafeInteger(o.last_period)) {
    throw new MemoFormatError(`last_period ${JSON.stringify(o.last_period)}`);
  }
  if (typeof o.stopped !== "boolean") throw new MemoFormatError(`stopped ${JSON.stringify(o.stopped)}`);
  if (!isCount(o.reports)) throw new MemoFormatError(`reports ${JSON.stringify(o.reports)}`);
  return {
    kind: o.kind,
    fingerprint: parseInt(o.fingerprint, 16) >>> 0,
    periodMs: o.period_ms,
    values,
    lastPeriod: o.last_period as number | null,
    lastReport: o.last_report === null ? null : response(o.last_report, "last_report"),
    stopped: o.stopped,
    reports: o.reports,
  };
}
