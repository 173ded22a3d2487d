#!/usr/bin/env bash
# The TypeScript client (clients/js): installs the pinned tooling with `npm ci` from the
# committed lockfile, builds, and runs its node:test suite (unit tests and the golden
# conformance replay of conformance/golden.json). Prints one "test result:" line with the
# counts node:test reported, for scripts/test.sh to add up. Then, with the client built,
# the distribution conformance tests (engine/tests/client_distribution.rs: χ² of 10^6
# reports per true value from the engine's and the client's CSPRNGs, ~10 s; and
# client_noise_distribution.rs for gauss and laplace, ~15 s), whose cargo "test result:"
# lines are counted too; then audit --reports on its samples and the Node ->
# Kafka -> serve end-to-end run (below).
set -euo pipefail
cd "$(dirname "$0")/../clients/js"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
npm ci --no-audit --no-fund >&2
status=0
npm test 2>&1 | tee "$out" >&2 || status=$?
pass=$(sed -nE 's/^# pass ([0-9]+)$/\1/p' "$out" | tail -1)
fail=$(sed -nE 's/^# fail ([0-9]+)$/\1/p' "$out" | tail -1)
pass=${pass:-0}
fail=${fail:-0}
if [ "$status" -ne 0 ] && [ "$fail" -eq 0 ]; then
  fail=1 # the build or the runner itself failed
fi
if [ "$fail" -eq 0 ]; then
  echo "test result: ok. $pass passed; 0 failed; 0 ignored (clients/js)"
else
  echo "test result: FAILED. $pass passed; $fail failed; 0 ignored (clients/js)"
fi

cd ../..
cargo test --workspace --test client_distribution -- --ignored
# gauss and laplace: every coordinate on the grid and exact in f32, the noise in grid
# steps chi-square against the exact discrete law (engine/tests/client_noise_distribution.rs;
# 10^6 coordinates per case and implementation; ~15 s).
cargo test --workspace --test client_noise_distribution -- --ignored
# `ldpstream audit --reports` on the client's own samples (tests/mechanisms.rs): the ε
# lower bound stays below the claim for every mechanism.
cargo test --workspace --test mechanisms js_client_samples_pass_the_audit -- --ignored
# End to end through the broker scripts/test.sh starts (LDPSTREAM_KAFKA_BROKERS): 10^6
# reports privatized in Node and produced with kafkajs, read by serve (tests/kafka_js_client.rs).
cargo test --workspace --test kafka_js_client -- --ignored
# The client in headless Chromium (the README's browser snippet verbatim) posting to a test
# collector; its reports go through Parquet into batch (tests/browser_client.rs). Chromium
# is installed by scripts/status_page_check.sh, which scripts/test.sh runs first.
cargo test --workspace --test browser_client -- --ignored
