#!/usr/bin/env bash
# Side-by-side: ldpstream batch vs DuckDB, polars and pyarrow+numpy on the same Parquet
# files, alternating A B A B, with a check that every tool gets the same counts.
# Not part of CI. Usage: benches/compare.sh [ROUNDS] (default 3).
#   GRR_ROWS / BITFLIP_ROWS override the file sizes (defaults 100M and 20M).
# Then the grouped cases (benches/compare_grouped.py), one file per case for all tools:
# GenRR d=16 with GRR_G_ROWS reports (10M) in each of G_LIST Zipf-popular string groups
# ("10 1000 100000", exponent ZIPF_S = 1.0, segments interleaved at random), and bit flip
# d=64 with BITFLIP_G_ROWS reports (2M) in BITFLIP_G groups (1,000). CASES="ungrouped grouped"
# (default both) picks the parts. LDPSTREAM_BIN_DIR set: that binary, no build.
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
grr_g_rows=${GRR_G_ROWS:-10000000}
bitflip_g_rows=${BITFLIP_G_ROWS:-2000000}
g_list=${G_LIST:-10 1000 100000}
zipf_s=${ZIPF_S:-1.0}
bitflip_g=${BITFLIP_G:-1000}
cases=${CASES:-ungrouped grouped}
peers=()
if [ "$SMOKE" = 1 ]; then
  rounds=1 grr_rows=100000 bitflip_rows=100000 data=$(mktemp -d)
  # Few groups: a group with too few reports for the χ² law gets a Monte Carlo p-value,
  # and a smoke run must stay short.
  grr_g_rows=100000 bitflip_g_rows=100000 g_list="10 100" bitflip_g=10
  trap 'rm -rf "$data"' EXIT
elif [ -z "${LDPSTREAM_BIN_DIR:-}" ]; then
  cargo build --release --quiet --bin ldpstream
fi
mkdir -p "$data"
bench_need_bins ldpstream
bin="$BIN_DIR/ldpstream"
if ! benches/.venv/bin/python -c 'import duckdb, polars, pyarrow, numpy' 2>/dev/null; then
  python3 -m venv benches/.venv
  if ! benches/.venv/bin/pip install --quiet -r benches/requirements-tools.txt; then
    [ "$SMOKE" = 1 ] || { echo "could not install the peer tools (duckdb, polars, pyarrow)" >&2; exit 1; }
    echo "SKIPPED: the peer tools (duckdb, polars, pyarrow) are not installable here; timing ldpstream alone" >&2
    peers=(--no-peers)
  fi
fi
py=benches/.venv/bin/python
if [[ " $cases " == *" ungrouped "* ]]; then
  grr="$data/grr_d16_${grr_rows}.parquet"
  bitflip="$data/bitflip_d64_${bitflip_rows}.parquet"
  [ -f "$grr" ] || "$bin" simulate --mechanism grr --epsilon 1 --domain 16 --n "$grr_rows" --seed 1 --out "$grr"
  [ -f "$bitflip" ] || "$bin" simulate --mechanism bitflip --epsilon 1 --domain 64 --n "$bitflip_rows" --seed 2 --out "$bitflip"
  $py benches/compare.py --bin "$bin" --grr "$grr" --bitflip "$bitflip" --rounds "$rounds" "${peers[@]}"
fi
if [[ " $cases " == *" grouped "* ]]; then
  for g in $g_list; do
    f="$data/grr_d16_${grr_g_rows}_zipf${zipf_s}_g${g}.parquet"
    [ -f "$f" ] || $py benches/grouped_tools.py gen grr "$grr_g_rows" "$g" 3 "$f" "$zipf_s"
    $py benches/compare_grouped.py --bin "$bin" --kind grr --file "$f" --groups "$g" --rounds "$rounds" "${peers[@]}"
  done
  f="$data/bitflip_d64_${bitflip_g_rows}_zipf${zipf_s}_g${bitflip_g}.parquet"
  [ -f "$f" ] || $py benches/grouped_tools.py gen bitflip "$bitflip_g_rows" "$bitflip_g" 4 "$f" "$zipf_s"
  $py benches/compare_grouped.py --bin "$bin" --kind bitflip --file "$f" --groups "$bitflip_g" --rounds "$rounds" "${peers[@]}"
fi
