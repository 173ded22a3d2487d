// docs/clients.md: the Node snippet, run verbatim as a module that imports the package by
// its name (Node resolves a package's own name through its "exports").
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";

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
