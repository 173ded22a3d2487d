#!/usr/bin/env bash
# What the test suite installs that waits on the network or fills an idle core, started by
# scripts/test.sh in the background while cargo compiles the workspace (which keeps both
# cores busy only part of the time: a big crate's front end runs on one). One part per
# call, so that each test lane waits only for what it uses:
#
#   scripts/prefetch.sh apt      Debian's prometheus (promtool, for the metrics tests and
#                                deploy/check.sh) and chromium (the status page and the
#                                browser client), in one apt-get run
#   scripts/prefetch.sh python   the Python test venv's pinned requirements
#                                (scripts/python_env.sh)
#   scripts/prefetch.sh npm      the JS client's npm packages (its lockfile)
#   scripts/prefetch.sh bench    the bench scripts' peers (benches/requirements-tools.txt)
#   scripts/prefetch.sh deny     cargo-deny's build (scripts/deny.sh)
#   scripts/prefetch.sh deploy   deploy/check.sh's linters (run it after `apt`: its own
#                                tools step would apt-get prometheus too)
#   scripts/prefetch.sh tools    python, npm, bench, deny and deploy, one after another
#
# Each stage that needs a tool still installs it when missing, so a failed prefetch costs
# time, not correctness; test.sh prints this script's log when it waits for it.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
part() {
  case "$1" in
  apt)
    local missing=()
    command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    if [ "${#missing[@]}" -gt 0 ]; then
      scripts/apt_install.sh "${missing[@]}" || return 1
    fi
    ;;
  python) LDPSTREAM_PY_DEPS_ONLY=1 nice -n 19 scripts/python_env.sh >/dev/null ;;
  npm) (cd clients/js && nice -n 19 npm ci --no-audit --no-fund --silent) ;;
  bench)
    [ -x benches/.venv/bin/python ] || python3 -m venv benches/.venv || return 1
    nice -n 19 benches/.venv/bin/pip install --quiet --disable-pip-version-check \
      -r benches/requirements-tools.txt
    ;;
  deny) nice -n 19 scripts/deny.sh --install-only ;;
  deploy) nice -n 19 deploy/check.sh --tools-only >/dev/null ;;
  tools)
    local status=0 p
    for p in python npm bench deny deploy; do
      part "$p" || status=1
    done
    return "$status"
    ;;
  *)
    echo "usage: scripts/prefetch.sh apt|python|npm|bench|deny|deploy|tools" >&2
    return 2
    ;;
  esac
}
part "${1:-}"
