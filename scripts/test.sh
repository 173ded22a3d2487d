#!/usr/bin/env bash
# The whole test suite: every crate's unit, property, Monte Carlo and end-to-end tests,
# the Python package, the JS client, every bench script in smoke mode, the deployment
# artifacts (deploy/check.sh: real tools and a real Prometheus) and cargo deny (licenses,
# bans, sources, advisories). Fails when a test fails, and also when no test ran at all.
#
# Around the tests it starts a local Kafka-protocol broker (deploy/kafka/start-local.sh,
# stopped again on exit) and exports its address as LDPSTREAM_KAFKA_BROKERS for the Kafka
# integration tests. It installs what the checks need when it is missing (promtool from
# Debian's `prometheus`, chromium, the Python and npm test packages, cargo-deny:
# scripts/prefetch.sh, in the background while cargo compiles); if that is impossible the
# test that needs it says so loudly.
#
# After one compile, the suite runs as lanes side by side, each with its own log, printed
# in a fixed order at the end: the Rust unit tests, the Rust integration tests, the Python
# package, the JS client, the bench smoke, the status page and deploy check, and cargo
# deny. Most lanes wait on child processes, a broker, a browser or a JVM rather than on
# the CPU; run one after another they took 1,557 s of a fresh-clone run, 920 s of it the
# compile (benches/RESULTS.md, "A fresh-clone .ci/run").
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
work=$(mktemp -d)
cleanup() {
  # The lanes and prefetches of a run that stopped early.
  local pids
  pids=$(jobs -p)
  if [ -n "$pids" ]; then
    # shellcheck disable=SC2086 # one pid per word
    kill $pids 2>/dev/null || true
  fi
  rm -rf "$log" "$work"
  ./deploy/kafka/stop-local.sh || true
}
trap cleanup EXIT
# Wall time per stage, printed at the end, so a slow CI run says where its time went.
suite_started=$(date +%s)
stage_started=$suite_started
timings=()
stage() {
  local now
  now=$(date +%s)
  timings+=("$(printf '%6d s  %s' $((now - stage_started)) "$1")")
  stage_started=$now
}
# One "test result:" line for a step that is not a test harness of its own.
result() { # result STATUS WHAT
  if [ "$1" -eq 0 ]; then
    echo "test result: ok. 1 passed; 0 failed; 0 ignored ($2)"
  else
    echo "test result: FAILED. 0 passed; 1 failed; 0 ignored ($2)"
  fi
}

# librdkafka and the service's TLS link the system's OpenSSL (Debian's libssl-dev) instead
# of building OpenSSL from source (openssl-sys's `vendored`, which the release build and the
# image keep): the vendored build was the longest single step of a cold CI compile, and the
# Kafka TLS and HTTPS tests exercise the same API either way. Installed when missing,
# before the apt prefetch below (one apt-get at a time).
if ! pkg-config --exists openssl 2>/dev/null; then
  scripts/apt_install.sh libssl-dev pkg-config \
    || echo "WARNING: could not install libssl-dev; OpenSSL is built from source" >&2
fi
if pkg-config --exists openssl 2>/dev/null; then
  export OPENSSL_NO_VENDOR=1
fi

# Installs that wait on the network, and cargo-deny's build at nice 19 (it takes the cores
# the compile leaves idle), run in the background while cargo compiles; each part writes
# its exit status to $work/prefetch.PART when it ends, and a lane waits for the parts it
# uses (`needs`). The deploy linters come after apt: their own step would apt-get
# prometheus too.
prefetch() { # prefetch PART...
  local p status
  for p in "$@"; do
    status=0
    scripts/prefetch.sh "$p" >"$work/prefetch.$p.log" 2>&1 || status=$?
    echo "$status" >"$work/prefetch.$p"
  done
}
prefetch apt deploy &
prefetch python &
prefetch npm &
prefetch bench &
prefetch deny &
needs() { # needs PART...: wait for these prefetches; a failed one is only a warning
  local p
  for p in "$@"; do
    while [ ! -f "$work/prefetch.$p" ]; do sleep 1; done
    if [ "$(cat "$work/prefetch.$p")" != 0 ]; then
      echo "WARNING: the prefetch of '$p' failed (each stage installs what is missing itself):" >&2
      tail -20 "$work/prefetch.$p.log" >&2
    fi
  done
}

