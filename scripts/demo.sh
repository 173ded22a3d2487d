#!/usr/bin/env bash
# The demo service: `ldpstream serve` on examples/demo.toml. A built-in simulator privatizes
# 20,000 GenRR reports per second; after 75 s its true distribution switches away from
# uniform and the goodness-of-fit tests start rejecting.
#   Metrics:  curl -s 127.0.0.1:9898/metrics | grep ldpstream_test_
#   Results:  curl -s 127.0.0.1:9898/api/v1/results   (also out/demo/serve.jsonl, stdout)
#   Status:   http://127.0.0.1:9898/   (the built-in status page)
# Stop with Ctrl-C (or pass --duration 3m); it exits 0 after a last round of results.
set -euo pipefail
cd "$(dirname "$0")/.."
# The first release build compiles Arrow, Parquet, librdkafka and OpenSSL: a few minutes
# on two cores. Say so, and let cargo show its progress, rather than a silent terminal.
if [ ! -x "${CARGO_TARGET_DIR:-target}/release/ldpstream" ]; then
  echo "demo: building ldpstream (release) for the first time; this takes a few minutes..." >&2
fi
cargo build --release --bin ldpstream
exec "${CARGO_TARGET_DIR:-target}/release/ldpstream" serve --config examples/demo.toml "$@"
