#!/usr/bin/env bash
# A cold `pip install ./python` of one commit (issue 46): a fresh clone, a fresh venv and an
# empty cargo target, timed by /usr/bin/time -v, with the load average at the start and the
# end, then `import ldpstream` from the venv. Run it for two commits back to back on a quiet
# machine to compare them (benches/RESULTS.md, "Redesign step 3").
#   scripts/pip_cold_install.sh COMMIT [WORKDIR]   (WORKDIR default: a new temporary directory)
# The pip and cargo registry caches are used as they are; OPENSSL_NO_VENDOR is unset, as a
# user's install has it.
set -euo pipefail
commit=${1:?usage: scripts/pip_cold_install.sh COMMIT [WORKDIR]}
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
work=${2:-$(mktemp -d)}
mkdir -p "$work"
git clone -q --no-checkout "$repo" "$work/src"
git -C "$work/src" checkout -q "$commit"
python3 -m venv "$work/venv"
echo "commit $(git -C "$work/src" rev-parse --short HEAD); load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
status=0
(cd "$work/src" && env -u OPENSSL_NO_VENDOR CARGO_TARGET_DIR="$work/target" \
  /usr/bin/time -v "$work/venv/bin/pip" install -q ./python) >"$work/pip.out" 2>"$work/pip.err" || status=$?
echo "pip exit $status; load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
grep -E "Elapsed|Maximum resident|User time|System time" "$work/pip.err"
[ "$status" -eq 0 ] || { tail -20 "$work/pip.err" >&2; exit "$status"; }
"$work/venv/bin/python" -c "import ldpstream; print('imports', ldpstream.__file__)"
echo "work directory: $work (remove it when done)"
