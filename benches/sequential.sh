#!/usr/bin/env bash
# The sequential tests' simulations at full size, with their tables (issue 31):
#   - level: P(ever e >= 1/alpha | H0) of every e-process over 2,000 null streams x 500
#     looks (CI runs 500 streams), beside the fixed-n test looked at as often;
#   - small ε: P(ever e >= 1/alpha | H0) of the independence and two-sample e-processes at
#     ε ∈ {1e-9, 0.03, 0.25, 1}, 500 null groups × 40 looks of 1,000 reports;
#   - multiplicity: the false discovery rate across 1,000 groups (50 non-null) of alerting
#     on the anytime q-value, over 200 simulated monitors;
#   - Monte Carlo ties: the size of the simulated-p-value GOF at n = 2, 6, 20;
#   - power: median reports to detection at the planner's example (docs/user-guide.md, "plan"), with the
#     equal-weight mixture and with `design_n`, and `plan --sequential`'s prediction beside
#     the e-processes (1,000 streams each);
#   - confidence sequences: coverage over 500 looks and the width over n, with and without
#     `design_n`.
# Seeded; the figures are in benches/RESULTS.md. SMOKE=1 runs each at a tiny size.
#
#   benches/sequential.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/cargo_features.sh
. scripts/cargo_features.sh
if [ "${SMOKE:-0}" = 1 ]; then
  export LDPSTREAM_SEQ_GROUPS=10 LDPSTREAM_FDR_MONITORS=3
else
  export LDPSTREAM_SEQ_GROUPS=${LDPSTREAM_SEQ_GROUPS:-500} LDPSTREAM_FDR_MONITORS=${LDPSTREAM_FDR_MONITORS:-200}
  export LDPSTREAM_SEQ_STREAMS=${LDPSTREAM_SEQ_STREAMS:-2000}
fi
# --workspace, not -p: the same features as scripts/test.sh's build, so no second compile.
# run TEST [FILTER...]
run() {
  local name=$1
  shift
  cargo test --quiet "${cargo_features[@]}" --lib -- "tests::$name::" "$@" --nocapture --test-threads 1 2>&1 \
    | grep -E '\| |test result|panicked'
}
echo "# small epsilon, ${LDPSTREAM_SEQ_GROUPS} null groups x 40 looks x 1000 reports"
run sequential_small_eps
echo "# FDR across groups, ${LDPSTREAM_FDR_MONITORS} monitors"
run sequential_fdr
if [ "${SMOKE:-0}" != 1 ]; then
  echo "# level: P(ever reject) over ${LDPSTREAM_SEQ_STREAMS} null streams x 500 looks, and the fixed-n test's"
  run sequential validity
  echo "# Monte Carlo p-value ties (20,000 null datasets per n)"
  run small_n monte_carlo_size
  echo "# power: median reports to detection / fixed-n n, and the planner's prediction"
  run sequential power plan_matches misplanned
  echo "# confidence sequences: coverage at every look, width / Wald"
  run confidence_sequences
fi
