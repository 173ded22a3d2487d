// The randomness every randomizer consumes, as a stream of 32-bit words. Not exported from
// the package: the only source a user gets is the CSPRNG (a replayable source would be a
// seed option, which defeats local privacy). The conformance tests import it directly.

/** Yields uniformly random 32-bit words. */
export interface WordSource {
  nextU32(): number;
}

const MASK64 = (1n << 64n) - 1n;

/** A 64-bit word from two 32-bit words, low half first (as rand_core builds next_u64). */
export function nextU64(source: WordSource): bigint {
  const lo = BigInt(source.nextU32());
  const hi = BigInt(source.nextU32());
  return ((hi << 32n) | lo) & MASK64;
}

interface CryptoLike {
  getRandomValues<T extends ArrayBufferView | null>(array: T): T;
}

/** Words from `crypto.getRandomValues`, fetched 16384 at a time (its 65536-byte limit). */
export class CryptoSource implements WordSource {
  private readonly crypto: CryptoLike;
  private readonly buffer = new Uint32Array(16384);
  private index = 16384;

  constructor() {
    const c = (globalThis as { crypto?: CryptoLike }).crypto;
    if (c === undefined || typeof c.getRandomValues !== "function") {
      throw new Error(
        "crypto.getRandomValues is not available: use a browser, Node >= 19, or Node 18 " +
          "with --experimental-global-webcrypto",
      );
    }
    this.crypto = c;
  }

  nextU32(): number {
    if (this.index === this.buffer.length) {
      this.crypto.getRandomValues(this.buffer);
      this.index = 0;
    }
    return this.buffer[this.index++];
  }
}

/** Replays fixed words and fails when they run out: for the conformance tests only. */
export class ReplaySource implements WordSource {
  private index = 0;

  constructor(private readonly words: readonly number[]) {}

  nextU32(): number {
    if (this.index >= this.words.length) {
      throw new Error(`replay: all ${this.words.length} words consumed`);
    }
    return this.words[this.index++];
  }

  /** How many words were read. */
  consumed(): number {
    return this.index;
  }
}
