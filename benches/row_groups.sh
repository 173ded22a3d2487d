#!/usr/bin/env bash
# `batch` time against the number of row groups (issue 19 item 12): the same 400,000
# GenRR reports (d = 16, a 3-valued group column, ~1-3 MB) in files of 1, 5,000, 10,000
# and 20,000 row groups, each timed ROUNDS times (median printed) for a grouped stream
# (Arrow reader) and an ungrouped one (dictionary keys). Linear: time per row group
# roughly constant. Not part of CI. Usage: benches/row_groups.sh [ROUNDS] (default 3).
# SMOKE=1: 4,000 reports in 1 and 50 row groups, one round, files in a temporary directory,
# binaries from LDPSTREAM_BIN_DIR (no build).
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/bench_env.sh
rounds=${1:-3}
data=benches/data/row_groups
rows=400000
groups_list="1 5000 10000 20000"
if [ "$SMOKE" = 1 ]; then
  rounds=1 rows=4000 groups_list="1 50" data=$(mktemp -d)
  trap 'rm -rf "$data"' EXIT
else
  cargo build --release --quiet -p ldpstream --bin ldpstream -p ldpstream-benches --bin row-groups-file
fi
bench_need_bins ldpstream row-groups-file
bin="$BIN_DIR/ldpstream"
gen="$BIN_DIR/row-groups-file"
mkdir -p "$data"
printf '%-12s %-8s %10s %12s\n' row_groups stream seconds bytes
for rg in $groups_list; do
  dir="$data/rg$rg"
  mkdir -p "$dir"
  [ -f "$dir/r.parquet" ] || "$gen" "$dir/r.parquet" "$rows" "$rg"
  bytes=$(stat -c %s "$dir/r.parquet")
  for stream in grouped plain; do
    cfg="$dir/$stream.toml"
    columns=''
    [ "$stream" = grouped ] && columns='columns = { group_by = ["group"] }'
    cat > "$cfg" <<TOML
[[stream]]
name = "$stream"
source = { kind = "parquet", paths = ["$dir/r.parquet"] }
mechanism = { kind = "grr", epsilon = 1.0, domain = 16 }
$columns
[[stream.test]]
name = "u"
kind = "gof"
null = "uniform"
TOML
    times=()
    for _ in $(seq "$rounds"); do
      start=$(date +%s.%N)
      "$bin" batch --config "$cfg" --output "$dir/$stream.jsonl" 2>/dev/null
      end=$(date +%s.%N)
      times+=("$(echo "$end - $start" | bc)")
    done
    median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n "$(( (rounds + 1) / 2 ))p")
    printf '%-12s %-8s %10.3f %12s\n' "$rg" "$stream" "$median" "$bytes"
  done
done
