// The README's Node snippets, run verbatim as a module that imports the package by
// its name (Node resolves a package's own name through its "exports").
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const root = new URL("../../", import.meta.url); // clients/js/
const readme = readFileSync(new URL("../../README.md", root), "utf8");

function snippet(marker: string): string {
  const at = readme.indexOf(marker);
  assert.ok(at >= 0, `README has no ${marker}`);
  const start = readme.indexOf("```js\n", at);
  const end = readme.indexOf("```", start + 6);
  return readme.slice(start + 6, end);
}

test("the README's Node snippet runs and prints a stamped JSON message and a 21-byte binary one", () => {
  const file = new URL("dist/readme-node-snippet.mjs", root);
  writeFileSync(file, snippet("<!-- README node snippet"));
  const out = execFileSync(process.execPath, [file.pathname], { encoding: "utf8" });
  const match = /^(\{"report":[0-3],"ts":\d+,"country":"fr","fingerprint":"[0-9a-f]{8}"\}) (\d+)\n$/.exec(out);
  assert.ok(match, out);
  // The fingerprint and one group of 2 bytes: 13 + 4 + 2 + 2.
  assert.equal(match[2], "21");
});

test("the README's longitudinal snippet reports twice from one memo file and refuses a second report in a period", () => {
  const file = new URL("dist/readme-longitudinal-snippet.mjs", root);
  writeFileSync(file, snippet("<!-- README longitudinal snippet"));
  // The memo file lands in the working directory, a fresh one.
  const cwd = mkdtempSync(join(tmpdir(), "ldp-readme-"));
  try {
    const out = execFileSync(process.execPath, [file.pathname], { encoding: "utf8", cwd });
    const lines = out.trimEnd().split("\n");
    assert.equal(lines.length, 3, out);
    const [a, b] = lines.slice(0, 2).map((l) => JSON.parse(l));
    assert.equal(b.ts - a.ts, 86_400_000);
    for (const m of [a, b]) assert.ok(Number.isInteger(m.report) && m.report >= 0 && m.report < 8, out);
    assert.equal(a.fingerprint, b.fingerprint);
    assert.equal(lines[2], "same_period");
    const memo = JSON.parse(readFileSync(join(cwd, "ldp-memo.json"), "utf8")).metrics.app_language;
    assert.equal(memo.reports, 2);
    assert.equal(memo.values.length, 1);
  } finally {
    rmSync(cwd, { recursive: true, force: true });
  }
});
