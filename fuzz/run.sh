#!/usr/bin/env bash
# Runs every fuzz harness for SECONDS each (default 600), from the committed seeds plus
# the corpus a previous run left in fuzz/corpus/<target>. Crashes land in
# fuzz/artifacts/<target>/; fix each, add it to fuzz/seeds/<target>/ and turn it into a
# regression test (as tests/cli/bad_input.rs `crafted_dictionary_key_is_an_error_naming_the_file_not_a_panic`).
#
#   fuzz/run.sh [SECONDS] [TARGET...]
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). Not part of
# scripts/test.sh: a fuzz run is measured in minutes per harness.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(kafka_message parquet_file dictionary_pages checkpoint sketch ledger config partial)
fi
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
  seeds=()
  [ -d "fuzz/seeds/$t" ] && seeds=("fuzz/seeds/$t")
  echo "== $t: ${seconds}s" >&2
  # parquet_file's seeds are whole files (the crafted footer one is 130 KB).
  max_len=8192
  [ "$t" = parquet_file ] && max_len=262144
  cargo +nightly fuzz run -a "$t" "fuzz/corpus/$t" "${seeds[@]}" -- \
    -max_total_time="$seconds" -max_len="$max_len" -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="fuzz/artifacts/$t/" || { echo "== $t: CRASH (see fuzz/artifacts/$t/)" >&2; failed=1; }
done
exit "${failed:-0}"
