#!/usr/bin/env bash
# Overload run: is `serve`'s memory bounded when its input arrives faster than it can
# fold and snapshot? A backlog is written first, then a producer keeps writing at full
# speed for the whole run while `serve` reads the topic with 500 groups, sliding windows,
# a sequential test and a snapshot every second. Every SAMPLE seconds the script records
# serve's RSS (/proc), the reports it has folded and its consumer lag (/metrics), and at
# the end prints the table, the p99 snapshot latency and a PNG plot path.
#   benches/overload_rss.sh [SECONDS] [BACKLOG] [RATE]   (default 600 s, 5000000 messages)
# With RATE (messages/s) the producer is held at that rate instead of full speed: the
# sustained-load run (benches/load_rss.png and .samples.txt instead of overload_rss.*).
# Needs release builds: cargo build --release -p ldpstream -p ldpstream-benches --bin ldpstream --bin kafka-bench
# The plot needs python3 with matplotlib (installed into benches/.venv when missing).
# SMOKE=1: 6 s, 2,000 backlog messages, 1 s samples, and the plot and samples go to a
# temporary directory instead of benches/. A broker in LDPSTREAM_KAFKA_BROKERS is used when set.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/bench_env.sh
seconds=${1:-600}
backlog=${2:-5000000}
rate=${3:-}
name=overload_rss
out=benches
rate_args=()
if [ -n "$rate" ]; then
  name=load_rss
  rate_args=(--rate "$rate")
fi
sample=5
# serve runs this much longer than the producer, to read what is left and show that
# every message was folded.
drain=30
groups=500
bench_need_bins ldpstream kafka-bench
dir=$(mktemp -d)
if [ "$SMOKE" = 1 ]; then seconds=6 backlog=2000 sample=1 drain=4 out=$dir/out; mkdir -p "$out"; fi
serve_pid=
producer_pid=
cleanup() {
  [ -n "$producer_pid" ] && kill "$producer_pid" 2>/dev/null || true
  [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null || true
  bench_stop_broker
}
trap cleanup EXIT
bench_broker
broker=$BROKER
topic="overload-$$"
"$TANSU" topic create --broker "tcp://$broker" --partitions 4 "$topic" >/dev/null
echo "backlog: $backlog messages, $groups groups, producer rate: ${rate:-full speed}" >&2
if [ "$backlog" -gt 0 ]; then
  "$BIN_DIR/kafka-bench" produce --brokers "$broker" --topic "$topic" --n "$backlog" \
    --groups "$groups" --seconds 100000 >&2
fi

cat >"$dir/overload.toml" <<TOML
[serve]
listen = "127.0.0.1:0"
snapshot_interval = "1s"
# stdout, into /dev/null below: every record is still serialized and written, but about
# 33,000 records a second would fill tens of GB of disk in half an hour.
sink = [{ kind = "stdout" }]
[[stream]]
name = "overload"
source = { kind = "kafka", brokers = "$broker", topics = ["$topic"], group_id = "overload-$$", format = "binary" }
mechanism = { kind = "grr", epsilon = 1.0, domain = 16 }
columns = { group_by = ["g"] }
allowed_lateness = "1m"
[[stream.test]]
name = "sliding"
kind = "gof"
null = "uniform"
window = { kind = "sliding", size = "10m", slide = "10s" }
[[stream.test]]
name = "monitor"
kind = "gof"
null = "uniform"
sequential = true
window = { kind = "cumulative" }
TOML

NO_COLOR=1 "$BIN_DIR/ldpstream" serve --config "$dir/overload.toml" \
  --duration "$((seconds + drain))s" 2>"$dir/serve.log" >/dev/null &
serve_pid=$!
for _ in $(seq 1 100); do
  grep -q "listening on" "$dir/serve.log" && break
  sleep 0.2
done
url=$(sed -nE 's/.*listening on (http:[^ ]+).*/\1/p' "$dir/serve.log" | head -1)
[ -n "$url" ] || { cat "$dir/serve.log" >&2; exit 1; }
"$BIN_DIR/kafka-bench" produce --brokers "$broker" --topic "$topic" --n 0 \
  --groups "$groups" --seconds "$seconds" "${rate_args[@]}" >"$dir/producer.log" 2>&1 &
producer_pid=$!

echo "t_s rss_mib reports_folded lag" | tee "$dir/samples.txt"
start=$(date +%s)
while kill -0 "$serve_pid" 2>/dev/null; do
  rss=$(awk '/VmRSS/ {printf "%.1f", $2/1024}' "/proc/$serve_pid/status" 2>/dev/null || echo "")
  [ -n "$rss" ] || break
  metrics=$(curl -s --max-time 2 "$url/metrics" || true)
  [ -n "$metrics" ] && echo "$metrics" >"$dir/metrics.last"
  folded=$(echo "$metrics" | awk '/^ldpstream_reports_total\{/ {s+=$2} END {printf "%.0f", s}')
  lag=$(echo "$metrics" | awk '/^ldpstream_kafka_consumer_lag\{/ {s+=$2} END {printf "%.0f", s}')
  echo "$(( $(date +%s) - start )) $rss $folded $lag" | tee -a "$dir/samples.txt"
  sleep "$sample"
done
wait "$serve_pid" || { echo "serve failed:" >&2; tail -20 "$dir/serve.log" >&2; exit 1; }
serve_pid=
wait "$producer_pid" || true
producer_pid=
cat "$dir/producer.log"
grep -E "ERROR|panicked" "$dir/serve.log" >&2 && echo "serve logged errors (above)" >&2

live=$(sed -nE 's/^produced ([0-9]+) messages.*/\1/p' "$dir/producer.log")
python3 - "$dir/samples.txt" "$backlog" "${live:-0}" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[1:] if len(l.split()) == 4]
rows = [(int(t), float(r), int(f or 0), int(g or 0)) for t, r, f, g in rows]
warm = [r for r in rows if r[0] >= 60] or rows
rss = [r[1] for r in warm]
print(f"samples: {len(rows)}; RSS after the first minute: min {min(rss):.0f} MiB, "
      f"max {max(rss):.0f} MiB; peak over the run {max(r[1] for r in rows):.0f} MiB")
