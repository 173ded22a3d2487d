#!/usr/bin/env bash
# Kafka source throughput: a bare rdkafka consumer that only counts messages versus
# `ldpstream serve` (decode, fold, windows, snapshots) on the same topic, same run.
#   benches/kafka_throughput.sh [N] [binary|json]      (default 5000000 binary)
# Needs release builds: cargo build --release --bin ldpstream -p ldpstream-benches --bin kafka-bench
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-5000000}
format=${2:-binary}
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
trap './deploy/kafka/stop-local.sh' EXIT
broker=$(./deploy/kafka/start-local.sh "$port")
topic="bench-$format-$$"
"$(cat .kafka/tansu.bin)" topic create --broker "tcp://$broker" --partitions 4 "$topic" >/dev/null
target/release/kafka-bench produce --brokers "$broker" --topic "$topic" --n "$n" --format "$format"
total=$((n + 4))
target/release/kafka-bench consume --brokers "$broker" --topic "$topic" --n "$total"
dir=$(mktemp -d)
cat >"$dir/bench.toml" <<TOML
[serve]
listen = "127.0.0.1:0"
snapshot_interval = "1s"
sink = [{ kind = "jsonl", path = "$dir/out.jsonl" }]
[[stream]]
name = "bench"
source = { kind = "kafka", brokers = "$broker", topics = ["$topic"], group_id = "bench-serve", format = "$format", end_marker = true }
mechanism = { kind = "grr", epsilon = 1.0, domain = 16 }
allowed_lateness = "1h"
[[stream.test]]
name = "gof"
kind = "gof"
null = "uniform"
window = { kind = "tumbling", size = "1m" }
TOML
start=$(date +%s.%N)
target/release/ldpstream serve --config "$dir/bench.toml" 2>/dev/null >/dev/null
end=$(date +%s.%N)
python3 - "$start" "$end" "$n" <<'PY'
import sys
s, e, n = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
print(f"serve: {n} reports in {e-s:.2f} s = {n/(e-s):.0f} reports/s (wall time incl. start-up and final results)")
PY
rm -rf "$dir"
