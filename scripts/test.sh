#!/usr/bin/env bash
# The whole test suite: every crate's unit, property, Monte Carlo and end-to-end tests.
# Fails when a test fails, and also when no test ran at all.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test --workspace --all-targets 2>&1 | tee "$log"
cargo test --workspace --doc 2>&1 | tee -a "$log"
passed=$(grep -E '^test result: ' "$log" | sed -E 's/.* ([0-9]+) passed.*/\1/' | awk '{s+=$1} END {print s+0}')
failed=$(grep -E '^test result: ' "$log" | sed -E 's/.* ([0-9]+) failed.*/\1/' | awk '{s+=$1} END {print s+0}')
echo "$passed passed, $failed failed"
if [ "$passed" -eq 0 ]; then
  echo "error: no tests ran" >&2
  exit 1
fi
[ "$failed" -eq 0 ]
