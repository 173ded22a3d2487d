#!/usr/bin/env bash
# The frequency oracles of issue 30 at full size (figures in benches/RESULTS.md):
#   - estimates: 1,000 simulated datasets per (oracle, d, ε), d ∈ {16, 1024},
#     ε ∈ {0.5, 2, 5}, n = 20,000: empirical variance of the unbiased estimate against the
#     closed form (pooled over categories) and the mean's distance from the truth in
#     standard errors (`engine/tests/oue.rs`, LDPSTREAM_ORACLE_RUNS);
#   - the GOF size, power at the planner's n and sequential validity (the same test file);
#   - subset (k-subset selection): the same estimate check with reports drawn by the real
#     randomizer at n = 2,000, GOF size over 2,000 null datasets, power at the planner's n
#     and Monte Carlo size, sequential validity over 600 looks through the stream's
#     e-process dispatch (`engine/tests/subset.rs`);
#   - the same for `olh` (`engine/tests/olh.rs`, exact pool tables, S = 1024), plus its
#     #[ignore]d full runs: size at the default pool, power at the planner's n, 500 looks,
#     and the finite pool's bias against fresh seeds;
#   - OLH's sequential test on the whitened support statistic (`engine/tests/olh_sequential.rs`):
#     its level at the default pool over 500 looks and its median detection at the
#     planner's example over 1,000 streams;
#   - per-record Monte Carlo seeds: the size over 20,000 null groups at test seeds 0–4
#     (`engine/tests/mc_seeds.rs`);
#   - fold speed: `oue` against `bitflip` (the same popcount fold), `subset` (the list
#     fold) against them and `grr`, and `olh` against `grr`, one core, the median of
#     REPEATS folds of a batch of reports from each real randomizer (`oracle-fold`), and
#     OLH's snapshot estimate at d = 65,536, S = 1,024.
# SMOKE=1 runs each at a tiny size.
#
#   benches/oracles.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/cargo_features.sh
. scripts/cargo_features.sh
# Smoke: the filters still name tests, a tiny fold.
if [ "${SMOKE:-0}" = 1 ]; then
  runs="" rows=4096 repeats=3
else
  runs=${LDPSTREAM_ORACLE_RUNS:-1000} rows=${ORACLE_FOLD_ROWS:-1048576} repeats=${ORACLE_FOLD_REPEATS:-21}
fi
# oracle_tests MODULE [ARGS...]: the module's tests with their tables. In smoke mode only
# that the filter still names tests: scripts/test.sh's `cargo test` has just run them, and
# running them again cost CI minutes.
oracle_tests() {
  local module=$1
  shift
  if [ "${SMOKE:-0}" = 1 ]; then
    local listed
    listed=$(cargo test --quiet "${cargo_features[@]}" --lib -- "tests::$module::" --list 2>/dev/null | grep -c ': test$' || true)
    if [ "$listed" -eq 0 ]; then
      echo "no test matches tests::$module:: any more; update benches/oracles.sh" >&2
      return 1
    fi
    echo "$module: $listed tests (run by cargo test; smoke mode does not repeat them)"
    return 0
  fi
  LDPSTREAM_ORACLE_RUNS=$runs cargo test --quiet "${cargo_features[@]}" --lib -- "tests::$module::" --nocapture --test-threads 1 "$@" 2>&1
}
echo "# estimates: oracle | d | ε | datasets | var / closed form | max |mean − p|/s.e. | share beyond 3 s.e."
oracle_tests oue | grep -E '^\| |^oue|test result|panicked'
echo "# subset estimates: oracle | d | k | ε | datasets | var / closed form | max |mean − p|/s.e. | share beyond 3 s.e."
oracle_tests subset | grep -oE '^\| .*|subset.*|test result.*|panicked.*'
# OLH: the CI-sized tests and the #[ignore]d full runs.
oracle_tests olh --include-ignored --skip estimate_full_runs | grep -E '^\| |^olh|test result|panicked'
# OLH's unbiased pool estimate (issue 44's done-when): the mean over 200 datasets of 10⁶
# and the confidence sequences to 10⁷ at d = 16, 256, 1,024, ε = 1 and 2 (minutes).
echo "# OLH pool estimate: mean within 4 s.e.; time-uniform coverage (bound 1 − α − 2 s.e.)"
oracle_tests olh_unbiased --include-ignored | grep -E '^olh|test result|panicked'
# OLH's sequential test (issue 44): the whitened support statistic's level at the default
# pool over 500 looks (2,000 streams at d = 16, 500 at d = 256), and median detection over
# the fixed-n n at the planner's example over 1,000 streams (minutes).
echo "# OLH sequential: P(ever e >= 1/α) (bound α + 2 s.e.); median detection / fixed-n n"
oracle_tests olh_sequential --include-ignored | grep -E '^\| |^olh_sequential|test result|panicked'
# Per-record Monte Carlo seeds (issue 44): raw d = 10, n = 6, m = 999, at test seeds 0–4,
# the issue's 20,000 null groups each.
echo "# Monte Carlo seeds: size over null groups per test seed (bound α + 2 s.e.)"
oracle_tests mc_seeds per_group_seeds_hold_the_level_over_20000_groups --include-ignored | grep -E '^raw d|^mc_seeds|test result|panicked'
echo "# fold speed ($rows reports, median of $repeats folds, test profile: opt-level 3)"
# The test profile: the one scripts/test.sh has already built, so no second compile.
# scripts/test.sh's `cargo test --workspace --all-targets` already built it (and passes its
# directory as LDPSTREAM_BIN_DIR): building it again with `-p` would recompile arrow and
# parquet under another feature set, minutes of CI for nothing.
bin_dir=${LDPSTREAM_BIN_DIR:-}
if [ -z "$bin_dir" ] || [ ! -x "$bin_dir/oracle-fold" ]; then
  cargo build --quiet --profile test -p ldpstream-benches --bin oracle-fold
  bin_dir="${CARGO_TARGET_DIR:-target}/debug"
fi
"$bin_dir/oracle-fold" "$rows" "$repeats"
