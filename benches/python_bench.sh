#!/usr/bin/env bash
# The Python package's figures (issue 28, "Numbers"), each section against a reference in
# the same run (benches/python_bench.py; tables for benches/RESULTS.md):
#   fold   job.fold on an in-memory pyarrow Table of GRR_ROWS GenRR reports (d = 16) against
#          `ldpstream batch` on the same Parquet file (target: >= 0.8x batch's rate);
#   grouped  job.fold on a pyarrow Table of GROUPED_ROWS GenRR reports in GROUPED_G Zipf
#          string groups (benches/grouped_tools.py's file, 10,000,000 and 1,000 by default)
#          against `ldpstream batch` on the file, both without a test (target: >= 0.8x);
#   peers  ldpstream.estimate against multi-freq-ldpy's MI aggregators on PEER_GRR_ROWS GenRR
#          (d = 16, eps = 1) and PEER_BITFLIP_ROWS bit-flip and OUE (d = 64) reports (target: >= 50x,
#          equal estimates once the peer's post-processing is applied to ours);
#   oracles  `ldpstream batch` against pure-LDP 1.2.0 and multi-freq-ldpy 0.2.5 on the same
#          GRR, OUE, subset (PEER_ORACLE_ROWS each) and OLH (PEER_OLH_ROWS, S = 1024) reports,
#          d = 64, eps = 2, a Zipf p (benches/peers_oracles.py): unbiased, MI and IBU
#          estimates asserted equal to ldpstream's estimate, clipped estimate and estimate_ibu
#          (OLH: estimate_plain, the peers' plain estimate; `estimate` is the pool's unbiased one),
#          and each aggregator's time; and one period of PEER_ORACLE_ROWS devices with a
#          memo (lgrr d = 64 and d = 2, losue and lsue d = 64, eps_perm 2, eps_1 1) against
#          multi-freq-ldpy's longitudinal MI aggregators, to 1e-12;
#   spark  ldpstream.spark.run on Spark local[2] over the GRR_ROWS file, next to `ldpstream
#          batch`, with the Spark path's own overhead (sketch serialization and merge; target
#          < 10% of the run).
#   benches/python_bench.sh [SECTION...]     (default: fold peers spark; also oracles; ROUNDS=3, SPARK_ROUNDS,
#   SPARK_ARROW_BATCH: spark.sql.execution.arrow.maxRecordsPerBatch, default Spark's 10000)
#   GRR_ROWS=100000000 PEER_GRR_ROWS=10000000 PEER_BITFLIP_ROWS=2000000 (defaults)
#   PEER_ORACLE_ROWS=200000 PEER_OLH_ROWS=20000 (defaults; multi-freq-ldpy's LH loops over
#   n x d hashes in Python)
#
# The package must be a release build: the script installs into benches/.venv (pip install
# ./python, which maturin builds with --release, plus python/requirements-spark.txt and
# multi-freq-ldpy) unless LDPSTREAM_PYTHON names an interpreter that has ldpstream.
# SMOKE=1: 200,000 / 100,000 / 50,000 reports, one round, files in a temporary directory,
# the binary from LDPSTREAM_BIN_DIR and the interpreter from LDPSTREAM_PYTHON (or
# .venv-py, which scripts/python_env.sh makes); a section whose engine is not installed there says SKIPPED.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/bench_env.sh
sections=("$@")
[ ${#sections[@]} -eq 0 ] && sections=(fold peers spark)
rounds=${ROUNDS:-3}
grr_rows=${GRR_ROWS:-100000000}
peer_grr_rows=${PEER_GRR_ROWS:-10000000}
peer_bitflip_rows=${PEER_BITFLIP_ROWS:-2000000}
peer_oracle_rows=${PEER_ORACLE_ROWS:-200000}
peer_olh_rows=${PEER_OLH_ROWS:-20000}
grouped_rows=${GROUPED_ROWS:-10000000}
grouped_g=${GROUPED_G:-1000}
data=benches/data
if [ "$SMOKE" = 1 ]; then
  grouped_rows=100000 grouped_g=100
  rounds=1 grr_rows=200000 peer_grr_rows=100000 peer_bitflip_rows=50000 data=$(mktemp -d)
  peer_oracle_rows=5000 peer_olh_rows=1000
  trap 'rm -rf "$data"' EXIT
  py=${LDPSTREAM_PYTHON:-.venv-py/bin/python}
else
  # LDPSTREAM_BIN_DIR names prebuilt binaries (as in benches/smoke.sh): build nothing.
  [ -n "${LDPSTREAM_BIN_DIR:-}" ] || cargo build --release --quiet --bin ldpstream
  py=${LDPSTREAM_PYTHON:-}
  if [ -z "$py" ]; then
    venv=benches/.venv  # shared with benches/compare.sh (same pyarrow and numpy pins)
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet -r python/requirements-spark.txt -r benches/requirements-peers.txt
    "$venv/bin/pip" install --quiet --force-reinstall --no-deps ./python
    py=$venv/bin/python
  fi
fi
bench_need_bins ldpstream
bin="$BIN_DIR/ldpstream"
if ! "$py" -c 'import ldpstream' 2>/dev/null; then
  if [ "$SMOKE" = 1 ]; then
    echo "SKIPPED: no ldpstream package in $py (scripts/python_env.sh builds .venv-py; or set LDPSTREAM_PYTHON)" >&2
    exit 0
  fi
  echo "no ldpstream package in $py: set LDPSTREAM_PYTHON (scripts/python_env.sh builds one)" >&2
  exit 2
fi
mkdir -p "$data"
grr="$data/grr_d16_${grr_rows}.parquet"
peer_grr="$data/grr_d16_${peer_grr_rows}.parquet"
peer_bitflip="$data/bitflip_d64_${peer_bitflip_rows}.parquet"
peer_oue="$data/oue_d64_${peer_bitflip_rows}.parquet"
# The same seeds as benches/compare.sh, so the files are shared with it; only the files
# the chosen sections read.
wants() { [[ " ${sections[*]} " == *" $1 "* ]]; }
if wants fold || wants spark; then
  [ -f "$grr" ] || "$bin" simulate --mechanism grr --epsilon 1 --domain 16 --n "$grr_rows" --seed 1 --out "$grr"
fi
if wants peers; then
  [ -f "$peer_grr" ] || "$bin" simulate --mechanism grr --epsilon 1 --domain 16 --n "$peer_grr_rows" --seed 1 --out "$peer_grr"
  [ -f "$peer_bitflip" ] || "$bin" simulate --mechanism bitflip --epsilon 1 --domain 64 --n "$peer_bitflip_rows" --seed 2 --out "$peer_bitflip"
  [ -f "$peer_oue" ] || "$bin" simulate --mechanism oue --epsilon 1 --domain 64 --n "$peer_bitflip_rows" --seed 3 --out "$peer_oue"
fi

echo "machine: $(nproc) vCPU, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg); $("$py" --version); ldpstream $("$py" -c 'import ldpstream; print(ldpstream.__version__)')"
for s in "${sections[@]}"; do
  case $s in
    fold) "$py" benches/python_bench.py fold --bin "$bin" --grr "$grr" --rounds "$rounds" ;;
    grouped)
      grouped="$data/grr_d16_${grouped_rows}_zipf1.0_g${grouped_g}.parquet"
      [ -f "$grouped" ] || "$py" benches/grouped_tools.py gen grr "$grouped_rows" "$grouped_g" 3 "$grouped" 1.0
      "$py" benches/python_bench.py grouped --bin "$bin" --file "$grouped" --rounds "$rounds" ;;
    peers)
      if ! "$py" -c 'import multi_freq_ldpy' 2>/dev/null; then
        [ "$SMOKE" = 1 ] || { echo "multi-freq-ldpy is not installed in $py" >&2; exit 1; }
        echo "SKIPPED peers: multi-freq-ldpy is not installed in $py" >&2
        continue
      fi
      "$py" benches/python_bench.py peers --grr "$peer_grr" --bitflip "$peer_bitflip" --oue "$peer_oue" --rounds "$rounds" ;;
    oracles)
      if ! "$py" -c 'import multi_freq_ldpy, pure_ldp' 2>/dev/null; then
        [ "$SMOKE" = 1 ] || { echo "multi-freq-ldpy or pure-ldp is not installed in $py (benches/requirements-peers.txt)" >&2; exit 1; }
        echo "SKIPPED oracles: multi-freq-ldpy or pure-ldp is not installed in $py" >&2
        continue
      fi
      # d = 64, eps = 2: k = 8 is both ldpstream's default and multi-freq-ldpy's fixed k.
      zipf=$("$py" -c 'w = [1 / (i + 1) for i in range(64)]; print(",".join(f"{x / sum(w):.17g}" for x in w))')
      for kind in grr oue subset olh; do
        rows=$peer_oracle_rows; [ "$kind" = olh ] && rows=$peer_olh_rows
        f="$data/${kind}_d64_eps2_zipf_${rows}.parquet"
        [ -f "$f" ] || "$bin" simulate --mechanism "$kind" --epsilon 2 --domain 64 --k 8 --pool-size 1024 \
          --pool-seed 7 --p "$zipf" --n "$rows" --seed 30 --out "$f" >/dev/null
      done
      # Issue 47: one period of devices with a memo (eps_perm 2, eps_1 1), lgrr at d = 64 and
      # d = 2 and losue and lsue at d = 64, for multi-freq-ldpy's longitudinal aggregators.
      long="--epsilon-perm 2 --epsilon-1 1 --devices $peer_oracle_rows --periods 1 --seed 31"
      for f in lgrr:64:"$zipf" lgrr:2:0.7,0.3 losue:64:"$zipf" lsue:64:"$zipf"; do
        IFS=: read -r kind d p <<<"$f"
        out="$data/${kind}_d${d}_ep2_e1_${peer_oracle_rows}.parquet"
        # shellcheck disable=SC2086 # $long is a list of flags
        [ -f "$out" ] || "$bin" simulate --mechanism "$kind" --domain "$d" --p "$p" $long --out "$out" >/dev/null
      done
      "$py" benches/peers_oracles.py --bin "$bin" --epsilon 2 --domain 64 --k 8 --pool-size 1024 --pool-seed 7 \
        --grr "$data/grr_d64_eps2_zipf_${peer_oracle_rows}.parquet" \
        --oue "$data/oue_d64_eps2_zipf_${peer_oracle_rows}.parquet" \
        --subset "$data/subset_d64_eps2_zipf_${peer_oracle_rows}.parquet" \
        --olh "$data/olh_d64_eps2_zipf_${peer_olh_rows}.parquet" \
        --epsilon-perm 2 --epsilon-1 1 \
        --lgrr "$data/lgrr_d64_ep2_e1_${peer_oracle_rows}.parquet" \
        --lgrr-d2 "$data/lgrr_d2_ep2_e1_${peer_oracle_rows}.parquet" \
        --losue "$data/losue_d64_ep2_e1_${peer_oracle_rows}.parquet" \
        --lsue "$data/lsue_d64_ep2_e1_${peer_oracle_rows}.parquet" --rounds "$rounds" ;;
    spark)
      if ! "$py" -c 'import pyspark' 2>/dev/null; then
        [ "$SMOKE" = 1 ] || { echo "pyspark is not installed in $py" >&2; exit 1; }
        echo "SKIPPED spark: pyspark is not installed in $py" >&2
        continue
      fi
      "$py" benches/python_bench.py spark --bin "$bin" --grr "$grr" --rounds "${SPARK_ROUNDS:-$rounds}" \
        --arrow-batch "${SPARK_ARROW_BATCH:-10000}" ;;
    *) echo "unknown section $s (fold, grouped, peers, oracles, spark)" >&2; exit 2 ;;
  esac
done
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
