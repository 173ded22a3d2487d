#!/usr/bin/env bash
# The longitudinal kinds of issue 47 (lgrr, losue, lsue) at the issue's size (figures in
# benches/RESULTS.md; crates/engine/src/tests/longitudinal.rs):
#   - estimates: 10⁵ simulated devices, each keeping a memo per value and reporting through
#     the real client once per period, 10 periods, 10% of the devices redrawing their value
#     per period, 200 datasets: each (period, category) mean within 4 s.e. of the truth, the
#     variance of each category's estimates within 10% of the closed form;
#   - level: the GOF of the 10th period over 2,000 null datasets of 5,000 devices, at most
#     α + 2 s.e.; and lgrr's over 40,000 (a pre-declared seed), within α ± 3 s.e.
# The datasets of each check run in parallel (rayon, each dataset with its own seed, so the
# figures do not depend on the thread count).
# SMOKE=1 only checks that the filter still names tests: scripts/test.sh's `cargo test` has
# just run their CI-sized versions.
#
#   benches/longitudinal.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/cargo_features.sh
. scripts/cargo_features.sh
# --workspace and the features of scripts/test.sh's build, so nothing is compiled again.
tests=(cargo test --quiet "${cargo_features[@]}" --lib -- tests::longitudinal::)
if [ "${SMOKE:-0}" = 1 ]; then
  listed=$("${tests[@]}" --ignored --list 2>/dev/null | grep -c ': test$' || true)
  if [ "$listed" -eq 0 ]; then
    echo "no ignored test matches tests::longitudinal:: any more; update benches/longitudinal.sh" >&2
    exit 1
  fi
  echo "longitudinal: $listed full-size tests (smoke mode does not run them)"
  exit 0
fi
"${tests[@]}" --nocapture --test-threads 1 --ignored 2>&1 | grep -E '^longitudinal|test result|panicked'
