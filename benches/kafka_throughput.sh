#!/usr/bin/env bash
# Kafka source throughput: a bare rdkafka consumer that only counts messages versus
# `ldpstream serve` (decode, fold, windows, snapshots) on the same topic, same run.
#   benches/kafka_throughput.sh [N] [binary|json] [RUNS]   (default 5000000 binary 3)
#   benches/kafka_throughput.sh --instances [N] [FAILOVER_N]
# The second form measures serve's scale-out mode (state in Kafka) with 1, 2 and 3
# instances and the failover time after a SIGKILL; it runs benches/scale_out.sh.
# Alternates bare, serve, bare, serve, ... and prints each run and the median ratio.
# serve's rate is the one it logs: messages read from the group's assignment to the last
# end marker (the same span the bare consumer times, from assign to its last message);
# its whole-process wall time, with start-up, the group join and final results, is
# printed beside it.
# Each serve run gets a directory of its own (config, results and its durable state), so a
# run never restores the previous run's checkpoint and skips the topic.
# STREAM_GROUPS=G (default 0: none): every report carries a group column `g` with G values
# (report i in group i mod G) and serve's stream groups by it (`group_by = ["g"]`), so the
# grouped fold is measured against the same bare consumer.
# SMOKE=1: 20,000 messages, one run. A broker in LDPSTREAM_KAFKA_BROKERS is used when set.
# Needs release builds: cargo build --release -p ldpstream -p ldpstream-benches --bin ldpstream --bin kafka-bench
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/bench_env.sh
if [ "${1:-}" = "--instances" ]; then
  shift
  exec benches/scale_out.sh "$@"
fi
n=${1:-5000000}
format=${2:-binary}
runs=${3:-3}
groups=${STREAM_GROUPS:-0}
if [ "$SMOKE" = 1 ]; then n=20000 runs=1; fi
bench_need_bins ldpstream kafka-bench
dir=$(mktemp -d)
trap 'bench_stop_broker; rm -rf "$dir"' EXIT
bench_broker
broker=$BROKER
topic="bench-$format-g$groups-$$"
columns=""
if [ "$groups" -gt 0 ]; then
  columns="columns = { group_by = [\"g\"] }
max_groups = $((groups + 1))"
fi
"$TANSU" topic create --broker "tcp://$broker" --partitions 4 "$topic" >/dev/null
"$BIN_DIR/kafka-bench" produce --brokers "$broker" --topic "$topic" --n "$n" --format "$format" --groups "$groups"
total=$((n + 4))
echo "groups $groups; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
bare=()
served=()
for run in $(seq 1 "$runs"); do
  line=$("$BIN_DIR/kafka-bench" consume --brokers "$broker" --topic "$topic" --n "$total")
  echo "run $run: $line"
  bare+=("$(echo "$line" | sed -E 's/.*= ([0-9]+) msg\/s/\1/')")
  run_dir="$dir/run$run"
  mkdir "$run_dir"
  cat >"$run_dir/bench.toml" <<TOML
[serve]
listen = "127.0.0.1:0"
snapshot_interval = "1s"
sink = [{ kind = "jsonl", path = "$run_dir/out.jsonl" }]
[[stream]]
name = "bench"
source = { kind = "kafka", brokers = "$broker", topics = ["$topic"], group_id = "bench-serve-$$-$run", format = "$format", end_marker = true }
mechanism = { kind = "grr", epsilon = 1.0, domain = 16 }
allowed_lateness = "1h"
$columns
[[stream.test]]
name = "gof"
kind = "gof"
null = "uniform"
window = { kind = "tumbling", size = "1m" }
TOML
  start=$(date +%s.%N)
  RUST_LOG=ldpstream_connectors::kafka::source=info NO_COLOR=1 \
    "$BIN_DIR/ldpstream" serve --config "$run_dir/bench.toml" 2>"$run_dir/err.log" >/dev/null
  end=$(date +%s.%N)
  rate=$(sed -E 's/\x1b\[[0-9;]*m//g' "$run_dir/err.log" | grep "Kafka input ended" | sed -E 's/.* rate=([0-9.]+).*/\1/' || true)
  if [ -z "$rate" ]; then
    echo "run $run: serve logged no 'Kafka input ended' line; its log ends with:" >&2
    tail -20 "$run_dir/err.log" >&2
    exit 1
  fi
  served+=("$rate")
  python3 - "$start" "$end" "$n" "$rate" <<'PY'
import sys
s, e, n, r = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
print(f"       serve: {r:.0f} msg/s while reading; whole process {e-s:.2f} s = {n/(e-s):.0f} reports/s")
PY
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "${bare[*]}" "${served[*]}" <<'PY'
import statistics, sys
bare = [float(x) for x in sys.argv[1].split()]
served = [float(x) for x in sys.argv[2].split()]
mb, ms = statistics.median(bare), statistics.median(served)
print(f"median: bare {mb:.0f} msg/s, serve {ms:.0f} msg/s, serve/bare = {ms/mb:.2f}")
PY
