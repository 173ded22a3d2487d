#!/usr/bin/env bash
# cargo deny check against deny.toml: licenses, bans and sources of every dependency, then
# RustSec advisories. Run by scripts/test.sh; installs cargo-deny into .tools/ when missing.
#   scripts/deny.sh
#   LDPSTREAM_ADVISORY_DB=/path/to/advisory-db scripts/deny.sh   (a git clone of
#       github.com/rustsec/advisory-db, for a machine that cannot reach GitHub)
#   scripts/deny.sh --install-only   (builds cargo-deny and checks nothing: scripts/prefetch.sh)
# Prints one "test result:" line per part. Advisories that cannot be checked (no
# database reachable) are reported as ignored, never as passed.
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.20.2
tools=.tools
deny="$tools/bin/cargo-deny"
if ! "$deny" --version 2>/dev/null | grep -qF "$version"; then
  echo "installing cargo-deny $version into $tools/ (once)..." >&2
  # Unoptimised and without debug info: its release profile (fat LTO, one codegen unit)
  # took minutes of every fresh CI run to build a tool that then runs for seconds.
  CARGO_PROFILE_DEV_DEBUG=false \
    cargo install --locked --quiet --debug cargo-deny --version "$version" --root "$tools"
fi
[ "${1:-}" = "--install-only" ] && exit 0

status=0
if "$deny" --log-level warn check --hide-inclusion-graph licenses bans sources; then
  echo "test result: ok. 1 passed; 0 failed; 0 ignored (cargo deny check licenses bans sources)"
else
  echo "test result: FAILED. 0 passed; 1 failed; 0 ignored (cargo deny check licenses bans sources)"
  status=1
fi

config=deny.toml
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fetch=()
if [ -n "${LDPSTREAM_ADVISORY_DB:-}" ]; then
  db=$(cd "$LDPSTREAM_ADVISORY_DB" && pwd)
  echo "advisories: the database at $db, last commit $(git -C "$db" log -1 --format=%cs)" >&2
  # cargo-deny takes only network URLs, so the clone goes where it would have fetched
  # RustSec's database to (cargo-deny $version names that directory after a hash of the
  # URL), and is read without fetching. Its age is printed above instead of refused.
  git clone -q "$db" "$work/dbs/advisory-db-3157b0e258782691"
  sed -e "s|^db-path = .*|db-path = \"$work/dbs\"\nmaximum-db-staleness = \"P3650D\"|" \
    deny.toml >"$work/deny.toml"
  config="$work/deny.toml"
  fetch=(--offline)
fi
if "$deny" --log-level warn --config "$config" "${fetch[@]}" check --hide-inclusion-graph advisories \
  2>"$work/advisories.log"; then
  cat "$work/advisories.log" >&2
  echo "test result: ok. 1 passed; 0 failed; 0 ignored (cargo deny check advisories)"
elif grep -q "failed to fetch advisory database" "$work/advisories.log"; then
  grep -m1 "failed to fetch" "$work/advisories.log" >&2 || true
  echo "SKIPPED: RustSec's advisory database is not reachable from here; set" \
    "LDPSTREAM_ADVISORY_DB to a clone of it to check advisories" >&2
  echo "test result: ok. 0 passed; 0 failed; 1 ignored (cargo deny check advisories: no database)"
else
  cat "$work/advisories.log" >&2
  echo "test result: FAILED. 0 passed; 1 failed; 0 ignored (cargo deny check advisories)"
  status=1
fi
exit "$status"
