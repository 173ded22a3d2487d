#!/usr/bin/env bash
# The TypeScript client (clients/js): installs the pinned tooling with `npm ci` from the
# committed lockfile, builds, and runs its node:test suite (unit tests and the golden
# conformance replay of conformance/golden.json). Prints one "test result:" line with the
# counts node:test reported, for scripts/test.sh to add up. Then, with the client built,
# the distribution conformance tests (engine/tests/client_distribution.rs: χ² of 10^6
# reports per true value from the engine's, the client's and the Python package's
# CSPRNGs, ~10 s; and
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

# The browser bundle (esbuild, pinned in the lockfile): one ESM file for the Chromium test.
npm run build:browser >&2

cd ../..
# The same --workspace and features as scripts/test.sh's build: another feature set would
# compile the workspace's crates again (cargo unifies features across the packages built).
# shellcheck source=scripts/cargo_features.sh
. scripts/cargo_features.sh
# One cargo invocation per test binary, with several filters, so that the tests of a
# binary run side by side on its test threads:
#   - the engine's, the JS client's and the Python package's reports (the Python one from
#     .venv-py, which scripts/test.sh builds first with scripts/python_env.sh), and gauss
#     and laplace: every coordinate on the grid and exact in f32, the noise in grid steps
#     chi-square against the exact discrete law
#     (crates/engine/src/tests/client_noise_distribution.rs; 10^6 coordinates per case and
#     implementation);
cargo test "${cargo_features[@]}" --lib -- --ignored tests::client_distribution tests::client_noise_distribution
#   - `ldpstream audit --reports` on the client's own samples (crates/cli/tests/mechanisms.rs):
#     the ε lower bound stays below the claim for every mechanism; and on its longitudinal
#     devices' (crates/cli/tests/longitudinal.rs): one report below epsilon_1, 1,000 reports
#     of one value by one device below epsilon_perm;
#   - end to end through the broker scripts/test.sh starts (LDPSTREAM_KAFKA_BROKERS): 10^6
#     reports privatized in Node and produced with kafkajs, read by serve
#     (crates/cli/tests/kafka/js_client.rs);
#   - the bundled client in headless Chromium (the README's browser snippet verbatim)
#     posting to a test collector that writes Parquet (hyparquet-writer), which batch reads
#     (crates/cli/tests/browser_client.rs). Chromium comes from scripts/prefetch.sh, or
#     scripts/status_page_check.sh installs it.
cargo test "${cargo_features[@]}" --test integration -- --ignored \
  mechanisms::js_client_samples_pass_the_audit longitudinal::js_longitudinal_client_samples_pass_the_audit \
  kafka::js_client browser_client
