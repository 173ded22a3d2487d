// The transactional memo store for browsers: one IndexedDB database, one record per metric
// holding the memo's canonical JSON. A save resolves when its readwrite transaction has
// completed, asked for "strict" durability (flushed to disk before completing, where the
// browser supports the option), so the client's save-before-draw order holds across a
// crash of the browser. Per origin like localStorage, but without its 5 MB string limit.
// The records hold the device's true values and their memos: never copy them off the device.

import { LdpClientError } from "./errors.js";
import { memoFromJson, MemoStore } from "./memo.js";

const OBJECT_STORE = "memos";

interface LockManagerLike {
  request<T>(name: string, callback: () => Promise<T>): Promise<T>;
}

function done<T>(request: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}

/** Memos in an IndexedDB database (`ldpstream-memo` by default). `await IndexedDBMemoStore.open()`. */
export class IndexedDBMemoStore implements MemoStore {
  readonly name: string;
  readonly #db: IDBDatabase;

  private constructor(name: string, db: IDBDatabase) {
    this.name = name;
    this.#db = db;
  }

  static async open(name = "ldpstream-memo", factory?: IDBFactory): Promise<IndexedDBMemoStore> {
    const idb = factory ?? (globalThis as { indexedDB?: IDBFactory }).indexedDB;
    if (idb === undefined || idb === null || typeof idb.open !== "function") {
      throw new LdpClientError("factory", idb, "an IDBFactory: no indexedDB here (use NodeFileMemoStore from @ldpstream/client/node in Node)");
    }
    const request = idb.open(name, 1);
    request.onupgradeneeded = () => {
      if (!request.result.objectStoreNames.contains(OBJECT_STORE)) request.result.createObjectStore(OBJECT_STORE);
    };
    return new IndexedDBMemoStore(name, await done(request));
  }

  /** A memo that does not read back is an error naming the database and key, never a fresh start. */
  async load(metric: string): Promise<string | null> {
    const tx = this.#db.transaction(OBJECT_STORE, "readonly");
    const value: unknown = await done(tx.objectStore(OBJECT_STORE).get(metric));
    if (value === undefined) return null;
    try {
      if (typeof value !== "string") throw new Error(`a ${typeof value}, not the memo's JSON text`);
      memoFromJson(value);
    } catch (e) {
      throw new Error(
        `IndexedDB ${JSON.stringify(this.name)} key ${JSON.stringify(metric)} does not read back (${(e as Error).message}); restore it from the device's own backup: removing it makes every value spend epsilon_perm again`,
      );
    }
    return value as string;
  }

  /** Resolves when the transaction has committed; rejects (no report then) if it aborts. */
  save(metric: string, text: string): Promise<void> {
    try {
      memoFromJson(text); // a text that would not read back is refused, never stored
    } catch (e) {
      return Promise.reject(e);
    }
    const tx = this.#db.transaction(OBJECT_STORE, "readwrite", { durability: "strict" });
    tx.objectStore(OBJECT_STORE).put(text, metric);
    return new Promise((resolve, reject) => {
      tx.oncomplete = () => resolve();
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error ?? new Error("IndexedDB transaction aborted"));
    });
  }

  /** One report at a time across the origin's tabs (Web Locks API, where the browser has it). */
  exclusive<T>(f: () => Promise<T>): Promise<T> {
    const locks = (globalThis as { navigator?: { locks?: LockManagerLike } }).navigator?.locks;
    return locks === undefined ? f() : locks.request(`${this.name}:lock`, f);
  }

  close(): void {
    this.#db.close();
  }
}
