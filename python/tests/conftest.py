"""Shared fixtures of the Python suite: the real `ldpstream` binary (the reference every
byte-compatibility test runs against) and small simulated Parquet inputs it writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cli_reference import binary  # noqa: E402


def run_cli(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
    """Runs the ldpstream binary; `ok` says whether it must succeed."""
    out = subprocess.run([binary(), *args], capture_output=True, text=True)
    if ok:
        assert out.returncode == 0, f"ldpstream {' '.join(args)}:\n{out.stderr}"
    else:
        assert out.returncode != 0, f"ldpstream {' '.join(args)} succeeded:\n{out.stdout}"
    return out


GRR_STREAM = """
[[stream]]
name = "s"
source = {{ kind = "parquet", paths = ["{data}/*.parquet"] }}
mechanism = {{ kind = "grr", epsilon = {epsilon}, domain = 6 }}
columns = {{ group_by = ["group"] }}
[[stream.test]]
name = "global"
kind = "gof"
null = "uniform"
[[stream.test]]
name = "ten_minutes"
kind = "gof"
null = "uniform"
window = {{ kind = "tumbling", size = "10m" }}
[[stream.test]]
name = "a_vs_b"
kind = "two_sample"
by = "group"
a = "a"
b = "b"
"""


@pytest.fixture(scope="session")
def grr_files(tmp_path_factory) -> List[Path]:
    """Two grouped, timed GenRR files written by `ldpstream simulate`."""
    data = tmp_path_factory.mktemp("grr")
    files = []
    for i, groups in enumerate(["a=3000,b=2000", "a=1500,b=2500"]):
        path = data / f"part-{i}.parquet"
        run_cli(
            "simulate", "--mechanism", "grr", "--epsilon", "1", "--domain", "6",
            "--p", "0.3,0.2,0.1,0.1,0.2,0.1", "--groups", groups, "--seed", str(i),
            "--ts-start", "2026-01-01T00:00:00Z", "--rate", "5", "--out", str(path),
        )
        files.append(path)
    return files


def grr_config(directory: Path, epsilon: float = 1.0, name: str = "grr.toml") -> Path:
    """The GenRR config over `directory`'s Parquet files, written beside them."""
    path = directory / name
    path.write_text(GRR_STREAM.format(data=directory, epsilon=epsilon))
    return path