# A free loopback port for the broker, so parallel checkouts do not collide.
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
LDPSTREAM_KAFKA_BROKERS=$(./deploy/kafka/start-local.sh "$port")
# The broker binary itself, for the tests that start their own (TLS, SASL).
LDPSTREAM_TANSU=$(cat .kafka/tansu.bin)
export LDPSTREAM_TANSU
export LDPSTREAM_KAFKA_BROKERS
# Tansu 0.6.0 shows aborted transactions to read_committed readers, so the scale-out kill
# test allows copies (each equal to batch's) of a final record from a merge transaction a
# kill cut (docs/kafka.md, "Scale-out"). Against Apache Kafka set it to 0: exactly one.
export LDPSTREAM_BROKER_SHOWS_ABORTED="${LDPSTREAM_BROKER_SHOWS_ABORTED:-1}"
echo "Kafka-protocol broker (Tansu) at $LDPSTREAM_KAFKA_BROKERS" >&2
stage "the Kafka broker"

# No module of a crate imports another in a circle, and no crate depends on one above it
# (the Python extension reaches no Kafka, TLS or async runtime) (ARCHITECTURE.md); no
# product file over 800 lines or function over 150; no doc link leaves the repository.
for check in check_module_cycles.py check_sizes.py check_doc_links.py; do
  status=0
  python3 "scripts/$check" 2>&1 | tee -a "$log" || status=$?
  result "$status" "scripts/$check" | tee -a "$log"
done
stage "layout checks"

# One compile for every lane: `cargo build --all-targets` compiles what `cargo test` runs,
# and also links the Python extension module (a cdylib, which `cargo test` does not), for
# scripts/python_env.sh. A failing cargo (a compile error prints no "test result:" line)
# is counted as a failure of its own.
# shellcheck source=scripts/cargo_features.sh
. scripts/cargo_features.sh
status=0
cargo build "${cargo_features[@]}" --all-targets 2>&1 | tee -a "$log" || status=$?
[ "$status" -eq 0 ] || result "$status" "cargo build ${cargo_features[*]} --all-targets" | tee -a "$log"
stage "compile"
# The prefetches ran at nice 19 so as not to slow the compile; whatever is left of them now
# gates the lanes, so it gets the normal priority back (root may lower a niceness; anyone
# else keeps waiting at 19).
descendants() { local p; for p in $(pgrep -P "$1"); do echo "$p"; descendants "$p"; done; }
# shellcheck disable=SC2046 # one pid per word
renice -n 0 -p $(descendants $$) >/dev/null 2>&1 || true
# promtool (the metrics tests) and chromium (the browser tests) before any test runs.
needs apt
if ! command -v promtool >/dev/null 2>&1; then
  echo "WARNING: promtool missing and not installable here; the promtool check will be SKIPPED" >&2
fi
# The Python extension laid out as the wheel lays it out, on .venv-py's path: the Python
# lane imports it, and the JS lane's distribution test draws from it.
needs python
py=$work/no-python
status=0
py=$(scripts/python_env.sh 2> >(tee -a "$log" >&2)) || status=$?
[ "$status" -eq 0 ] || result "$status" "scripts/python_env.sh" | tee -a "$log"
stage "waiting for apt and the Python venv"

