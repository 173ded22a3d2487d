// Draws reports from the built client's real CSPRNG and prints their histogram as JSON, for
// the distribution conformance test (engine/tests/client_distribution.rs) and for
// `ldpstream audit --reports` (with --pairs: one "input,output" line per report).
//
//   node scripts/sample.mjs '<mechanism JSON>' <value> <n>            -> JSON counts
//   node scripts/sample.mjs '<mechanism JSON>' all <n> --pairs        -> CSV pairs
//   node scripts/sample.mjs '<gauss or laplace JSON>' <value> <n>     -> n·d f64 LE
//   node scripts/sample.mjs '<subset JSON>' <value> <n> --items        -> per-item counts
//
// Counts: grr, matrix: per category; hadamard, cohort: per 2·index + (report < 0);
// bitflip, oue: per bit position, the number of reports with that bit set; subset: per colex
// index Σ_i C(s_i, i+1) of the sorted items (engine/src/mechanism/subset_index.rs), or with
// --items per category, the number of reports holding it; olh: per seed·g + report (the
// audit's numbering of the S × g table). With --pairs,
// gauss and laplace give the audit's bin of the first coordinate.
import { Randomizer } from "../dist/index.js";
import { prepare } from "../dist/mechanisms.js";

const [mechanismJson, valueArg, nArg, mode] = process.argv.slice(2);
const config = JSON.parse(mechanismJson);
if (config.kind === "cohort" && config.seed !== undefined) config.seed = BigInt(config.seed);
if (config.kind === "olh" && config.pool_seed !== undefined) config.pool_seed = BigInt(config.pool_seed);
const r = new Randomizer(config);
const n = Number(nArg);
// olh's g as the client resolves it (the default round(e^ε) + 1 when the config has none).
const olhG = config.kind === "olh" ? prepare(config).g : 0;

// The audit's bins for a noise report's first coordinate (engine/src/audit.rs NOISE_BIN_EDGES).
const NOISE_BIN_EDGES = [-3.0, -2.0, -1.0, -0.25, 0.5, 1.25, 2.0, 3.0, 4.0];

/** C(n, k), exact while it stays below 2^53 (the audit's subsets are far smaller). */
function choose(n, k) {
  if (k > n) return 0;
  let c = 1;
  for (let i = 1; i <= k; i++) c = (c * (n - k + i)) / i;
  return c;
}

function index(rep) {
  switch (rep.kind) {
    case "subset":
      return rep.report.reduce((acc, s, i) => acc + choose(s, i + 1), 0);
    case "gauss":
    case "laplace":
      return NOISE_BIN_EDGES.filter((e) => rep.report[0] >= e).length;
    case "hadamard":
      return 2 * rep.row + (rep.report < 0 ? 1 : 0);
    case "cohort":
      return 2 * rep.cohort + (rep.report < 0 ? 1 : 0);
    case "olh":
      return rep.seed * olhG + rep.report;
    case "bitflip":
    case "oue":
      return rep.report.reduce((acc, b, i) => acc + b * 2 ** (8 * i), 0);
    default:
      return rep.report;
  }
}

if ((config.kind === "gauss" || config.kind === "laplace") && mode !== "--pairs") {
  // The raw coordinates, for engine/tests/client_noise_distribution.rs to bin in grid steps
  // and to check on the grid and exact in f32 (a histogram would hide both).
  const x = Number(valueArg);
  const out = new Float64Array(n * r.domain);
  for (let i = 0; i < n; i++) out.set(r.randomize(x).report, i * r.domain);
  process.stdout.write(new Uint8Array(out.buffer));
} else if (mode === "--pairs") {
  const lines = [];
  for (let x = 0; x < r.domain; x++) {
    for (let i = 0; i < n; i++) lines.push(`${x},${index(r.randomize(x))}`);
    if (lines.length > 100000) process.stdout.write(lines.splice(0).join("\n") + "\n");
  }
  process.stdout.write(lines.join("\n") + (lines.length ? "\n" : ""));
} else {
  const x = Number(valueArg);
  const counts = new Map();
  const bits = config.kind === "bitflip" || config.kind === "oue" || mode === "--items" ? new Array(r.domain).fill(0) : null;
  for (let i = 0; i < n; i++) {
    const rep = r.randomize(x);
    if (mode === "--items") {
      for (const j of rep.report) bits[j] += 1;
    } else if (bits) {
      for (let j = 0; j < r.domain; j++) bits[j] += (rep.report[j >> 3] >> (j & 7)) & 1;
    } else {
      const k = index(rep);
      counts.set(k, (counts.get(k) ?? 0) + 1);
    }
  }
  process.stdout.write(JSON.stringify(bits ?? Object.fromEntries(counts)) + "\n");
}
