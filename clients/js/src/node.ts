// @ldpstream/client/node: the durable memo store for Node, kept out of the main entry point
// so that the browser bundle holds no `node:` import.
//
// One JSON file holds every metric's memo, in the format of the Rust and Python file store
// (`{"version":1,"metrics":{"<metric>":<memo>,…}}`, metrics in UTF-8 byte order), replaced
// atomically on every save: a temporary file, fsync, rename, then an fsync of the
// directory, so a crash leaves the memos as they were before the save or after it, never
// half of them. The file holds the device's true values and their memos: as sensitive as
// the values, never to be uploaded, synced or backed up off the device. A file that does
// not read back is an error naming it, never a fresh start (which would spend epsilon_perm
// again per value).

import { closeSync, lstatSync, openSync, readFileSync, realpathSync, unlinkSync, writeSync } from "node:fs";
import { open, readFile, realpath, rename, unlink } from "node:fs/promises";
import { dirname } from "node:path";
import { randomBytes } from "node:crypto";

import { MemoStore, memoFromJson, memoToJson } from "./memo.js";

/** The file format version this client reads and writes. */
export const MEMO_FILE_VERSION = 1;

/** Why a `NodeFileMemoStore` failed; the client passes it on as the `cause` of an `LdpMemoStoreError`. */
export type MemoFileErrorReason = "path" | "locked" | "lock_failed" | "unreadable" | "damaged" | "save_failed" | "closed";
// "path": the path (or a metric name) is not usable; a memo text that does not read back
// is a `MemoFormatError` (from the main entry point), thrown before anything is written.

/** The file store failed: `reason` says how, `path` names the file. Nothing was changed. */
export class MemoFileError extends Error {
  readonly path: string;
  readonly reason: MemoFileErrorReason;

  constructor(path: string, reason: MemoFileErrorReason, message: string) {
    super(message);
    this.name = "MemoFileError";
    this.path = path;
    this.reason = reason;
  }
}

const utf8 = new TextEncoder();

/** Metric names in UTF-8 byte order, as the Rust store's BTreeMap<String, _> keeps them. */
function byteOrder(a: string, b: string): number {
  const [x, y] = [utf8.encode(a), utf8.encode(b)];
  for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
}

function parseFile(text: string): Map<string, string> {
  let top: unknown;
  try {
    top = JSON.parse(text);
  } catch (e) {
    throw new Error((e as Error).message);
  }
  if (top === null || typeof top !== "object" || Array.isArray(top)) throw new Error("not a JSON object");
  const o = top as Record<string, unknown>;
  if (o.version !== MEMO_FILE_VERSION) throw new Error(`version ${JSON.stringify(o.version)}, expected ${MEMO_FILE_VERSION}`);
  const metrics = o.metrics;
  if (metrics === null || typeof metrics !== "object" || Array.isArray(metrics)) throw new Error('no "metrics" object');
  const extra = Object.keys(o).find((k) => k !== "version" && k !== "metrics");
  if (extra !== undefined) throw new Error(`unknown key ${JSON.stringify(extra)}`);
  const out = new Map<string, string>();
  for (const [name, memo] of Object.entries(metrics as Record<string, unknown>)) {
    try {
      // Kept in canonical form: what a save writes back is what the Rust store would.
      out.set(name, memoToJson(memoFromJson(memo)));
    } catch (e) {
      throw new Error(`metric ${JSON.stringify(name)}: ${(e as Error).message}`);
    }
  }
  return out;
}

function render(metrics: Map<string, string>): string {
  const names = [...metrics.keys()].sort(byteOrder);
  return `{"version":${MEMO_FILE_VERSION},"metrics":{${names.map((n) => `${JSON.stringify(n)}:${metrics.get(n)}`).join(",")}}}\n`;
}

/** Is the process with this id running (a lock left by a crashed one is not held)? */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Takes `<path>.lock`, a file holding this process's id: two clients sharing one memo
 * file would each draw their own memos. A lock whose process is gone (a crash) is taken over.
 */
function takeLock(lock: string, shown: string): void {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(lock, "wx", 0o600);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") {
        throw new MemoFileError(shown, "lock_failed", `memo store ${shown}: cannot create its lock file ${lock}: ${(e as Error).message}`);
      }
    }
    let holder = NaN;
    try {
      holder = Number(readFileSync(lock, "utf8").trim());
    } catch {
      // Removed meanwhile: try again.
    }
    if (Number.isSafeInteger(holder) && holder > 0 && alive(holder)) {
      const who = holder === process.pid ? "this process" : `process ${holder}`;
      throw new MemoFileError(
        shown,
        "locked",
        `memo store ${shown} is open in another client (${who} holds its lock file ${lock}): two clients sharing one memo would each draw their own memos`,
      );
    }
    try {
      unlinkSync(lock);
    } catch {
      // Another process took it over first; the next attempt says who holds it.
    }
  }
  throw new MemoFileError(shown, "locked", `memo store ${shown}: its lock file ${lock} is being taken by another client`);
}

