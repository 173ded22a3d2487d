import { checkPeriod, DEFAULT_PERIOD, MechanismConfig, OLH_DEFAULT_POOL_SIZE } from "./config.js";
import { defaultK } from "./mechanisms.js";
import { defaultG } from "./olh.js";

// The mechanism fingerprint stamped on every message (docs/clients.md): FNV-1a (32 bits)
// over the kind, a 0 byte and the parameters little-endian, exactly as the server computes
// it (engine/src/mechanism/fingerprint.rs). A report randomized under other parameters is
// refused as `mechanism_mismatch` instead of being folded into the wrong estimate.

function fnv1a(bytes: Uint8Array): number {
  let h = 0x811c9dc5;
  for (const b of bytes) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return h >>> 0;
}

/** The fingerprint of a validated mechanism config, as an unsigned 32-bit integer. */
export function fingerprint(config: MechanismConfig): number {
  const parts: number[] = [...new TextEncoder().encode(config.kind), 0];
  const view = new DataView(new ArrayBuffer(8));
  const f64 = (v: number) => {
    view.setFloat64(0, v, true);
    parts.push(...new Uint8Array(view.buffer));
  };
  const u32 = (v: number) => {
    view.setUint32(0, v, true);
    parts.push(...new Uint8Array(view.buffer, 0, 4));
  };
  switch (config.kind) {
    case "matrix":
      u32(config.matrix.length);
      u32(config.matrix[0].length);
      for (const row of config.matrix) for (const v of row) f64(v);
      break;
    case "cohort":
      f64(config.epsilon);
      u32(config.domain);
      u32(config.cohorts);
      view.setBigUint64(0, BigInt(config.seed ?? 0), true);
      parts.push(...new Uint8Array(view.buffer));
      break;
    case "gauss":
      f64(config.rho);
      u32(config.domain);
      break;
    case "subset":
      // k resolved to its default, as the server resolves the config's.
      f64(config.epsilon);
      u32(config.domain);
      u32(config.k ?? defaultK(config.epsilon, config.domain));
      break;
    case "olh":
      // g and the pool size resolved to their defaults, as the server resolves them.
      f64(config.epsilon);
      u32(config.domain);
      u32(config.g ?? defaultG(config.epsilon));
      u32(config.pool_size ?? OLH_DEFAULT_POOL_SIZE);
      view.setBigUint64(0, BigInt(config.pool_seed ?? 0), true);
      parts.push(...new Uint8Array(view.buffer));
      break;
    case "lgrr":
    case "losue":
    case "lsue":
      // Both ε, d and the period: a memo is valid only under the law it was drawn from.
      f64(config.epsilon_perm);
      f64(config.epsilon_1);
      u32(config.domain);
      view.setBigUint64(0, BigInt(checkPeriod(config.period ?? DEFAULT_PERIOD)), true);
      parts.push(...new Uint8Array(view.buffer));
      break;
    default:
      f64(config.epsilon);
      u32(config.domain);
  }
  return fnv1a(new Uint8Array(parts));
}

/** The 8 hex digits the JSON `fingerprint` field carries. */
export function fingerprintHex(f: number): string {
  return f.toString(16).padStart(8, "0");
}