print(f"reports folded: {rows[-1][2]}; consumer lag: max {max(r[3] for r in rows)}, last {rows[-1][3]}")
produced = int(sys.argv[2]) + int(sys.argv[3])
print(f"messages written (backlog + live): {produced}; not folded: {produced - rows[-1][2]}")
PY
# p99 of the snapshot rounds, interpolated within its histogram bucket as Prometheus'
# histogram_quantile does, from the last scrape.
python3 - "$dir/metrics.last" <<'PY'
import re, sys
buckets = []
for line in open(sys.argv[1]):
    m = re.match(r'ldpstream_snapshot_duration_seconds_bucket\{.*le="([^"]+)".*\} (\S+)', line)
    if m:
        buckets.append((float(m.group(1)), float(m.group(2))))
buckets.sort()
total = buckets[-1][1]
rank, lower, below = 0.99 * total, 0.0, 0.0
for le, count in buckets:
    if count >= rank:
        if le == float("inf"):
            print(f"snapshot rounds: {total:.0f}; p99 above {lower} s (the top bucket)")
        else:
            p99 = lower + (le - lower) * (rank - below) / max(count - below, 1)
            print(f"snapshot rounds: {total:.0f}; p99 {p99:.2f} s (bucket {lower}-{le} s)")
        break
    lower, below = le, count
PY
venv=benches/.venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import matplotlib' 2>/dev/null; then
  python3 -m venv "$venv" && "$venv/bin/pip" -q install -r benches/requirements-tools.txt || true
fi
"$venv/bin/python" - "$dir/samples.txt" "$out/$name.png" <<'PY' || echo "no plot (matplotlib missing)" >&2
import sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[1:] if len(l.split()) == 4]
t = [int(r[0]) for r in rows]
fig, ax = plt.subplots(figsize=(8, 4))
ax.plot(t, [float(r[1]) for r in rows], label="serve RSS (MiB)")
ax.set_xlabel("seconds")
ax.set_ylabel("RSS (MiB)")
ax2 = ax.twinx()
ax2.plot(t, [int(r[3] or 0) / 1e6 for r in rows], color="tab:red", label="consumer lag (M messages)")
ax2.set_ylabel("consumer lag (M messages)")
fig.legend(loc="upper left")
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=100)
print(f"plot: {sys.argv[2]}")
PY
cp "$dir/samples.txt" "$out/$name.samples.txt"
rm -rf "$dir"
