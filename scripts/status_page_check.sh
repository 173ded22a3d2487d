#!/usr/bin/env bash
# The status page in a real browser: runs `ldpstream serve` on the demo config (with a 1 s
# snapshot interval, an early distribution switch and a second, grouped stream), loads
# http://.../ in headless Chromium (Debian's `chromium`, installed when missing and
# possible), and checks the rendered DOM: every configured stream appears, and every
# configured test has a card with a result, a p-value plot and estimate bars with their
# confidence-sequence bands.
#
#   scripts/status_page_check.sh                       # builds the debug binary if needed
#   LDPSTREAM_BIN=target/release/ldpstream scripts/status_page_check.sh
#   STATUS_SCREENSHOT=docs/status-page.png scripts/status_page_check.sh
#
# Exits non-zero, saying why, when the page does not render what the config asks for.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() {
  echo "status_page_check: FAIL: $*" >&2
  exit 1
}

bin=${LDPSTREAM_BIN:-}
if [ -z "$bin" ]; then
  cargo build --quiet --bin ldpstream
  bin="${CARGO_TARGET_DIR:-target}/debug/ldpstream"
fi
[ -x "$bin" ] || fail "no ldpstream binary at $bin"

if ! command -v chromium >/dev/null 2>&1; then
  scripts/apt_install.sh chromium || fail "chromium is missing and could not be installed"
fi

work=$(mktemp -d)
serve_pid=
cleanup() {
  if [ -n "$serve_pid" ]; then kill "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# The demo, faster: results every second and the switch away from uniform at 12 s, so a
# short run shows both an accepting and a rejecting stretch of p-values. The grouped
# stream puts group labels on the page.
sed -e 's/^snapshot_interval = .*/snapshot_interval = "1s"/' \
    -e 's/^switch_at = .*/switch_at = "12s"/' \
    -e "s#^sink = .*#sink = [{ kind = \"jsonl\", path = \"$work/out.jsonl\" }]#" \
    examples/demo.toml > "$work/config.toml"
cat >> "$work/config.toml" <<'EOF'

[[stream]]
name = "checkout"
mechanism = { kind = "grr", epsilon = 2.0, domain = 4 }
columns = { group_by = ["region"] }

[stream.source]
kind = "simulator"
rate = 4000.0
p = [0.4, 0.3, 0.2, 0.1]
groups = ["eu", "us"]
seed = 7

[[stream.test]]
name = "checkout_identity_30s"
kind = "gof"
null = [0.4, 0.3, 0.2, 0.1]
alpha = 0.01
window = { kind = "tumbling", size = "30s" }
EOF

"$bin" serve --config "$work/config.toml" --listen 127.0.0.1:0 --duration 120s \
  >/dev/null 2>"$work/serve.err" &
serve_pid=$!
addr=
for _ in $(seq 100); do
  addr=$(sed -n 's#^ldpstream serve: listening on \(http://[0-9.:]*\).*#\1#p' "$work/serve.err" | head -1)
  [ -n "$addr" ] && break
  kill -0 "$serve_pid" 2>/dev/null || fail "serve exited: $(cat "$work/serve.err")"
  sleep 0.1
done
[ -n "$addr" ] || fail "serve did not print its address: $(cat "$work/serve.err")"
echo "serve at $addr" >&2

# Wait (real time) for history that spans the switch, so the page has something to plot.
settle=${STATUS_SETTLE_SECONDS:-20}
sleep "$settle"
kill -0 "$serve_pid" 2>/dev/null || fail "serve exited: $(cat "$work/serve.err")"

chrome() {
  timeout 90 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$(mktemp -d -p "$work")" --window-size=1280,1100 \
    --virtual-time-budget=8000 "$@" 2>>"$work/chromium.err"
}
chrome --dump-dom "$addr/" >"$work/dom.html" || fail "chromium --dump-dom failed: $(tail -5 "$work/chromium.err")"
shot=${STATUS_SCREENSHOT:-$work/status.png}
chrome --screenshot="$shot" "$addr/" >/dev/null || fail "chromium --screenshot failed: $(tail -5 "$work/chromium.err")"
[ -s "$shot" ] || fail "no screenshot written"

python3 - "$work/config.toml" "$work/dom.html" <<'EOF'
import html, re, sys, tomllib

config = tomllib.load(open(sys.argv[1], "rb"))
# What the script rendered, not the script's own templates.
dom = re.sub(r"<script.*?</script>", "", open(sys.argv[2], encoding="utf-8").read(), flags=re.S)
problems = []
if "<title>ldpstream status</title>" not in dom:
    problems.append("the page title is missing")
error = re.search(r'<div id="error">([^<]*)</div>', dom)
if error is None or error.group(1).strip():
    problems.append("the page reports an error: " + (error.group(1) if error else "(no error box)"))
# Each card is a <div class="card" data-test=... data-state=...>, up to the next card.
cards = re.split(r'(?=<div class="card" )', dom)[1:]
for stream in config["stream"]:
    if f'data-stream="{html.escape(stream["name"])}"' not in dom:
        problems.append(f'stream {stream["name"]!r} is not in the streams table')
    for test in stream["test"]:
        mine = [c for c in cards if f'data-test="{html.escape(test["name"])}"' in c]
        if not mine:
            problems.append(f'test {test["name"]!r} has no card')
            continue
        for c in mine:
            if 'data-state="result"' not in c:
                problems.append(f'test {test["name"]!r} shows no result')
            elif 'class="pplot"' not in c or 'class="bars"' not in c:
                problems.append(f'test {test["name"]!r} lacks its p-value plot or estimate bars')
            elif "<polyline" not in c:
                problems.append(f'test {test["name"]!r} has an empty p-value plot')
            elif 'class="cs-band"' not in c:
                problems.append(f'test {test["name"]!r} shows no confidence-sequence bands')
grouped = [c for c in cards if "checkout_identity_30s" in c]
if sorted(re.findall(r'group <b>region=(?:&quot;|")(\w+)(?:&quot;|")</b>', "".join(grouped))) != ["eu", "us"]:
    problems.append("the grouped test does not show one card per group (eu, us)")
if problems:
    print("status_page_check: FAIL:\n  " + "\n  ".join(problems), file=sys.stderr)
    sys.exit(1)
print(f"status_page_check: ok: {len(cards)} test cards rendered", file=sys.stderr)
EOF
echo "screenshot: $shot" >&2
