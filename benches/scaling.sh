#!/usr/bin/env bash
# Cost of `ldpstream batch` against the size of the work: wall time and peak RSS
# (/usr/bin/time -v) against
#   n        the number of reports        (bit flip d = 64 and GenRR d = 16),
#   d        the domain                   (bit flip at BITS_D_N reports, GenRR at D_N),
#   groups   distinct group_by values     (GenRR d = 16, G_N reports, max_groups raised;
#            each report's group drawn uniformly at random, so groups interleave as real
#            segments do, not in the order i mod G), with a GOF per group ("groups") and
#            without a test ("groups-fold": the fold and the pane state alone),
#   windows  sliding windows open at once (GenRR d = 16, W_N reports, size = w × slide).
# Inputs are Parquet files written by pyarrow (uniform random reports, 2^20-row row
# groups) into benches/data/scaling/ and reused; each point is one warm-up run (it warms
# the page cache) and the median of ROUNDS timed runs, 2 threads.
# Prints the table, writes it to benches/scaling.txt and plots benches/scaling.svg.
#
#   benches/scaling.sh                         (defaults below; env overrides the lists)
#   N_LIST="1000000 10000000 100000000 1000000000" benches/scaling.sh
#   N_LIST= D_LIST= BITS_D_LIST= W_LIST= benches/scaling.sh   (an empty list skips its sweep:
#                                              here the groups sweeps alone)
# SMOKE=1: tiny sizes, one round, files and outputs in a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/bench_env.sh
rounds=${ROUNDS:-3}
n_list=${N_LIST-1000000 10000000 100000000}
d_list=${D_LIST-16 256 4096 65536}
bits_d_list=${BITS_D_LIST-16 64 256 1024 4096 16384 65536}
g_list=${G_LIST-1 10 100 1000 10000 100000}
w_list=${W_LIST-1 10 100 1000}
d_n=${D_N:-10000000}
bits_d_n=${BITS_D_N:-100000}
g_n=${G_N:-10000000}
w_n=${W_N:-10000000}
data=benches/data/scaling
out=benches
if [ "$SMOKE" = 1 ]; then
  rounds=1 n_list="1000 10000" d_list="16 4096" bits_d_list="16 1024" g_list="1 100"
  w_list="1 10" d_n=10000 bits_d_n=1000 g_n=10000 w_n=10000
  data=$(mktemp -d) out=$data
  trap 'rm -rf "$data"' EXIT
elif [ -z "${LDPSTREAM_BIN_DIR:-}" ]; then
  # LDPSTREAM_BIN_DIR names a prebuilt binary: build nothing.
  cargo build --release --quiet --bin ldpstream
fi
bench_need_bins ldpstream
bin="$BIN_DIR/ldpstream"
py=benches/.venv/bin/python
if ! "$py" -c 'import pyarrow, numpy, matplotlib' 2>/dev/null; then
  python3 -m venv benches/.venv
  benches/.venv/bin/pip install --quiet -r benches/requirements-tools.txt
fi
mkdir -p "$data"

# gen FILE KIND N D GROUPS SPAN_S: writes the input unless it exists.
gen() {
  [ -f "$1" ] && return 0
  "$py" - "$@" <<'PY'
import sys
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
path, kind, n, d, groups, span = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
rng = np.random.default_rng(1)
chunk, writer = 1 << 20, None
for start in range(0, n, chunk):
    m = min(chunk, n - start)
    cols = {}
    if kind == "grr":
        cols["report"] = pa.array(rng.integers(0, d, m, dtype=np.uint32))
    else:
        w = d // 8
        raw = rng.integers(0, 256, m * w, dtype=np.uint8).tobytes()
        cols["report"] = pa.FixedSizeBinaryArray.from_buffers(pa.binary(w), m, [None, pa.py_buffer(raw)])
    if groups > 1:
        names = pa.array([f"g{i}" for i in range(groups)])
        # Random interleaving: i mod G would hand every batch each group in turn.
        idx = pa.array(rng.integers(0, groups, m), type=pa.int32())
        cols["group"] = pa.DictionaryArray.from_arrays(idx, names).cast(pa.string())
    if span > 0:
        ms = (np.arange(start, start + m, dtype=np.int64) * span * 1000) // n + 1_700_000_000_000
        cols["ts"] = pa.array(ms, type=pa.timestamp("ms", tz="UTC"))
    table = pa.table(cols)
    if writer is None:
        writer = pq.ParquetWriter(path + ".tmp", table.schema, compression="snappy")
    writer.write_table(table)
writer.close()
import os; os.replace(path + ".tmp", path)
PY
}

