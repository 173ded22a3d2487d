#!/usr/bin/env bash
# Installs Debian packages the test suite needs (one apt-get run), when root and apt-get
# are there; used by scripts/test.sh, prefetch.sh, status_page_check.sh and deploy/check.sh.
#
#   scripts/apt_install.sh PACKAGE...
#
# Exits non-zero, saying why, when the packages cannot be installed here.
set -uo pipefail
[ "$#" -gt 0 ] || { echo "usage: scripts/apt_install.sh PACKAGE..." >&2; exit 2; }
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "cannot install $* here (needs root and apt-get)" >&2
  exit 1
fi
echo "installing $* (Debian packages)..." >&2
apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
