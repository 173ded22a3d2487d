// The durable memo store for browsers: one localStorage entry per metric, holding the
// memo's canonical JSON. localStorage writes are synchronous and survive a reload or a
// browser restart; they are per origin, and cleared with the site's data (which draws new
// memos: epsilon_perm again per value). The entries hold the device's true values and their
// memos: never copy them off the device.

import { LdpClientError } from "./errors.js";
import { MemoStore, memoFromJson } from "./memo.js";

/** The part of the Web Storage API the store uses (`window.localStorage` has it). */
export interface StorageLike {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
}

interface LockManagerLike {
  request<T>(name: string, callback: () => Promise<T>): Promise<T>;
}

export const DEFAULT_STORAGE_PREFIX = "ldpstream-memo:";

/** Memos in `localStorage` (or another `StorageLike`), under `prefix + metric`. */
export class LocalStorageMemoStore implements MemoStore {
  readonly prefix: string;
  readonly #storage: StorageLike;

  constructor(options: { storage?: StorageLike; prefix?: string } = {}) {
    const storage = options?.storage ?? (globalThis as { localStorage?: StorageLike }).localStorage;
    if (storage === undefined || storage === null || typeof storage.getItem !== "function" || typeof storage.setItem !== "function") {
      throw new LdpClientError(
        "storage",
        storage,
        "a Storage with getItem and setItem: no localStorage here (use NodeFileMemoStore from @ldpstream/client/node in Node)",
      );
    }
    this.#storage = storage;
    this.prefix = options?.prefix ?? DEFAULT_STORAGE_PREFIX;
  }

  /** A memo that does not read back is an error naming its key, never a fresh start. */
  load(metric: string): string | null {
    const key = this.prefix + metric;
    const text = this.#storage.getItem(key);
    if (text === null) return null;
    try {
      memoFromJson(text);
    } catch (e) {
      throw new Error(
        `localStorage key ${JSON.stringify(key)} does not read back (${(e as Error).message}); restore it from the device's own backup: removing it makes every value spend epsilon_perm again`,
      );
    }
    return text;
  }

  /** Throws (quota exceeded, storage disabled) rather than lose the memo: no report then. */
  save(metric: string, text: string): void {
    memoFromJson(text); // a text that would not read back is refused, never stored
    this.#storage.setItem(this.prefix + metric, text);
  }

  /**
   * One report at a time across the origin's tabs, with the Web Locks API where the
   * browser has it: two tabs reporting at once would both see the period free.
   */
  exclusive<T>(f: () => Promise<T>): Promise<T> {
    const locks = (globalThis as { navigator?: { locks?: LockManagerLike } }).navigator?.locks;
    return locks === undefined ? f() : locks.request(`${this.prefix}lock`, f);
  }
}
