#!/usr/bin/env bash
# The whole test suite: every crate's unit, property, Monte Carlo and end-to-end tests.
# Fails when a test fails, and also when no test ran at all.
#
# After the Rust tests it runs deploy/check.sh (the deployment artifacts, checked against
# real tools and a real Prometheus) and scripts/deny.sh (cargo deny: licenses, bans,
# sources, advisories).
#
# Around the tests it starts a local Kafka-protocol broker (deploy/kafka/start-local.sh,
# stopped again on exit) and exports its address as LDPSTREAM_KAFKA_BROKERS for the Kafka
# integration tests. It installs promtool (Debian package `prometheus`) when missing, for
# the `promtool check metrics` test (scripts/prefetch.sh, in the background while cargo
# compiles); if that is impossible the test says so loudly.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
cleanup() {
  # The background stages and prefetches of a run that stopped early.
  local pids
  pids=$(jobs -p)
  if [ -n "$pids" ]; then
    # shellcheck disable=SC2086 # one pid per word
    kill $pids 2>/dev/null || true
  fi
  rm -f "$log"
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

# Installs that wait on the network (Debian's prometheus and chromium, the Python and npm
# test packages, the deploy linters) and cargo-deny's build run in the background while
# cargo compiles (scripts/prefetch.sh); each is awaited before the first stage that needs
# it. promtool is needed by the metrics tests, so the apt part is awaited before them.
prefetch_apt_log=$(mktemp)
prefetch_tools_log=$(mktemp)
scripts/prefetch.sh apt >"$prefetch_apt_log" 2>&1 &
prefetch_apt=$!
scripts/prefetch.sh tools >"$prefetch_tools_log" 2>&1 &
prefetch_tools=$!
await() { # await PID LOG WHAT
  if ! wait "$1"; then
    echo "WARNING: the prefetch of $3 failed (each stage installs what is missing itself):" >&2
    tail -20 "$2" >&2
  fi
  rm -f "$2"
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
stage "promtool and the Kafka broker"

# No module of a crate imports another in a circle, and no crate depends on one above it
# (the Python extension reaches no Kafka, TLS or async runtime) (ARCHITECTURE.md); no
# product file over 800 lines or function over 150; no doc link leaves the repository.
for check in check_module_cycles.py check_sizes.py check_doc_links.py; do
  if python3 "scripts/$check" 2>&1 | tee -a "$log"; then
    echo "test result: ok. 1 passed; 0 failed; 0 ignored (scripts/$check)" | tee -a "$log"
  else
    echo "test result: FAILED. 0 passed; 1 failed; 0 ignored (scripts/$check)" | tee -a "$log"
  fi
done
stage "layout checks"

# Built first on its own, so the timings below tell compiling from testing. Every test
# binary runs even when an earlier one failed (--no-fail-fast), and so do the stages
# after it; a failing cargo (a compile error prints no "test result:" line) is counted as
# a failure of its own.
cargo_test() {
  if ! cargo test "$@" 2>&1 | tee -a "$log"; then
    echo "test result: FAILED. 0 passed; 1 failed; 0 ignored (cargo test $* exited non-zero)" | tee -a "$log"
  fi
}
# shellcheck source=scripts/cargo_features.sh
. scripts/cargo_features.sh
features=("${cargo_features[@]}" --all-targets)
# `cargo build --all-targets` compiles what `cargo test` runs, and also links the Python
# extension module (a cdylib, which `cargo test` does not), for scripts/python_env.sh.
if ! cargo build "${features[@]}" 2>&1 | tee -a "$log"; then
  echo "test result: FAILED. 0 passed; 1 failed; 0 ignored (cargo build ${features[*]} exited non-zero)" | tee -a "$log"
fi
stage "cargo test: compile"
await "$prefetch_apt" "$prefetch_apt_log" "Debian's prometheus and chromium"
if ! command -v promtool >/dev/null 2>&1; then
  echo "WARNING: promtool missing and not installable here; the promtool check will be SKIPPED" >&2
fi
stage "waiting for the apt prefetch"

# The integration tests (mostly waiting on serve's windows, the broker and child
# processes) run beside the unit tests (mostly Monte Carlo checks on both cores), their
# output kept apart and printed after. In sequence, a fresh-clone run spent 179 s in the
# CLI's integration binary and 172 s in the engine's unit tests (benches/RESULTS.md).
integration_log=$(mktemp)
cargo test "${cargo_features[@]}" --test '*' --no-fail-fast >"$integration_log" 2>&1 &
integration_pid=$!
cargo_test "${cargo_features[@]}" --lib --bins --benches --examples --no-fail-fast
integration_status=0
wait "$integration_pid" || integration_status=$?
echo "== integration tests (run beside the unit tests)"
tee -a "$log" <"$integration_log"
rm -f "$integration_log"
if [ "$integration_status" -ne 0 ]; then
  echo "test result: FAILED. 0 passed; 1 failed; 0 ignored (cargo test --test '*' exited non-zero)" | tee -a "$log"
fi
stage "cargo test: run"
cargo_test --workspace --doc
stage "doc tests"

await "$prefetch_tools" "$prefetch_tools_log" "the Python, npm and deploy tools and cargo-deny"
stage "waiting for the tools prefetch"

# In the background while the stages below run, with its output kept apart and printed at
# the end: the status page and deploy/check.sh mostly wait (a headless browser; serve and
# Prometheus run a minute so the alert can fire and the rate windows fill), so in sequence
# they cost about 150 s of a CI run's wall time and little CPU. Started after the tools
# prefetch, whose deploy linters deploy/check.sh uses; awaited only here, because the
# prefetch's cargo-deny build was still running when a fresh clone's compile ended.
background_log=$(mktemp)
background() {
  local started
  # The status page in a real browser (headless Chromium, installed when missing): every
  # configured test renders a card with its p-value plot and estimate bars.
  started=$(date +%s)
  if LDPSTREAM_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/ldpstream" scripts/status_page_check.sh; then
    echo "test result: ok. 1 passed; 0 failed; 0 ignored (status_page_check.sh, $(( $(date +%s) - started )) s)"
  else
    echo "test result: FAILED. 0 passed; 1 failed; 0 ignored (status_page_check.sh)"
  fi
  # The deployment artifacts against real tools and a real Prometheus scraping a running
  # serve (deploy/check.sh: hadolint, shellcheck, compose schema, promtool rule tests,
  # kubernetes-validate, every dashboard query returning data, the alert firing only after
  # the demo's switch). It uses the binary the tests just built.
  started=$(date +%s)
  if LDPSTREAM_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/ldpstream" deploy/check.sh; then
    echo "test result: ok. 1 passed; 0 failed; 0 ignored (deploy/check.sh, $(( $(date +%s) - started )) s)"
  else
    echo "test result: FAILED. 0 passed; 1 failed; 0 ignored (deploy/check.sh)"
  fi
}
background >"$background_log" 2>&1 &
background_pid=$!

# The Python package (python/): the extension module built above, laid out as the wheel
# lays it out and put on the path of the git-ignored venv .venv-py (scripts/python_env.sh),
# then its pytest suite, which runs the binary the tests just built as the reference.
# pytest's summary becomes a "test result:" line; a run with no test passed counts as a
# failure.
py_started=$(date +%s)
if py=$(scripts/python_env.sh 2> >(tee -a "$log" >&2)) \
  && LDPSTREAM_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/ldpstream" \
    "$py" -m pytest -q -p no:cacheprovider python/tests 2>&1 | tee "$log.py"; then :; fi
py_passed=$( (grep -Eo '[0-9]+ passed' "$log.py" || true) | tail -1 | grep -Eo '[0-9]+' || true)
py_failed=$( (grep -Eo '[0-9]+ (failed|errors?)' "$log.py" || true) | (grep -Eo '[0-9]+' || true) | awk '{s+=$1} END {print s+0}')
if [ "${py_passed:-0}" -eq 0 ] && [ "$py_failed" -eq 0 ]; then
  echo "error: the Python suite ran no test" >&2
  py_failed=1
fi
echo "test result: $([ "$py_failed" -eq 0 ] && echo ok || echo FAILED). ${py_passed:-0} passed; $py_failed failed; 0 ignored (python/tests, $(( $(date +%s) - py_started )) s)" | tee -a "$log"
rm -f "$log.py"
stage "Python package (install and pytest)"


# The TypeScript client (scripts/js_client_test.sh: npm ci against
# clients/js/package-lock.json, node:test with the golden conformance replay, then the
# client's distribution, audit, Kafka end-to-end and headless-Chromium tests; chromium
# comes from the apt prefetch awaited above). It prints "test result:" lines.
if ! scripts/js_client_test.sh 2>&1 | tee -a "$log"; then
  echo "test result: FAILED. 0 passed; 1 failed; 0 ignored (scripts/js_client_test.sh)" | tee -a "$log"
fi
stage "JS client"

# Every bench script in its smoke mode (a tiny input, one run), with the binaries the tests
# just built, so that a bench that stops working fails here. It prints its own
# "test result:" line per script.
if ! LDPSTREAM_BIN_DIR="${CARGO_TARGET_DIR:-target}/debug" benches/smoke.sh 2>&1 | tee -a "$log"; then
  echo "test result: FAILED. 0 passed; 1 failed; 0 ignored (benches/smoke.sh)" | tee -a "$log"
fi
stage "bench smoke"
# Every dependency's license, source and known advisories (deny.toml; cargo-deny is built
# into .tools/ the first time). It prints its own "test result:" lines.
if ! scripts/deny.sh 2>&1 | tee -a "$log"; then
  echo "test result: FAILED. 0 passed; 1 failed; 0 ignored (scripts/deny.sh)" | tee -a "$log"
fi
stage "cargo deny"
wait "$background_pid" || true
echo "== status page and deploy check (run in the background since the doc tests)"
tee -a "$log" <"$background_log"
rm -f "$background_log"
stage "waiting for the status page and deploy check"
passed=$(grep -E '^test result: ' "$log" | sed -E 's/.* ([0-9]+) passed.*/\1/' | awk '{s+=$1} END {print s+0}')
failed=$(grep -E '^test result: ' "$log" | sed -E 's/.* ([0-9]+) failed.*/\1/' | awk '{s+=$1} END {print s+0}')
echo "== wall time per stage"
printf '%s\n' "${timings[@]}"
echo "$(printf '%6d' $(( $(date +%s) - suite_started ))) s  in all"
echo "$passed passed, $failed failed"
if [ "$passed" -eq 0 ]; then
  echo "error: no tests ran" >&2
  exit 1
fi
[ "$failed" -eq 0 ]
