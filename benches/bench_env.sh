# Shared set-up for the bench scripts (sourced, not run). It decides:
# - SMOKE: with SMOKE=1 a script runs a tiny input once, to prove it still works
#   (benches/smoke.sh runs every script that way; scripts/test.sh runs smoke.sh);
# - BIN_DIR: where the ldpstream and bench binaries are: LDPSTREAM_BIN_DIR if set, else
#   the release directory of CARGO_TARGET_DIR (default target/);
# - the Kafka broker: bench_broker sets BROKER to LDPSTREAM_KAFKA_BROKERS when the caller
#   runs one (scripts/test.sh does), and otherwise starts a local broker on a free port
#   and stops it on exit (call bench_stop_broker from the script's own EXIT trap).
SMOKE=${SMOKE:-0}
BIN_DIR=${LDPSTREAM_BIN_DIR:-${CARGO_TARGET_DIR:-target}/release}
OWN_BROKER=0

# bench_need_bins NAME...: fails with the build command when a binary is missing.
bench_need_bins() {
  for b in "$@"; do
    if [ ! -x "$BIN_DIR/$b" ]; then
      echo "missing $BIN_DIR/$b; build it with: cargo build --release -p ldpstream -p ldpstream-benches --bins" >&2
      exit 2
    fi
  done
}

bench_broker() {
  if [ -n "${LDPSTREAM_KAFKA_BROKERS:-}" ]; then
    BROKER=$LDPSTREAM_KAFKA_BROKERS
  else
    local port
    port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
    BROKER=$(./deploy/kafka/start-local.sh "$port")
    OWN_BROKER=1
  fi
  TANSU=${LDPSTREAM_TANSU:-$(cat .kafka/tansu.bin)}
}

bench_stop_broker() {
  if [ "$OWN_BROKER" = 1 ]; then
    ./deploy/kafka/stop-local.sh || true
  fi
}
