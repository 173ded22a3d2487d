#!/usr/bin/env bash
# The longitudinal kinds of issue 47 (lgrr, losue, lsue) at the issue's size (figures in
# benches/RESULTS.md; crates/engine/src/tests/longitudinal.rs):
#   - estimates: 10⁵ simulated devices, each keeping a memo per value and reporting through
#     the real client once per period, 10 periods, 10% of the devices redrawing their value
#     per period, 200 datasets: each (period, category) mean within 4 s.e. of the truth, the
#     variance of each category's estimates within 10% of the closed form;
#   - level: the GOF of the 10th period over 2,000 null datasets of 5,000 devices, at most
#     α + 2 s.e.
# SMOKE=1 runs the CI-sized tests instead (seconds).
#
#   benches/longitudinal.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${SMOKE:-0}" = 1 ]; then
  args=()
else
  args=(--ignored)
fi
cargo test --quiet --workspace --lib -- tests::longitudinal:: --nocapture --test-threads 1 "${args[@]}" 2>&1 \
  | grep -E '^longitudinal|test result|panicked'