/** A memo store in one file, for Node. `await NodeFileMemoStore.open(path)`; `close()` releases it. */
export class NodeFileMemoStore implements MemoStore {
  readonly path: string;
  readonly #lock: string;
  #metrics: Map<string, string>;
  #closed = false;
  // The tail of the saves: each writes the memos as the one before it left them, so two
  // saves at once (two clients on this store, or a caller not awaiting) lose neither.
  #writes: Promise<unknown> = Promise.resolve();

  private constructor(path: string, lock: string, metrics: Map<string, string>) {
    this.path = path;
    this.#lock = lock;
    this.#metrics = metrics;
  }

  /**
   * Opens (or, if absent, starts) the store at `path` and locks it for this client. A file
   * that does not read back throws an error naming the path; it is never replaced.
   */
  static async open(path: string): Promise<NodeFileMemoStore> {
    if (typeof path !== "string" || path.length === 0 || path.includes("\0")) {
      // `${undefined}.lock` would be a lock file named "undefined.lock" in the working directory.
      throw new MemoFileError(String(path), "path", `memo store: the path must be a non-empty string naming a file, not ${JSON.stringify(path) ?? String(path)}`);
    }
    // Beside the file a symlink points to, as the saves replace that file: a client opening
    // it through a link and one through its real path must meet at one lock.
    let locked = path;
    try {
      if (lstatSync(path).isSymbolicLink()) locked = realpathSync(path);
    } catch {
      // Absent, or a dangling link: the lock goes beside the path given.
    }
    const lock = `${locked}.lock`;
    takeLock(lock, path);
    try {
      let text: string | null = null;
      try {
        text = await readFile(path, "utf8");
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "ENOENT") {
          throw new MemoFileError(path, "unreadable", `memo store ${path}: cannot read it: ${(e as Error).message}`);
        }
      }
      let metrics = new Map<string, string>();
      if (text !== null) {
        try {
          metrics = parseFile(text);
        } catch (e) {
          throw new MemoFileError(
            path,
            "damaged",
            `memo store ${path} does not read back (${(e as Error).message}); restore it from the device's own backup: deleting it makes every value spend epsilon_perm again`,
          );
        }
      }
      return new NodeFileMemoStore(path, lock, metrics);
    } catch (e) {
      try {
        unlinkSync(lock);
      } catch {
        // The error that matters is the one thrown below.
      }
      throw e;
    }
  }

  /** The metrics the store holds a memo for. */
  metrics(): string[] {
    return [...this.#metrics.keys()].sort(byteOrder);
  }

  load(metric: string): string | null {
    this.#open();
    return this.#metrics.get(metric) ?? null;
  }

  /**
   * Durable when it resolves; on an error the file and this store are as before. Saves run
   * one after the other in call order, each over the memos the one before it left.
   */
  save(metric: string, text: string): Promise<void> {
    let canonical: string;
    try {
      this.#open();
      if (typeof metric !== "string") throw new MemoFileError(this.path, "path", `memo store ${this.path}: the metric must be a string, not ${typeof metric}`);
      // What a save writes must read back: one bad text would make the whole file unreadable.
      canonical = memoToJson(memoFromJson(text));
    } catch (e) {
      return Promise.reject(e);
    }
    const run = this.#writes.then(async () => {
      const next = new Map(this.#metrics).set(metric, canonical);
      await writeAtomically(this.path, render(next));
      this.#metrics = next;
    });
    this.#writes = run.catch(() => undefined);
    return run;
  }

  /** Waits for the saves under way, then releases the lock; the store refuses loads and saves after it. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#writes;
    await unlink(this.#lock).catch(() => undefined);
  }

  #open(): void {
    if (this.#closed) throw new MemoFileError(this.path, "closed", `memo store ${this.path} is closed`);
  }
}

/**
 * Temporary file beside the target, fsync, rename over it, fsync the directory. A symlink
 * is followed, as the Rust store's atomic write follows it: the file it points to is
 * replaced and the link stays (renaming over the link would leave the real file behind,
 * and the next start, through the link, would read memos without the newer values).
 */
async function writeAtomically(link: string, text: string): Promise<void> {
  let path = link;
  try {
    path = await realpath(link);
  } catch (e) {
    // A new file (or a dangling link, which the rename replaces): written at the path given.
    if ((e as NodeJS.ErrnoException).code !== "ENOENT") {
      throw new MemoFileError(link, "save_failed", `memo store ${link}: cannot save: ${(e as Error).message}`);
    }
  }
  const temp = `${path}.tmp-${process.pid}-${randomBytes(6).toString("hex")}`;
  let renamed = false;
  try {
    const file = await open(temp, "wx", 0o600);
    try {
      await file.writeFile(text, "utf8");
      await file.sync();
    } finally {
      await file.close();
    }
    await rename(temp, path);
    renamed = true;
    // The rename is durable only once the directory is; Windows cannot open a directory.
    if (process.platform !== "win32") {
      const dir = await open(dirname(path), "r");
      try {
        await dir.sync();
      } finally {
        await dir.close();
      }
    }
  } catch (e) {
    if (!renamed) await unlink(temp).catch(() => undefined);
    throw new MemoFileError(link, "save_failed", `memo store ${link}: cannot save: ${(e as Error).message}`);
  }
}
