#!/usr/bin/env bash
# serve's scale-out mode (state in Kafka, issue 15): throughput with 1, 2 and 3 instances
# on one machine, and the failover time after a SIGKILL.
#   benches/scale_out.sh [N] [FAILOVER_N]        (default 3000000 20000000)
# Throughput: N binary reports on a 6-partition topic, read by k instances in one group;
# the time is from starting the instances to the merge owner's log line saying every
# partition ended and the last final record is out (so it includes the group join, the
# take-overs and every transaction), and the rate is N over that time.
# Failover: 2 instances on FAILOVER_N reports; once both fold, the one that owns the merge
# is killed with SIGKILL. Printed: the time from the kill to the survivor owning all 6
# partitions again (their state restored from the changelog), and to the survivor's merge
# having read the partials back.
# SMOKE=1: the throughput part on 20,000 reports; the failover part is skipped (with debug
# binaries on a loaded machine the survivor did not log the end of every partition within
# 600 s, which needs looking into before it can gate CI). A broker in
# LDPSTREAM_KAFKA_BROKERS is used when set.
# Needs release builds: cargo build --release -p ldpstream -p ldpstream-benches --bin ldpstream --bin kafka-bench
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/bench_env.sh
n=${1:-3000000}
failover_n=${2:-20000000}
if [ "$SMOKE" = 1 ]; then n=20000; fi
bench_need_bins ldpstream kafka-bench
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  bench_stop_broker
  rm -rf "$dir"
}
trap cleanup EXIT
bench_broker
broker=$BROKER
tansu=$TANSU
topic() { "$tansu" topic create --broker "tcp://$broker" --partitions "$2" "$1" >/dev/null; }

# config FILE GROUP TOPIC RESULTS STATE
config() {
  cat >"$1" <<TOML
[serve]
listen = "127.0.0.1:0"
snapshot_interval = "1s"
[[stream]]
name = "bench"
source = { kind = "kafka", brokers = "$broker", topics = ["$3"], group_id = "$2", format = "binary", end_marker = true, scale_out = { results_topic = "$4", commit_interval = "1s" } }
mechanism = { kind = "grr", epsilon = 1.0, domain = 16 }
allowed_lateness = "1h"
[[stream.test]]
name = "minute"
kind = "gof"
null = "uniform"
window = { kind = "tumbling", size = "1m" }
[[stream.test]]
name = "all"
kind = "gof"
null = "uniform"
TOML
}

# start NAME CONFIG: starts an instance, logging at info into $dir/NAME.log
start() {
  RUST_LOG=ldpstream_serve::scale_out=info NO_COLOR=1 \
    "$BIN_DIR/ldpstream" serve --config "$2" 2>"$dir/$1.log" >/dev/null &
  pids+=($!)
  echo $!
}

# wait_for PATTERN FILES...: until one of the logs has the line (600 s at most)
wait_for() {
  local pattern=$1
  shift
  for _ in $(seq 1 3000); do
    if grep -h "$pattern" "$@" 2>/dev/null | head -1 | grep -q .; then return 0; fi
    sleep 0.2
  done
  echo "timed out waiting for: $pattern" >&2
  return 1
}

# first_after PATTERN FILE T: the epoch seconds of the first log line matching PATTERN
# stamped after T (waits for it, 600 s at most)
first_after() {
  for _ in $(seq 1 3000); do
    if python3 - "$@" <<'PY'
import datetime, re, sys
pattern, path, after = sys.argv[1], sys.argv[2], float(sys.argv[3])
for line in open(path, errors="replace"):
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)
    if not re.search(pattern, line):
        continue
    t = datetime.datetime.fromisoformat(line.split()[0].replace("Z", "+00:00")).timestamp()
    if t > after:
        print(t)
        sys.exit(0)
sys.exit(1)
PY
    then return 0; fi
    sleep 0.2
  done
  echo "timed out waiting for: $1" >&2
  return 1
}

input="so-bench-$$"
topic "$input" 6
"$BIN_DIR/kafka-bench" produce --brokers "$broker" --topic "$input" --n "$n" --format binary
echo "throughput: $n reports on 6 partitions, 2 cores, one broker on the same machine"
for k in 1 2 3; do
  group="so-$k-$$"
  topic "$group-results" 1
  logs=()
  start_ns=$(date +%s.%N)
  for i in $(seq 1 "$k"); do
    config "$dir/$group-$i.toml" "$group" "$input" "$group-results" "$dir/$group-$i-state"
    start "$group-$i" "$dir/$group-$i.toml" >/dev/null
    logs+=("$dir/$group-$i.log")
  done
  wait_for "every input partition ended" "${logs[@]}"
  owner_log=$(grep -l "every input partition ended" "${logs[@]}" | head -1)
  end=$(first_after "every input partition ended" "$owner_log" 0)
  python3 -c "import sys;s,e,n,k=float(sys.argv[1]),float(sys.argv[2]),int(sys.argv[3]),sys.argv[4];print(f'  {k} instance(s): {e-s:6.2f} s to the last final record = {n/(e-s):9.0f} reports/s')" "$start_ns" "$end" "$n" "$k"
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
done

if [ "$SMOKE" = 1 ]; then
  echo "failover: SKIPPED in smoke mode (see the header)"
  exit 0
fi
echo "failover: 2 instances on $failover_n reports; SIGKILL of the merge owner mid-run"
input="so-failover-$$"
topic "$input" 6
"$BIN_DIR/kafka-bench" produce --brokers "$broker" --topic "$input" --n "$failover_n" --format binary
group="so-f-$$"
topic "$group-results" 1
config "$dir/f1.toml" "$group" "$input" "$group-results" "$dir/f1-state"
config "$dir/f2.toml" "$group" "$input" "$group-results" "$dir/f2-state"
p1=$(start f1 "$dir/f1.toml")
p2=$(start f2 "$dir/f2.toml")
# `start` ran in a command substitution, so its `pids+=` did not reach this shell.
pids+=("$p1" "$p2")
wait_for "input partitions assigned" "$dir/f1.log"
wait_for "input partitions assigned" "$dir/f2.log"
wait_for "owns the partials topic" "$dir/f1.log" "$dir/f2.log"
sleep 3
if grep -q "owns the partials topic" "$dir/f1.log"; then victim=$p1 survivor=f2; else victim=$p2 survivor=f1; fi
killed=$(date +%s.%N)
kill -9 "$victim"
owned=$(first_after "assigned to this instance.*partitions=\[0, 1, 2, 3, 4, 5\]" "$dir/$survivor.log" "$killed")
merged=$(first_after "partials read back" "$dir/$survivor.log" "$killed")
python3 -c "import sys;k,o,m=map(float,sys.argv[1:4]);print(f'  SIGKILL to the survivor owning all 6 partitions: {o-k:.2f} s; to its merge reading the partials back: {m-k:.2f} s')" "$killed" "$owned" "$merged"
grep -h "took the partition over" "$dir/$survivor.log" | sed -E 's/\x1b\[[0-9;]*m//g' | tail -6 | sed -E 's/.*partition=([0-9]+) changelog_messages=([0-9]+).* secs=([0-9.]+).*/    partition \1: restored from \2 changelog messages in \3 s/'
wait_for "every input partition ended" "$dir/$survivor.log"
echo "  the survivor emitted the last final records"
