#!/usr/bin/env bash
# `batch` time against the number of row groups (issue 19 item 12): the same 400,000
# GenRR reports (d = 16, a 3-valued group column, ~1-3 MB) in files of 1, 5,000, 10,000
# and 20,000 row groups, each timed ROUNDS times (median printed) for a grouped stream
# (Arrow reader) and an ungrouped one (dictionary keys). Linear: time per row group
# roughly constant. Not part of CI. Usage: benches/row_groups.sh [ROUNDS] (default 3).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
target=${CARGO_TARGET_DIR:-target}
cargo build --release --quiet -p ldpstream --bin ldpstream -p ldpstream-benches --bin row-groups-file
bin="$target/release/ldpstream"
gen="$target/release/row-groups-file"
data=benches/data/row_groups
mkdir -p "$data"
rows=400000
printf '%-12s %-8s %10s %12s\n' row_groups stream seconds bytes
for rg in 1 5000 10000 20000; do
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
