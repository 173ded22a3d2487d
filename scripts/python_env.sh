#!/usr/bin/env bash
# The Python package's test environment: the git-ignored venv .venv-py at the repository
# root, with the pinned test requirements (python/requirements-test.txt, and
# python/requirements-spark.txt when it exists) and the package.
#
# By default the extension is built by cargo with the `test` profile into the workspace's
# target directory, so it reuses what `cargo test --workspace` already compiled (arrow,
# parquet, librdkafka); only the python crate is compiled. It is then laid into the venv's
# site-packages as `maturin develop` lays it out (ldpstream/ with the native module). The
# maturin route cannot do this: it builds with `cargo rustc`, for which `--profile test`
# means "compile the test harness" (the result is an executable, not a module), and any
# other profile recompiles every dependency cold.
#
# LDPSTREAM_PY_PIP=1 installs with `pip install ./python` instead (maturin, release
# profile, as a user does from a fresh clone: a cold build of every dependency).
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
started=$(date +%s)
if [ "${LDPSTREAM_PY_PIP:-0}" = 1 ]; then
  "${pip[@]}" install --force-reinstall --no-deps ./python >&2
else
  target="${CARGO_TARGET_DIR:-target}"
  cargo build --profile test -p ldpstream-python >&2
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  rm -rf "$site/ldpstream" "$site"/ldpstream-*.dist-info
  mkdir -p "$site/ldpstream"
  cp python/ldpstream/*.py python/ldpstream/*.pyi python/ldpstream/py.typed "$site/ldpstream/"
  # The abi3 module name: one file for every CPython >= 3.9.
  cp "$target/debug/lib_ldpstream.so" "$site/ldpstream/_ldpstream.abi3.so"
fi
echo "ldpstream package installed in $(( $(date +%s) - started )) s" >&2
"$venv/bin/python" -c 'import ldpstream' >&2
echo "$PWD/$venv/bin/python"
