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
cd "$(dirname "$0")/.."
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
failed=0
for s in "${scripts[@]}"; do
  echo "== benches/$s (smoke)" >&2
  log=$(mktemp)
  started=$(date +%s)
  if timeout 900 "benches/$s" >"$log" 2>&1; then
    tail -5 "$log" >&2
    echo "test result: ok. 1 passed; 0 failed; 0 ignored (benches/$s smoke, $(( $(date +%s) - started )) s)"
  else
    cat "$log" >&2
    echo "test result: FAILED. 0 passed; 1 failed; 0 ignored (benches/$s smoke, $(( $(date +%s) - started )) s)"
    failed=1
  fi
  rm -f "$log"
done
exit "$failed"
