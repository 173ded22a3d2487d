#!/usr/bin/env bash
# Repeats the scale-out kill test (tests/kafka_scale_out.rs,
# instances_join_and_die_yet_each_window_has_one_final_equal_to_batch) RUNS times, each
# with its own LDPSTREAM_STRESS_SEED, so that the merge owner is SIGKILLed at varied
# moments: between transactions (seed % 3 = 0), 0-0.6 s after it emitted a window
# (seed % 3 = 1: just after a window boundary, often mid-transaction of its fold) or
# 0-3 s into the second third of the input (seed % 3 = 2: mid-fold, mid-transaction);
# and a fold-only instance 0.1-1.5 s into the last third. Every run checks that the
# results topic holds exactly one final record per window (the global one too), equal to
# `batch`'s over the same reports, and that every instance exits by itself after the end
# markers.
#
# On Tansu 0.6.0 (the default, LDPSTREAM_BROKER_SHOWS_ABORTED=1) a window may also have
# copies of its final record from a merge transaction that a kill cut, since that
# broker's read_committed returns aborted transactions (docs/kafka.md, "Scale-out"); each copy
# must equal batch's too, and the runs that had any are counted. Against a broker that
# hides aborted transactions (Apache Kafka) set LDPSTREAM_BROKER_SHOWS_ABORTED=0: exactly
# one final record per window.
#
#   LDPSTREAM_KAFKA_BROKERS=127.0.0.1:19192 scripts/scale_out_stress.sh [RUNS] [FIRST_SEED]
#
# Needs a running broker (deploy/kafka/start-local.sh prints its address). Prints one
# line per run, then the pass count, the run times, and the merge take-over times after
# each kind of kill (min / median / max, n) that benches/RESULTS.md reports. Each run's
# output is kept in $LDPSTREAM_STRESS_LOGS (default: a temporary directory, printed).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/cargo_features.sh
. scripts/cargo_features.sh
runs="${1:-20}"
first="${2:-1}"
: "${LDPSTREAM_KAFKA_BROKERS:?set LDPSTREAM_KAFKA_BROKERS to a running broker (deploy/kafka/start-local.sh)}"
export LDPSTREAM_BROKER_SHOWS_ABORTED="${LDPSTREAM_BROKER_SHOWS_ABORTED:-1}"
logs="${LDPSTREAM_STRESS_LOGS:-$(mktemp -d /tmp/scale-out-stress.XXXXXX)}"
mkdir -p "$logs"
test_name=kafka::scale_out::instances_join_and_die_yet_each_window_has_one_final_equal_to_batch

echo "building the test (cargo's progress follows)..." >&2
cargo test "${cargo_features[@]}" --test integration --no-run 2>&1 | tail -n 3 >&2
exe=$(cargo test "${cargo_features[@]}" --test integration --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "integration" and m["package_id"].find("crates/cli") >= 0 and m.get("executable"):
        print(m["executable"])')
echo "test binary: $exe; logs in $logs" >&2

pass=0
with_copies=0
for seed in $(seq "$first" $((first + runs - 1))); do
  log="$logs/run-$seed.log"
  start=$(date +%s.%N)
  if LDPSTREAM_STRESS_SEED=$seed "$exe" --exact "$test_name" --nocapture >"$log" 2>&1; then
    result=pass
    pass=$((pass + 1))
  else
    result=FAIL
  fi
  secs=$(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')")
  echo "$secs" >>"$logs/times"
  failover=$(grep -o 'FAILOVER kind=[a-z_]* secs=[0-9.]*' "$log" | sed 's/FAILOVER //' | tr '\n' ' ' || true)
  duplicates=$(grep -o 'DUPLICATE_FINALS n=[0-9]*' "$log" | sed 's/DUPLICATE_FINALS n=/copies=/' || true)
  [ -n "$duplicates" ] && with_copies=$((with_copies + 1))
  printf 'run seed=%-3s mode=%s %s %6ss  %s %s\n' "$seed" $((seed % 3)) "$result" "$secs" "$failover" "$duplicates"
done

echo "passed $pass of $runs runs; $with_copies with copies of a final record from a merge transaction a kill cut (each equal to batch's)"
python3 - "$logs" <<'PY'
import glob, re, statistics, sys
logs = sys.argv[1]
times = [float(t) for t in open(f"{logs}/times")]
def line(name, xs, unit="s"):
    if not xs:
        print(f"{name}: none")
        return
    print(f"{name}: n={len(xs)} min={min(xs):.2f}{unit} median={statistics.median(xs):.2f}{unit} max={max(xs):.2f}{unit}")
line("run time", times)
kinds = {}
for path in glob.glob(f"{logs}/run-*.log"):
    for kind, secs in re.findall(r"FAILOVER kind=([a-z_]+) secs=([0-9.]+)", open(path, errors="replace").read()):
        kinds.setdefault(kind, []).append(float(secs))
for kind in sorted(kinds):
    line(f"merge take-over after a {kind} kill (kill -> a survivor has read the partials back)", kinds[kind])
PY
[ "$pass" = "$runs" ]
