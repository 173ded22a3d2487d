#!/usr/bin/env bash
# The Python package's test environment: the git-ignored venv .venv-py at the repository
# root, with the pinned test requirements (python/requirements-test.txt, and
# python/requirements-spark.txt when it exists) and the package.
#
# The package is installed as a user installs it, with `pip install ./python` (maturin from
# PyPI as the PEP 517 backend). By default maturin is asked for cargo's `dev` profile
# (MATURIN_PEP517_ARGS), whose settings equal the `test` profile's (Cargo.toml), so it
# reuses the dependencies `cargo test --workspace` compiled with the same features. maturin
# builds the python crate alone, so cargo unifies features over its dependencies only, and
# about 40 crates whose features differ from the workspace build's (libc, serde, syn, rand,
# the arrow crates above them, ...) compile a second time: 336 s in a fresh-clone CI run
# (benches/RESULTS.md), against ~13 minutes for a cold release build.
#
# The connectors' `parquet-codecs` feature, which a user's install leaves out (the package
# opens no Parquet file), keeps the dependency graph equal to the test build's.
#
# The test install adds the python crate's feature `conformance-replay`: the test-only
# `ldpstream._conformance` that the golden conformance replay needs
# (python/tests/test_conformance.py). A user's `pip install ./python` never has it.
#
# LDPSTREAM_PY_RELEASE=1 leaves maturin's defaults, the release profile and no feature,
# exactly as a user's `pip install ./python` from a fresh clone (a cold build of every
# dependency; the golden conformance test is then skipped).
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
# Only the venv and the requirements: scripts/prefetch.sh downloads them while cargo compiles.
if [ "${LDPSTREAM_PY_DEPS_ONLY:-0}" = 1 ]; then
  exit 0
fi
started=$(date +%s)
# --no-deps: the pinned requirements above already installed pyarrow, and
# --force-reinstall (the package's version does not change between builds) would
# otherwise reinstall it too on every run.
if [ "${LDPSTREAM_PY_RELEASE:-0}" = 1 ]; then
  "${pip[@]}" install --force-reinstall --no-deps ./python >&2
else
  MATURIN_PEP517_ARGS="--profile dev --features conformance-replay,ldpstream-connectors/parquet-codecs" "${pip[@]}" install --force-reinstall --no-deps ./python >&2
fi
echo "ldpstream package installed in $(( $(date +%s) - started )) s" >&2
"$venv/bin/python" -c 'import ldpstream' >&2
echo "$PWD/$venv/bin/python"
