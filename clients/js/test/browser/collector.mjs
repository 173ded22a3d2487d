// A small report collector for the browser test (tests/browser_client.rs): serves the
// client's ESM build under /ldpstream-client/, a page at / that runs the README's browser
// snippet over the true categories in ANSWERS_FILE, and appends every POST /collect body
// (one JSON message per line) to OUT_FILE. Prints "listening PORT" when ready.
//
//   node test/browser/collector.mjs ANSWERS_FILE OUT_FILE
import { createServer } from "node:http";
import { appendFileSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const [answersFile, outFile] = process.argv.slice(2);
const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const dist = here("../../dist/src/");
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

const server = createServer((req, res) => {
  if (req.method === "POST" && req.url === "/collect") {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      appendFileSync(outFile, Buffer.concat(chunks).toString("utf8") + "\n");
      res.writeHead(204).end();
    });
    return;
  }
  if (req.url === "/") {
    res.writeHead(200, { "content-type": "text/html" }).end(page);
    return;
  }
  const name = req.url?.startsWith("/ldpstream-client/") ? req.url.slice(18) : "";
  if (/^[a-z_]+\.js$/.test(name)) {
    res.writeHead(200, { "content-type": "text/javascript" }).end(readFileSync(dist + name));
    return;
  }
  res.writeHead(404).end();
});
server.listen(0, "127.0.0.1", () => console.log(`listening ${server.address().port}`));
