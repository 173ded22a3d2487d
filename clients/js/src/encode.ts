import { LdpClientError } from "./errors.js";
import { fingerprintHex } from "./fingerprint.js";
import { Report } from "./mechanisms.js";

/** What goes into a Kafka message beside the report (docs/clients.md, "Kafka messages"). */
export interface MessageOptions {
  /** Event time, integer milliseconds since the epoch. */
  ts?: number;
  /** Group values, in the stream's `columns.group_by` order (the binary layout has no names). */
  groups?: Record<string, string> | Array<[string, string]>;
  /** The stream's column names, if not the defaults. */
  columns?: { report?: string; row?: string; cohort?: string; seed?: string; ts?: string };
  /** The stream's `max_group_value_bytes` (default 128): longer values are refused here. */
  maxGroupValueBytes?: number;
  /** The mechanism fingerprint to stamp (`Randomizer` stamps its own); none if absent. */
  fingerprint?: number;
}

const utf8 = new TextEncoder();

function groupList(options: MessageOptions): Array<[string, Uint8Array, string]> {
  const entries = Array.isArray(options.groups) ? options.groups : Object.entries(options.groups ?? {});
  const limit = options.maxGroupValueBytes ?? 128;
  return entries.map(([name, value]) => {
    if (typeof value !== "string") {
      throw new LdpClientError(`groups.${name}`, value, "a string");
    }
    const bytes = utf8.encode(value);
    if (bytes.length > limit || bytes.length > 0xffff) {
      throw new LdpClientError(`groups.${name}`, value, `at most ${limit} UTF-8 bytes (max_group_value_bytes)`);
    }
    return [name, bytes, value];
  });
}

function checkTs(ts: number | undefined): void {
  if (ts !== undefined && !Number.isSafeInteger(ts)) {
    throw new LdpClientError("ts", ts, "integer milliseconds since the epoch");
  }
}

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The JSON message (`format = "json"`), keys in a fixed order: index (row, cohort, seed), report, ts, groups. */
export function encodeJson(report: Report, options: MessageOptions = {}): string {
  checkTs(options.ts);
  const columns = options.columns ?? {};
  const fields: string[] = [];
  const field = (name: string, value: string) => fields.push(`${JSON.stringify(name)}:${value}`);
  switch (report.kind) {
    case "grr":
    case "matrix":
      field(columns.report ?? "report", String(report.report));
      break;
    case "bitflip":
    case "oue":
      field(columns.report ?? "report", JSON.stringify(hex(report.report)));
      break;
    case "hadamard":
      field(columns.row ?? "row", String(report.row));
      field(columns.report ?? "report", String(report.report));
      break;
    case "cohort":
      field(columns.cohort ?? "cohort", String(report.cohort));
      field(columns.report ?? "report", String(report.report));
      break;
    case "gauss":
    case "laplace":
      // ECMAScript's shortest round-trip decimal of each double: the server parses it back
      // to exactly the grid value (an f32's shortest decimal would not be).
      field(columns.report ?? "report", `[${Array.from(report.report, String).join(",")}]`);
      break;
    case "subset":
      field(columns.report ?? "report", `[${report.report.join(",")}]`);
      break;
    case "olh":
      field(columns.seed ?? "seed", String(report.seed));
      field(columns.report ?? "report", String(report.report));
      break;
  }
  if (options.ts !== undefined) field(columns.ts ?? "ts", String(options.ts));
  for (const [name, , value] of groupList(options)) field(name, JSON.stringify(value));
  if (options.fingerprint !== undefined) field("fingerprint", JSON.stringify(fingerprintHex(options.fingerprint)));
  return `{${fields.join(",")}}`;
}

/**
 * The binary message (`format = "binary"`): little-endian, byte 0 = 1, i64 ts, report,
 * groups; with a fingerprint, byte 0 = 2 and the fingerprint (u32) follows it.
 */
export function encodeBinary(report: Report, options: MessageOptions = {}): Uint8Array {
  const plain = encodeUnstamped(report, options);
  if (options.fingerprint === undefined) return plain;
  const out = new Uint8Array(plain.length + 4);
  out[0] = 2;
  new DataView(out.buffer).setUint32(1, options.fingerprint, true);
  out.set(plain.subarray(1), 5);
  return out;
}

function bodyBytes(report: Report): number {
  switch (report.kind) {
    case "bitflip":
    case "oue":
      return report.report.length;
    case "hadamard":
    case "cohort":
      return 5;
    case "gauss":
    case "laplace":
      return 4 * report.report.length;
    case "subset":
      return 2 + 4 * report.report.length;
    case "olh":
      return 8;
    default:
      return 4;
  }
}

/** The binary subset report's u16 item count caps k (the server refuses such streams). */
const MAX_BINARY_ITEMS = 0xffff;

function encodeUnstamped(report: Report, options: MessageOptions): Uint8Array {
  checkTs(options.ts);
  if (report.kind === "subset" && report.report.length > MAX_BINARY_ITEMS) {
    throw new LdpClientError("k", report.report.length, `at most ${MAX_BINARY_ITEMS} items in a binary message (use format = "json")`);
  }
  const groups = groupList(options);
  const body = bodyBytes(report);
  const size = 9 + body + groups.reduce((n, [, bytes]) => n + 2 + bytes.length, 0);
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  out[0] = 1;
  // i64::MIN says "no event time in the payload".
  view.setBigInt64(1, options.ts === undefined ? -(1n << 63n) : BigInt(options.ts), true);
  switch (report.kind) {
    case "grr":
    case "matrix":
      view.setUint32(9, report.report, true);
      break;
    case "bitflip":
    case "oue":
      out.set(report.report, 9);
      break;
    case "hadamard":
      view.setUint32(9, report.row, true);
      view.setInt8(13, report.report);
      break;
    case "cohort":
      view.setUint32(9, report.cohort, true);
      view.setInt8(13, report.report);
      break;
    case "gauss":
    case "laplace":
      // Exact: every coordinate is on the noise's grid, which f32 holds (STATISTICS.md §1.3.1).
      report.report.forEach((v, j) => view.setFloat32(9 + 4 * j, v, true));
      break;
    case "subset":
      view.setUint16(9, report.report.length, true);
      report.report.forEach((item, j) => view.setUint32(11 + 4 * j, item, true));
      break;
    case "olh":
      view.setUint32(9, report.seed, true);
      view.setUint32(13, report.report, true);
      break;
  }
  let at = 9 + body;
  for (const [, bytes] of groups) {
    view.setUint16(at, bytes.length, true);
    out.set(bytes, at + 2);
    at += 2 + bytes.length;
  }
  return out;
}
