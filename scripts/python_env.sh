#!/usr/bin/env bash
# The Python package's test environment: the git-ignored venv .venv-py at the repository
# root, with the pinned test requirements (python/requirements-test.txt, and
# python/requirements-spark.txt when it exists) and the package.
#
# The package the tests import is the extension module the workspace's test build compiles
# (`cargo build --workspace --all-targets` with scripts/cargo_features.sh's features,
# target/debug/lib_ldpstream.so), laid out as the wheel lays it out: python/ldpstream/ with
# the module as ldpstream/_ldpstream.abi3.so, in target/python-package/, which a .pth file
# puts on the venv's path (what `maturin develop` does, without its second build). A
# `pip install ./python` here would build the python crate alone, so cargo would unify
# features over its dependencies only and compile about 40 crates a second time: 336 s of a
# fresh-clone CI run (benches/RESULTS.md). The layout is pyproject.toml's
# (python/tests/test_packaging.py checks that they agree).
#
# The extension has the python crate's feature `conformance-replay`: the test-only
# `ldpstream._conformance` that the golden conformance replay needs
# (python/tests/test_conformance.py). A user's `pip install ./python` never has it.
#
# LDPSTREAM_PY_RELEASE=1 installs instead with `pip install ./python`, exactly as a user
# does from a fresh clone (maturin, the release profile, no feature: a cold build of every
# dependency; the golden conformance test is then skipped).
#
# Prints the venv's python on stdout (everything else goes to stderr).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/cargo_features.sh
. scripts/cargo_features.sh
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
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
pth="$site/ldpstream-workspace.pth"
if [ "${LDPSTREAM_PY_RELEASE:-0}" = 1 ]; then
  rm -f "$pth"
  # --no-deps: the pinned requirements above already installed pyarrow, and
  # --force-reinstall (the package's version does not change between builds) would
  # otherwise reinstall it too on every run.
  "${pip[@]}" install --force-reinstall --no-deps ./python >&2
else
  # Compiles nothing when scripts/test.sh has built the tests; run alone, it builds them
  # too (--all-targets: without the tests' dev-dependencies cargo would unify other
  # features, and test.sh's build would then compile the workspace again).
  cargo build --all-targets "${cargo_features[@]}" >&2
  target=${CARGO_TARGET_DIR:-$PWD/target}
  case "$target" in /*) ;; *) target=$PWD/$target ;; esac
  staged=$target/python-package
  rm -rf "$staged"
  mkdir -p "$staged/ldpstream"
  cp python/ldpstream/*.py python/ldpstream/*.pyi python/ldpstream/py.typed "$staged/ldpstream/"
  cp "$target/debug/lib_ldpstream.so" "$staged/ldpstream/_ldpstream.abi3.so"
  # A pip-installed copy in site-packages would come first on the path.
  "${pip[@]}" uninstall -y ldpstream >&2 2>/dev/null || true
  echo "$staged" >"$pth"
fi
echo "ldpstream package installed in $(( $(date +%s) - started )) s" >&2
"$venv/bin/python" -c 'import ldpstream, sys; print("ldpstream from", ldpstream.__file__, file=sys.stderr)'
echo "$PWD/$venv/bin/python"
