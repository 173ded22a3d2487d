#!/usr/bin/env bash
# Simulates privatized reports for the bundled example config, then runs the batch job on
# them and prints one JSON result per (stream, test, group).
#   "control" draws from the uniform distribution (the null holds);
#   "treatment" draws from a skewed distribution (the test should reject).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --bin ldpstream
bin=target/release/ldpstream
mkdir -p out/demo
"$bin" simulate --mechanism grr --epsilon 1 --domain 10 --p uniform \
  --groups control=1000000 --seed 1 --out out/demo/control.parquet
"$bin" simulate --mechanism grr --epsilon 1 --domain 10 \
  --p 0.12,0.11,0.1,0.1,0.1,0.1,0.1,0.09,0.09,0.09 \
  --groups treatment=1000000 --seed 2 --out out/demo/treatment.parquet
"$bin" batch --config examples/homepage.toml --output -
