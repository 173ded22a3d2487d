// @ldpstream/client: privatize a value on the device, in the format ldpstream reads.

import { MechanismConfig } from "./config.js";
import { encodeBinary, encodeJson, MessageOptions } from "./encode.js";
import { draw, Prepared, prepare, Report } from "./mechanisms.js";
import { fingerprint } from "./fingerprint.js";
import { CryptoSource } from "./source.js";

export { LdpClientError } from "./errors.js";
export { MAX_DOMAIN, MAX_EPSILON, MAX_RHO, MIN_EPSILON, MIN_LAPLACE_EPSILON, MIN_RHO } from "./config.js";
export { DEFAULT_PERIOD } from "./config.js";
export type { LongitudinalConfig, MechanismConfig } from "./config.js";
export { DEFAULT_MAX_MEMOIZED_VALUES, LdpMemoStoreError, LdpRefusal, LongitudinalClient, MAX_MEMO_BYTES } from "./device.js";
export type { LongitudinalOptions, RefusalCode } from "./device.js";
export { InMemoryMemoStore, MemoFormatError, MEMO_VERSION } from "./memo.js";
export type { MemoStore } from "./memo.js";
export { DEFAULT_STORAGE_PREFIX, LocalStorageMemoStore } from "./browser_store.js";
export type { StorageLike } from "./browser_store.js";
export { IndexedDBMemoStore } from "./indexeddb_store.js";
export type { Report } from "./mechanisms.js";
export type { MessageOptions } from "./encode.js";
export { encodeBinary, encodeJson };

let shared: CryptoSource | undefined;

/**
 * A stream's randomizer; every draw comes from `crypto.getRandomValues`. The longitudinal
 * kinds (lgrr, losue, lsue) report through `LongitudinalClient`, which keeps the memo.
 */
export class Randomizer {
  readonly config: MechanismConfig;
  readonly domain: number;
  /** The mechanism fingerprint every message of `json` and `binary` carries. */
  readonly fingerprint: number;
  readonly #prepared: Prepared;
  readonly #source: CryptoSource;

  /** Throws `LdpClientError` naming the parameter the server would refuse. */
  constructor(config: MechanismConfig) {
    this.#prepared = prepare(config);
    this.config = config;
    this.domain = this.#prepared.domain;
    this.fingerprint = fingerprint(config);
    this.#source = shared ??= new CryptoSource();
  }

  /** The privatized report of category `value` (0 ≤ value < domain). */
  randomize(value: number): Report {
    return draw(this.#prepared, value, this.#source);
  }

  /** `randomize` then the JSON message, stamped with the fingerprint. */
  json(value: number, options?: MessageOptions): string {
    return encodeJson(this.randomize(value), { ...options, fingerprint: this.fingerprint });
  }

  /** `randomize` then the binary message, stamped with the fingerprint. */
  binary(value: number, options?: MessageOptions): Uint8Array {
    return encodeBinary(this.randomize(value), { ...options, fingerprint: this.fingerprint });
  }
}
