#!/usr/bin/env bash
# The Python package's test environment: the git-ignored venv .venv-py at the repository
# root, with the pinned test requirements (python/requirements-test.txt, and
# python/requirements-spark.txt when it exists) and `pip install ./python`.
#
# The extension is built by maturin through pip (PEP 517) with the workspace's target
# directory and cargo's `test` profile, so it reuses the dependencies `cargo test
# --workspace` already compiled (arrow, parquet, librdkafka) instead of a cold release
# build of them. Set LDPSTREAM_PY_PROFILE=release for a wheel to ship.
#
# Prints the venv's python on stdout (everything else goes to stderr).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-py
python=${PYTHON:-python3}
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv" >&2
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
"${pip[@]}" install -r python/requirements-test.txt >&2
if [ -f python/requirements-spark.txt ]; then
  "${pip[@]}" install -r python/requirements-spark.txt >&2
fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
export MATURIN_PEP517_ARGS="--profile ${LDPSTREAM_PY_PROFILE:-test}"
started=$(date +%s)
"${pip[@]}" install --force-reinstall --no-deps ./python >&2
echo "pip install ./python: $(( $(date +%s) - started )) s (profile ${LDPSTREAM_PY_PROFILE:-test}, target $CARGO_TARGET_DIR)" >&2
echo "$PWD/$venv/bin/python"
