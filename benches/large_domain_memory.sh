#!/usr/bin/env bash
# Peak memory of `batch` at a large domain: 20 groups of GenRR reports at d = 2^24
# (REPORTS per group, default 1,000,000), one global GOF test per group. The count tables
# are sparse (only non-zero cells) at this d; dense ones would need 20 × 128 MiB for the
# tables alone, plus the per-group snapshot copies.
#
#   benches/large_domain_memory.sh [BIN] [REPORTS]   (BIN default target/release/ldpstream)
# SMOKE=1: 1,000 reports per group (BIN from LDPSTREAM_BIN_DIR or CARGO_TARGET_DIR).
#
# Prints the peak RSS of the simulate, batch and serve steps (GNU time's %M) and checks
# that every report was counted. serve replays the same file (max_groups = 20, since its
# estimate cannot count the reports ahead and takes the dense bound; state in memory).
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/bench_env.sh
bin=${1:-$BIN_DIR/ldpstream}
reports=${2:-1000000}
if [ "$SMOKE" = 1 ]; then reports=1000; fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
groups=$(python3 -c "print(','.join(f'g{i:02}={$reports}' for i in range(20)))")
/usr/bin/time -f "simulate: %M KiB peak RSS, %e s" \
  "$bin" simulate --mechanism grr --epsilon 1 --domain 16777216 --p uniform \
  --groups "$groups" --seed 1 --out "$dir/in.parquet"
cat >"$dir/c.toml" <<TOML
[[stream]]
name = "wide"
source = { kind = "parquet", paths = ["$dir/in.parquet"] }
mechanism = { kind = "grr", epsilon = 1.0, domain = 16777216 }
columns = { group_by = ["group"] }
[[stream.test]]
name = "gof"
kind = "gof"
null = "uniform"
TOML
"$bin" check --config "$dir/c.toml" | sed 's/^/check: /'
/usr/bin/time -f "batch: %M KiB peak RSS, %e s" \
  "$bin" batch --config "$dir/c.toml" --output "$dir/out.jsonl"
python3 - "$dir/out.jsonl" "$reports" <<'PY'
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
n = [r["n"] for r in records]
assert len(records) == 20 and all(x == int(sys.argv[2]) for x in n), n
print(f"records: {len(records)}, n per group {n[0]}, estimate_omitted: {records[0]['estimate_omitted'] is not None}")
PY

cat >"$dir/s.toml" <<TOML
[serve]
durable_state = false
sink = [{ kind = "jsonl", path = "$dir/serve.jsonl" }]
[[stream]]
name = "wide"
source = { kind = "parquet", paths = ["$dir/in.parquet"] }
mechanism = { kind = "grr", epsilon = 1.0, domain = 16777216 }
columns = { group_by = ["group"] }
max_groups = 20
[[stream.test]]
name = "gof"
kind = "gof"
null = "uniform"
TOML
/usr/bin/time -f "serve: %M KiB peak RSS, %e s" \
  "$bin" serve --config "$dir/s.toml" --listen 127.0.0.1:0 2>&1 | grep -E "^serve:|ERROR"
python3 - "$dir/serve.jsonl" "$reports" <<'PY'
import json, sys
finals = [r for r in map(json.loads, open(sys.argv[1])) if r["final"]]
n = [r["n"] for r in finals]
assert len(finals) == 20 and all(x == int(sys.argv[2]) for x in n), n
print(f"serve final records: {len(finals)}, n per group {n[0]}")
PY
