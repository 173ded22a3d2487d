// A small report collector for the browser test (tests/browser_client.rs): serves the
// client's browser bundle (`npm run build:browser`, one ESM file) as
// /ldpstream-client/index.js, a page at / that runs the README's browser snippet over the
// true categories in ANSWERS_FILE, and takes every POST /collect body (one JSON message per
// line). It writes what it has collected to OUT_PARQUET after each POST, with
// hyparquet-writer, in the grr report schema `batch` reads: `report` UInt32, `ts` Int64
// milliseconds, and the `fingerprint` each message carried. A message that is not a
// stamped, timed grr report is refused (400) and not written. Prints "listening PORT".
//
//   node test/browser/collector.mjs ANSWERS_FILE OUT_PARQUET
import { createServer } from "node:http";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parquetWriteFile } from "hyparquet-writer";

const [answersFile, outFile] = process.argv.slice(2);
const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const bundle = readFileSync(here("../../dist/browser/index.js"));
const readme = readFileSync(here("../../../../README.md"), "utf8");
const marker = readme.indexOf("<!-- README browser snippet");
const start = readme.indexOf("```js\n", marker) + 6;
const snippet = readme.slice(start, readme.indexOf("```", start));
const answers = readFileSync(answersFile, "utf8").trim();

// The snippet verbatim, after the page's own data (`answers`); `done` marks the DOM.
const page = `<!doctype html><html><head><title>ldpstream client test</title></head><body>
<script type="module">
const answers = [${answers}];
${snippet}
document.body.dataset.done = String(answers.length);
</script></body></html>`;

const columns = { report: [], ts: [], fingerprint: [] };

/** The messages of one POST body, or an error naming the bad line. */
function parse(body) {
  const out = [];
  for (const [i, line] of body.split("\n").entries()) {
    if (line.trim() === "") continue;
    const m = JSON.parse(line);
    const ok =
      Number.isInteger(m.report) && m.report >= 0 && m.report < 2 ** 32 &&
      Number.isSafeInteger(m.ts) && /^[0-9a-f]{8}$/.test(m.fingerprint);
    if (!ok) throw new Error(`line ${i + 1}: not a stamped, timed grr report: ${line}`);
    out.push(m);
  }
  return out;
}

function writeParquet() {
  parquetWriteFile({
    filename: outFile,
    columnData: [
      { name: "report", data: columns.report },
      { name: "ts", data: columns.ts },
      { name: "fingerprint", data: columns.fingerprint },
    ],
    schema: [
      { name: "root", num_children: 3 },
      { name: "report", type: "INT32", converted_type: "UINT_32", repetition_type: "REQUIRED" },
      { name: "ts", type: "INT64", repetition_type: "REQUIRED" },
      { name: "fingerprint", type: "BYTE_ARRAY", converted_type: "UTF8", repetition_type: "REQUIRED" },
    ],
  });
}

const server = createServer((req, res) => {
  if (req.method === "POST" && req.url === "/collect") {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      let messages;
      try {
        messages = parse(Buffer.concat(chunks).toString("utf8"));
      } catch (e) {
        res.writeHead(400).end(String(e));
        return;
      }
      for (const m of messages) {
        columns.report.push(m.report);
        columns.ts.push(BigInt(m.ts));
        columns.fingerprint.push(m.fingerprint);
      }
      writeParquet();
      res.writeHead(204).end();
    });
    return;
  }
  if (req.url === "/") {
    res.writeHead(200, { "content-type": "text/html" }).end(page);
    return;
  }
  // The bundle is the only script served: an import it did not inline would 404.
  if (req.url === "/ldpstream-client/index.js") {
    res.writeHead(200, { "content-type": "text/javascript" }).end(bundle);
    return;
  }
  res.writeHead(404).end();
});
server.listen(0, "127.0.0.1", () => console.log(`listening ${server.address().port}`));
