#!/usr/bin/env bash
# Stops the broker started by start-local.sh, by the PID it recorded.
set -euo pipefail
dir="$(cd "$(dirname "$0")/../.." && pwd)/.kafka"
[ -f "$dir/tansu.pid" ] || exit 0
pid=$(cat "$dir/tansu.pid")
if kill -0 "$pid" 2>/dev/null; then
  kill "$pid"
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && kill -9 "$pid" || true
fi
rm -f "$dir/tansu.pid"
