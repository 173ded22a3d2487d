#!/usr/bin/env bash
# What the test suite installs that waits on the network or fills an idle core, started by
# scripts/test.sh in the background while cargo compiles the workspace (which keeps both
# cores busy only part of the time: a big crate's front end runs on one):
#
#   scripts/prefetch.sh apt     Debian's prometheus (promtool, for the metrics tests and
#                               deploy/check.sh) and chromium (the status page and the
#                               browser client), in one apt-get run
#   scripts/prefetch.sh tools   the Python test venv's pinned requirements
#                               (scripts/python_env.sh), the JS client's npm packages,
#                               the bench scripts' peers (benches/requirements-tools.txt),
#                               deploy/check.sh's linters, and cargo-deny (scripts/deny.sh)
#
# Each stage that needs a tool still installs it when missing, so a failed prefetch costs
# time, not correctness; test.sh prints this script's log when it waits for it.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
status=0
case "${1:-}" in
apt)
  missing=()
  command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  if [ "${#missing[@]}" -gt 0 ]; then
    scripts/apt_install.sh "${missing[@]}" || status=1
  fi
  ;;
tools)
  LDPSTREAM_PY_DEPS_ONLY=1 nice -n 19 scripts/python_env.sh >/dev/null || status=1
  (cd clients/js && nice -n 19 npm ci --no-audit --no-fund --silent) || status=1
  [ -x benches/.venv/bin/python ] || python3 -m venv benches/.venv
  nice -n 19 benches/.venv/bin/pip install --quiet --disable-pip-version-check \
    -r benches/requirements-tools.txt || status=1
  nice -n 19 scripts/deny.sh --install-only || status=1
  # Last: its tools step would also apt-get prometheus, which the apt prefetch has done by now.
  nice -n 19 deploy/check.sh --tools-only >/dev/null || status=1
  ;;
*)
  echo "usage: scripts/prefetch.sh apt|tools" >&2
  exit 2
  ;;
esac
exit "$status"
