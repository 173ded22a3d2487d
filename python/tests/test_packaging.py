"""The tests import the package from scripts/python_env.sh's layout of the workspace-built
extension, not from a wheel; these checks keep that layout and pyproject.toml's wheel
(what `pip install ./python` builds) the same package."""

from __future__ import annotations

from pathlib import Path

import pytest

import ldpstream

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    pytest.skip("tomllib needs Python 3.11", allow_module_level=True)

PYTHON_DIR = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((PYTHON_DIR / "pyproject.toml").read_text())
MATURIN = PYPROJECT["tool"]["maturin"]


def test_the_wheel_holds_the_package_the_tests_import():
    assert MATURIN["python-packages"] == ["ldpstream"]
    assert MATURIN["python-source"] == "."
    assert MATURIN["module-name"] == "ldpstream._ldpstream"
    assert ldpstream._ldpstream.__name__ == MATURIN["module-name"]


def test_the_extension_is_the_crate_pyproject_builds():
    crate = tomllib.loads((PYTHON_DIR / MATURIN["manifest-path"]).read_text())
    assert crate["lib"]["name"] == MATURIN["module-name"].rsplit(".", 1)[1]
    assert crate["lib"]["crate-type"] == ["cdylib"]
    # The test layout has the test-only feature; the wheel must not ask for any.
    assert MATURIN["features"] == []


def test_the_wheel_profile_is_a_cargo_profile():
    # maturin passes `profile` to cargo as --profile; one missing from the workspace's
    # Cargo.toml fails only a user's `pip install ./python`, which CI does not run.
    workspace = tomllib.loads((PYTHON_DIR.parent / "Cargo.toml").read_text())
    profile = workspace["profile"][MATURIN["profile"]]
    assert profile["inherits"] == "release"


def test_every_file_of_the_source_package_is_imported_from_one_place():
    # python_env.sh copies these kinds of files; a new kind (data files, subpackages) would
    # be in the wheel but missing from the tests' copy, or the other way round.
    sources = {p.name for p in (PYTHON_DIR / "ldpstream").iterdir() if p.name != "__pycache__"}
    copied = {n for n in sources if n.endswith((".py", ".pyi")) or n == "py.typed"}
    assert sources == copied, sorted(sources - copied)
    imported = Path(ldpstream.__file__).parent
    installed = {p.name for p in imported.iterdir() if p.name != "__pycache__"}
    assert copied <= installed, sorted(copied - installed)