# measure FILE KIND D GROUPS WINDOWS [TEST]: "seconds peak_rss_mib" (median of the timed
# runs); TEST=none leaves the stream without a test.
measure() {
  local cfg="$data/run.toml" mech columns="" window=""
  mech="kind = \"$2\", epsilon = 1.0, domain = $3"
  [ "$4" -gt 1 ] && columns='columns = { group_by = ["group"] }'
  [ "$5" -gt 0 ] && window="window = { kind = \"sliding\", size = \"$(( $5 * 10 ))s\", slide = \"10s\" }"
  cat >"$cfg" <<TOML
[[stream]]
name = "s"
source = { kind = "parquet", paths = ["$1"] }
mechanism = { $mech }
max_groups = 200000
$columns
TOML
  if [ "${6:-gof}" != none ]; then
    cat >>"$cfg" <<TOML
[[stream.test]]
name = "t"
kind = "gof"
null = "uniform"
$window
TOML
  fi
  local times=() rss=() line start end
  for r in $(seq 0 "$rounds"); do
    # Wall time from the shell (GNU time's own is in 10 ms steps), peak RSS from time -v.
    start=$(date +%s.%N)
    line=$(/usr/bin/time -v "$bin" batch --config "$cfg" --output /dev/null 2>&1 >/dev/null |
      awk -F': ' '/Maximum resident/ {print $2}')
    end=$(date +%s.%N)
    [ "$r" = 0 ] && continue
    times+=("$(python3 -c "print($end - $start)")")
    rss+=("$line")
  done
  python3 -c 'import statistics,sys; t=[float(x) for x in sys.argv[1].split()]; r=[float(x) for x in sys.argv[2].split()]; print(f"{statistics.median(t):.3f} {max(r)/1024:.1f}")' "${times[*]}" "${rss[*]}"
}

table="$out/scaling.txt"
# load1: the 1-minute load average after the point's runs (nproc $(nproc)).
printf '%-11s %-8s %12s %7s %8s %8s %10s %10s %12s %6s\n' sweep kernel n d groups windows seconds rss_mib ns_per_report load1 | tee "$table"
row() { # sweep kernel n d groups windows file [test]
  local m
  m=$(measure "$7" "$2" "$4" "$5" "$6" "${8:-gof}")
  printf '%-11s %-8s %12s %7s %8s %8s %10s %10s %12.2f %6s\n' "$1" "$2" "$3" "$4" "$5" "$6" ${m% *} ${m#* } \
    "$(python3 -c "print(${m% *} * 1e9 / $3)")" "$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$table"
}
for n in $n_list; do
  f="$data/bitflip_d64_$n.parquet"; gen "$f" bitflip "$n" 64 1 0; row n bitflip "$n" 64 1 0 "$f"
  f="$data/grr_d16_$n.parquet"; gen "$f" grr "$n" 16 1 0; row n grr "$n" 16 1 0 "$f"
done
for d in $bits_d_list; do
  f="$data/bitflip_d${d}_$bits_d_n.parquet"; gen "$f" bitflip "$bits_d_n" "$d" 1 0; row d bitflip "$bits_d_n" "$d" 1 0 "$f"
done
for d in $d_list; do
  f="$data/grr_d${d}_$d_n.parquet"; gen "$f" grr "$d_n" "$d" 1 0; row d grr "$d_n" "$d" 1 0 "$f"
done
for g in $g_list; do
  f="$data/grr_d16_${g_n}_random_g$g.parquet"; gen "$f" grr "$g_n" 16 "$g" 0; row groups grr "$g_n" 16 "$g" 0 "$f"
  row groups-fold grr "$g_n" 16 "$g" 0 "$f" none
done
# 1000 slides of 10 s of event time; w open windows per report.
for w in $w_list; do
  f="$data/grr_d16_${w_n}_ts.parquet"; gen "$f" grr "$w_n" 16 1 10000; row windows grr "$w_n" 16 1 "$w" "$f"
done
"$py" - "$table" "$out/scaling.svg" <<'PY'
import sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[1:]]
sweeps = [("n", 2, "reports n"), ("d", 3, "domain d"), ("groups", 4, "groups"),
          ("groups-fold", 4, "groups, no test"), ("windows", 5, "open windows")]
fig, axes = plt.subplots(2, 5, figsize=(20, 7))
for col, (sweep, x_at, label) in enumerate(sweeps):
    for kernel in ("bitflip", "grr"):
        pts = sorted((float(r[x_at]), float(r[6]), float(r[7])) for r in rows if r[0] == sweep and r[1] == kernel)
        if not pts:
            continue
        xs = [p[0] for p in pts]
        axes[0][col].loglog(xs, [p[1] for p in pts], "o-", label=kernel)
        axes[1][col].semilogx(xs, [p[2] for p in pts], "o-", label=kernel)
    axes[0][col].set_title(f"batch time vs {label}")
    axes[0][col].set_ylabel("seconds")
    axes[1][col].set_xlabel(label)
    axes[1][col].set_ylabel("peak RSS (MiB)")
    axes[0][col].legend()
fig.tight_layout()
fig.savefig(sys.argv[2])
print(f"plot: {sys.argv[2]}")
PY
