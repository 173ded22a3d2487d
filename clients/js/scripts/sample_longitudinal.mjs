// Draws longitudinal devices' reports from the built client (`LongitudinalClient`, its
// memo store, the real CSPRNG) and prints one "input,output" line per device for
// `ldpstream audit --reports` (crates/cli/tests/longitudinal.rs):
//
//   node scripts/sample_longitudinal.mjs '<lgrr, losue or lsue JSON>' <devices> <reports> [forgetful]
//
// For every input x, <devices> devices hold x and each reports it <reports> times, one
// report per period. A device is one metric of one client, over the client's in-memory
// store: a metric's memo is drawn, kept and reused exactly as a device's own, and the
// metrics' memos are independent draws. The output is, for one report, its index as the
// audit enumerates it (the category; the packed bits as an integer, byte i at bits
// 8i..8i+7); for more, the device's statistic as `audit --device-reports` reads it (the
// engine's audit::device): the most frequent category, the smallest on a tie, or each bit
// set when more than half of the reports set it (for one report, the report itself).
// `forgetful`: a store that keeps nothing, so every report draws a new memo (a client
// without memo, which the audit of many reports must catch).
import { LongitudinalClient } from "../dist/index.js";

const [mechanismJson, devicesArg, reportsArg, mode] = process.argv.slice(2);
const forgetful = { load: () => null, save: () => undefined };
const client = new LongitudinalClient(JSON.parse(mechanismJson), mode === "forgetful" ? { store: forgetful } : {});
const devices = Number(devicesArg);
const reports = Number(reportsArg);
if (!Number.isSafeInteger(devices) || devices < 1 || !Number.isSafeInteger(reports) || reports < 1) {
  throw new Error("usage: sample_longitudinal.mjs '<mechanism JSON>' <devices ≥ 1> <reports ≥ 1>");
}

function statistic(drawn) {
  if (typeof drawn[0] === "number") {
    const counts = new Map();
    for (const c of drawn) counts.set(c, (counts.get(c) ?? 0) + 1);
    let best = -1;
    let mode = 0;
    for (const [c, k] of counts) if (k > best || (k === best && c < mode)) [best, mode] = [k, c];
    return mode;
  }
  const ones = new Array(drawn[0].length * 8).fill(0);
  for (const r of drawn) for (let j = 0; j < ones.length; j++) ones[j] += (r[j >> 3] >> (j & 7)) & 1;
  const majority = new Uint8Array(drawn[0].length);
  for (let j = 0; j < ones.length; j++) if (2 * ones[j] > drawn.length) majority[j >> 3] |= 1 << (j & 7);
  return majority.reduce((acc, b, i) => acc + b * 2 ** (8 * i), 0);
}

const lines = [];
for (let x = 0; x < client.domain; x++) {
  for (let i = 0; i < devices; i++) {
    const metric = `device-${x}-${i}`;
    const drawn = [];
    for (let t = 0; t < reports; t++) drawn.push((await client.report(metric, x, t * client.periodMs)).report);
    lines.push(`${x},${statistic(drawn)}`);
    if (lines.length > 100000) process.stdout.write(lines.splice(0).join("\n") + "\n");
  }
}
process.stdout.write(lines.join("\n") + (lines.length ? "\n" : ""));
