// SplitMix64 (Vigna's splitmix64.c), on BigInt: the public hash families of cohort and olh
// are built from it exactly as the engine builds them (engine/src/mechanism/cohort.rs).

export const MASK64 = (1n << 64n) - 1n;
/** SplitMix64's increment. */
export const GOLDEN = 0x9e3779b97f4a7c15n;

/** The finalizer applied to `z0 + GOLDEN` (the engine's `splitmix64`). */
export function splitmix64(z0: bigint): bigint {
  let z = (z0 + GOLDEN) & MASK64;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
  return z ^ (z >> 31n);
}
