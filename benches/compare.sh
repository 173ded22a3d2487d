#!/usr/bin/env bash
# Side-by-side: ldpstream batch vs DuckDB, polars and pyarrow+numpy on the same Parquet
# files, alternating A B A B, with a check that every tool gets the same counts.
# Not part of CI. Usage: benches/compare.sh [ROUNDS] (default 3).
#   GRR_ROWS / BITFLIP_ROWS override the file sizes (defaults 100M and 20M).
# SMOKE=1: 100,000 reports each, one round, files in a temporary directory, the binary from
# LDPSTREAM_BIN_DIR (no build). When the peer tools cannot be installed (no network), the
# smoke run says so and times ldpstream alone.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/bench_env.sh
rounds=${1:-3}
grr_rows=${GRR_ROWS:-100000000}
bitflip_rows=${BITFLIP_ROWS:-20000000}
data=benches/data
peers=()
if [ "$SMOKE" = 1 ]; then
  rounds=1 grr_rows=100000 bitflip_rows=100000 data=$(mktemp -d)
  trap 'rm -rf "$data"' EXIT
else
  cargo build --release --quiet --bin ldpstream
fi
mkdir -p "$data"
bench_need_bins ldpstream
bin="$BIN_DIR/ldpstream"
if ! benches/.venv/bin/python -c 'import duckdb, polars, pyarrow, numpy' 2>/dev/null; then
  python3 -m venv benches/.venv
  if ! benches/.venv/bin/pip install --quiet duckdb==2.0.0 polars==2.1.0 pyarrow==26.0.1 numpy==2.4.6; then
    [ "$SMOKE" = 1 ] || { echo "could not install the peer tools (duckdb, polars, pyarrow)" >&2; exit 1; }
    echo "SKIPPED: the peer tools (duckdb, polars, pyarrow) are not installable here; timing ldpstream alone" >&2
    peers=(--no-peers)
  fi
fi
grr="$data/grr_d16_${grr_rows}.parquet"
bitflip="$data/bitflip_d64_${bitflip_rows}.parquet"
[ -f "$grr" ] || "$bin" simulate --mechanism grr --epsilon 1 --domain 16 --n "$grr_rows" --seed 1 --out "$grr"
[ -f "$bitflip" ] || "$bin" simulate --mechanism bitflip --epsilon 1 --domain 64 --n "$bitflip_rows" --seed 2 --out "$bitflip"
benches/.venv/bin/python benches/compare.py --bin "$bin" --grr "$grr" --bitflip "$bitflip" --rounds "$rounds" "${peers[@]}"
