#!/usr/bin/env bash
# Every bench script in smoke mode (SMOKE=1: a tiny input, one run), so that a bench that
# stops working fails the test suite instead of the next person who times something.
# Fails when any script fails; prints one "test result:" line per script, which
# scripts/test.sh counts. The criterion benches (benches/benches/*.rs) are not run here:
# `cargo test --workspace --all-targets` already runs each of them once in test mode.
#
#   benches/smoke.sh            (debug binaries; SMOKE_PROFILE=release for release ones)
#
# The Kafka scripts use the broker in LDPSTREAM_KAFKA_BROKERS when it is set (scripts/test.sh
# starts one) and otherwise start their own on a free port.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
profile=${SMOKE_PROFILE:-debug}
flags=()
[ "$profile" = release ] && flags=(--release)
# scripts/test.sh passes the binaries its `cargo test --all-targets` just built: a second
# build in another profile would compile every dependency again.
if [ -z "${LDPSTREAM_BIN_DIR:-}" ]; then
  cargo build "${flags[@]}" --quiet -p ldpstream -p ldpstream-benches --bins || exit 1
fi
export LDPSTREAM_BIN_DIR=${LDPSTREAM_BIN_DIR:-${CARGO_TARGET_DIR:-target}/$profile}
export SMOKE=1
scripts=(compare.sh kafka_throughput.sh large_domain_memory.sh longitudinal.sh oracles.sh overload_rss.sh python_bench.sh row_groups.sh scale_out.sh scaling.sh sequential.sh sequential_groups.sh)
# Three scripts at a time: most wait on a broker, a child process or a Python start-up, not
# on the CPU. Each writes its own log and its own topics and temporary directories; the
# logs are printed in the list's order.
slots=${SMOKE_JOBS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run_one() { # run_one SCRIPT: its log and "test result:" line into $work/SCRIPT.*
  local s=$1 started status=0
  started=$(date +%s)
  timeout 900 "benches/$s" >"$work/$s.log" 2>&1 || status=$?
  echo "$status $(( $(date +%s) - started ))" >"$work/$s.done"
}
for s in "${scripts[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$slots" ]; do sleep 1; done
  run_one "$s" &
done
wait
failed=0
for s in "${scripts[@]}"; do
  echo "== benches/$s (smoke)" >&2
  read -r status seconds <"$work/$s.done"
  if [ "$status" -eq 0 ]; then
    tail -5 "$work/$s.log" >&2
    echo "test result: ok. 1 passed; 0 failed; 0 ignored (benches/$s smoke, $seconds s)"
  else
    cat "$work/$s.log" >&2
    echo "test result: FAILED. 0 passed; 1 failed; 0 ignored (benches/$s smoke, $seconds s)"
    failed=1
  fi
done
exit "$failed"
