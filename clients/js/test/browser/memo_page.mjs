// The page of the browser memo-store test (crates/cli/tests/browser_client.rs): serves the
// client's browser bundle (`npm run build:browser`) as /ldpstream-client/index.js and, at
// /?ts=T&ts=U…[&store=indexeddb], a page that reports the metric "m" (value 2) with a
// LongitudinalClient on the browser's localStorage (or IndexedDB) store at each event
// time T, U, … in order, then posts each outcome
// (the report, or the refusal's code) and the stored memo to /done, which prints them as
// one JSON line. Run by two browser processes on one profile, it shows the memo surviving
// a restart. Prints "listening PORT" first.
//
//   node test/browser/memo_page.mjs
import { createServer } from "node:http";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const bundle = readFileSync(fileURLToPath(new URL("../../dist/browser/index.js", import.meta.url)));

const page = `<!doctype html><html><head><title>ldpstream memo store test</title></head><body>
<script type="module">
import { IndexedDBMemoStore, LocalStorageMemoStore, LongitudinalClient, LdpRefusal } from "/ldpstream-client/index.js";
const config = { kind: "losue", epsilon_perm: 3, epsilon_1: 1, domain: 10, period: "1d" };
const params = new URL(location.href).searchParams;
const store = params.get("store") === "indexeddb" ? await IndexedDBMemoStore.open() : new LocalStorageMemoStore();
const client = new LongitudinalClient(config, { store });
const outcomes = [];
for (const ts of params.getAll("ts").map(Number)) {
  try {
    outcomes.push(JSON.parse(await client.json("m", 2, { ts })).report);
  } catch (e) {
    outcomes.push(e instanceof LdpRefusal ? e.code : "error: " + e.message);
  }
}
const memo = await store.load("m");
await fetch("/done", { method: "POST", body: JSON.stringify({ outcomes, memo }) });
document.body.dataset.done = "1";
</script></body></html>`;

const server = createServer((req, res) => {
  if (req.method === "POST" && req.url === "/done") {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      console.log(Buffer.concat(chunks).toString("utf8"));
      res.writeHead(204).end();
    });
  } else if (req.url === "/ldpstream-client/index.js") {
    res.writeHead(200, { "content-type": "text/javascript" }).end(bundle);
  } else if (req.url.startsWith("/?") || req.url === "/") {
    res.writeHead(200, { "content-type": "text/html" }).end(page);
  } else {
    res.writeHead(404).end();
  }
});
server.listen(0, "127.0.0.1", () => console.log(`listening ${server.address().port}`));
