#!/usr/bin/env bash
# Side-by-side: ldpstream batch vs DuckDB, polars and pyarrow+numpy on the same Parquet
# files, alternating A B A B, with a check that every tool gets the same counts.
# Not part of CI. Usage: benches/compare.sh [ROUNDS] (default 3).
#   GRR_ROWS / BITFLIP_ROWS override the file sizes (defaults 100M and 20M).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
grr_rows=${GRR_ROWS:-100000000}
bitflip_rows=${BITFLIP_ROWS:-20000000}
data=benches/data
mkdir -p "$data"
cargo build --release --quiet --bin ldpstream
bin=target/release/ldpstream
if [ ! -x benches/.venv/bin/python ]; then
  python3 -m venv benches/.venv
  benches/.venv/bin/pip install --quiet duckdb==2.0.0 polars==2.1.0 pyarrow==26.0.1 numpy==2.4.6
fi
grr="$data/grr_d16_${grr_rows}.parquet"
bitflip="$data/bitflip_d64_${bitflip_rows}.parquet"
[ -f "$grr" ] || "$bin" simulate --mechanism grr --epsilon 1 --domain 16 --n "$grr_rows" --seed 1 --out "$grr"
[ -f "$bitflip" ] || "$bin" simulate --mechanism bitflip --epsilon 1 --domain 64 --n "$bitflip_rows" --seed 2 --out "$bitflip"
exec benches/.venv/bin/python benches/compare.py --bin "$bin" --grr "$grr" --bitflip "$bitflip" --rounds "$rounds"