bin="${CARGO_TARGET_DIR:-$PWD/target}/debug"
# Every test binary runs even when an earlier one failed (--no-fail-fast).
lane_rust_unit() {
  local status=0
  cargo test "${cargo_features[@]}" --lib --bins --benches --examples --no-fail-fast || status=$?
  [ "$status" -eq 0 ] || result "$status" "cargo test --lib --bins --benches --examples"
  status=0
  cargo test --workspace --doc || status=$?
  [ "$status" -eq 0 ] || result "$status" "cargo test --doc"
}
# The end-to-end tests mostly wait (serve's windows, the broker, child processes), so more
# of them run at a time than there are cores.
lane_rust_integration() {
  local status=0
  cargo test "${cargo_features[@]}" --test '*' --no-fail-fast -- --test-threads 3 || status=$?
  [ "$status" -eq 0 ] || result "$status" "cargo test --test '*'"
}
# The Python package's pytest suite, which runs the binary the tests built as the
# reference. pytest's summary becomes a "test result:" line; a run with no test passed
# counts as a failure.
lane_python() {
  local out=$work/pytest.out passed failed
  LDPSTREAM_BIN="$bin/ldpstream" "$py" -m pytest -q -p no:cacheprovider python/tests 2>&1 \
    | tee "$out" || true
  passed=$( (grep -Eo '[0-9]+ passed' "$out" || true) | tail -1 | grep -Eo '[0-9]+' || true)
  failed=$( (grep -Eo '[0-9]+ (failed|errors?)' "$out" || true) | (grep -Eo '[0-9]+' || true) | awk '{s+=$1} END {print s+0}')
  if [ "${passed:-0}" -eq 0 ] && [ "$failed" -eq 0 ]; then
    echo "error: the Python suite ran no test" >&2
    failed=1
  fi
  echo "test result: $([ "$failed" -eq 0 ] && echo ok || echo FAILED). ${passed:-0} passed; $failed failed; 0 ignored (python/tests)"
}
# The TypeScript client (scripts/js_client_test.sh: npm ci against the lockfile, node:test
# with the golden conformance replay, then the client's distribution, audit, Kafka
# end-to-end and headless-Chromium tests). It prints "test result:" lines.
lane_js() {
  needs npm
  local status=0
  scripts/js_client_test.sh || status=$?
  [ "$status" -eq 0 ] || result "$status" "scripts/js_client_test.sh"
}
# Every bench script in its smoke mode (a tiny input, one run), with the binaries the tests
# built, so that a bench that stops working fails here.
lane_bench_smoke() {
  needs bench
  local status=0
  LDPSTREAM_BIN_DIR="$bin" benches/smoke.sh || status=$?
  [ "$status" -eq 0 ] || result "$status" "benches/smoke.sh"
}
# The status page in headless Chromium (every configured test renders a card with its
# p-value plot and estimate bars), then the deployment artifacts against real tools and a
# real Prometheus scraping a running serve (hadolint, shellcheck, compose schema, promtool
# rule tests, kubernetes-validate, every dashboard query returning data, the alert firing
# only after the demo's switch).
lane_deploy() {
  needs deploy
  local status=0 started
  started=$(date +%s)
  LDPSTREAM_BIN="$bin/ldpstream" scripts/status_page_check.sh || status=$?
  result "$status" "status_page_check.sh, $(($(date +%s) - started)) s"
  status=0
  started=$(date +%s)
  LDPSTREAM_BIN="$bin/ldpstream" deploy/check.sh || status=$?
  result "$status" "deploy/check.sh, $(($(date +%s) - started)) s"
}
# Every dependency's license, source and known advisories (deny.toml).
lane_deny() {
  needs deny
  local status=0
  scripts/deny.sh || status=$?
  [ "$status" -eq 0 ] || result "$status" "scripts/deny.sh"
}
lanes=(rust_unit rust_integration python js bench_smoke deploy deny)
for lane in "${lanes[@]}"; do
  (
    started=$(date +%s)
    # A lane that stops early still ends with its seconds file, so the wait below ends.
    "lane_$lane" >"$work/lane.$lane.log" 2>&1 || result 1 "lane $lane stopped early" >>"$work/lane.$lane.log"
    echo $(($(date +%s) - started)) >"$work/lane.$lane.seconds"
  ) &
done
wait_lanes() {
  local lane
  for lane in "${lanes[@]}"; do
    while [ ! -f "$work/lane.$lane.seconds" ]; do sleep 1; done
  done
}
wait_lanes
for lane in "${lanes[@]}"; do
  echo "== lane $lane ($(cat "$work/lane.$lane.seconds") s)"
  tee -a "$log" <"$work/lane.$lane.log"
done
stage "test lanes, side by side"

passed=$(grep -E '^test result: ' "$log" | sed -E 's/.* ([0-9]+) passed.*/\1/' | awk '{s+=$1} END {print s+0}')
failed=$(grep -E '^test result: ' "$log" | sed -E 's/.* ([0-9]+) failed.*/\1/' | awk '{s+=$1} END {print s+0}')
echo "== wall time per stage"
printf '%s\n' "${timings[@]}"
for lane in "${lanes[@]}"; do
  printf '%6d s    lane %s\n' "$(cat "$work/lane.$lane.seconds")" "$lane"
done
echo "$(printf '%6d' $(($(date +%s) - suite_started))) s  in all"
echo "$passed passed, $failed failed"
if [ "$passed" -eq 0 ]; then
  echo "error: no tests ran" >&2
  exit 1
fi
[ "$failed" -eq 0 ]
