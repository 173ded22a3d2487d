import { checkDomain, checkLaplaceEpsilon, checkRho } from "./config.js";
import { LdpClientError } from "./errors.js";
import { discreteGaussian, discreteLaplace } from "./discrete_noise.js";
import { WordSource } from "./source.js";

// The noise mechanisms' grid (docs/STATISTICS.md §1.3.1), computed in the same f64
// operations as the engine's `Noise::new` (engine/src/mechanism/noise.rs), so that the
// client draws on the server's grid with the server's integer scale.

/** Standard deviations / Laplace scales in the default `max_abs` (the engine's constants). */
const GAUSS_DEFAULT_SIGMAS = 40;
const LAPLACE_DEFAULT_SCALES = 60;

/** A validated noise mechanism: the grid 2^−exponent·ℤ and the scale in grid steps. */
export interface NoiseGrid {
  kind: "gauss" | "laplace";
  domain: number;
  /** The grid step is 2^−exponent. */
  exponent: number;
  /** σ of the discrete Gaussian or t of the discrete Laplace, in grid steps. */
  scale: bigint;
}

/** The largest k ≤ 24 with maxAbs·2^k ≤ 2^24 (`grid_exponent`), or undefined. */
function gridExponent(maxAbs: number): number | undefined {
  let bound = 1;
  for (let k = 24; k >= 0; k--) {
    if (maxAbs <= bound) return k;
    bound *= 2;
  }
  return undefined;
}

export function noiseGrid(kind: "gauss" | "laplace", parameter: number, domainValue: number): NoiseGrid {
  const gauss = kind === "gauss";
  const value = gauss ? checkRho(parameter) : checkLaplaceEpsilon(parameter);
  const domain = checkDomain(domainValue);
  const scale = gauss ? 1 / Math.sqrt(value) : 2 / value;
  const maxAbs = 1 + (gauss ? GAUSS_DEFAULT_SIGMAS * scale : LAPLACE_DEFAULT_SCALES * scale);
  const exponent = gridExponent(maxAbs);
  if (exponent === undefined) {
    // Unreachable within the checked ranges; kept so that no grid is ever inexact.
    throw new LdpClientError(gauss ? "rho" : "epsilon", parameter, "a noise scale whose max_abs stays below 2^24");
  }
  // The 1e-12 margin keeps the rounding of `scale` from making the noise a hair smaller
  // than the guarantee promises; the same operations, in the same order, as the engine.
  const steps = Math.ceil(scale * 2 ** exponent * (1 + 1e-12));
  return { kind, domain, exponent, scale: BigInt(Math.max(steps, 1)) };
}

/** e_x + grid noise: every coordinate a multiple of 2^−exponent, exactly an f32. */
export function drawNoise(grid: NoiseGrid, x: number, source: WordSource): Float64Array {
  const step = 2 ** -grid.exponent;
  const out = new Float64Array(grid.domain);
  for (let j = 0; j < grid.domain; j++) {
    const y = grid.kind === "gauss" ? discreteGaussian(source, grid.scale) : discreteLaplace(source, grid.scale);
    // As the engine's `steps as f64 * step`: the integer rounded to a double, then scaled
    // by a power of two (exact).
    out[j] = Number(y) * step;
  }
  out[x] += 1;
  return out;
}
