"""The `ldpstream` binary as the reference for the Spark and Ray tests: it writes their
Parquet inputs (`simulate`) and the records and sketch files they must equal (`batch`,
`batch --emit-sketches`). Imported by test_spark.py and test_ray.py."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Dict, List

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[2]

# One grouped GenRR stream with a global and a tumbling-window GOF test, an independence
# test on its 2 x 3 table and a two-sample test between its groups.
GRR_CONFIG = """
[[stream]]
name = "s"
source = {{ kind = "parquet", paths = ["{data}/grr-*.parquet"] }}
mechanism = {{ kind = "grr", epsilon = 1.0, domain = 6 }}
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
name = "independent"
kind = "independence"
rows = 2
cols = 3
window = {{ kind = "tumbling", size = "10m" }}
[[stream.test]]
name = "a_vs_b"
kind = "two_sample"
by = "group"
a = "a"
b = "b"
"""

# Bit flip (reports arrive in Spark as Binary, not FixedSizeBinary), with its own
# independence and two-sample tests (LocalBitFlipIND fits by iteration).
BITFLIP_CONFIG = """
[[stream]]
name = "bits"
source = {{ kind = "parquet", paths = ["{data}/bitflip-*.parquet"] }}
mechanism = {{ kind = "bitflip", epsilon = 2.0, domain = 6 }}
[[stream.test]]
name = "independent"
kind = "independence"
rows = 2
cols = 3
[[stream.test]]
name = "a_vs_b"
kind = "two_sample"
by = "group"
a = "a"
b = "b"
window = {{ kind = "tumbling", size = "15m" }}
"""


# Every mechanism kind the config takes (ldpstream._ldpstream._mechanism_kinds(), which
# test_core.py checks against this table): `ldpstream simulate`'s arguments, the stream's
# `mechanism` table and any extra key of its tests. A new kind fails that check until it is
# added here, and the Spark and Ray tests then run it.
KIND_CASES = {
    "grr": (["--epsilon", "1", "--domain", "8"], 'kind = "grr", epsilon = 1.0, domain = 8', ""),
    "bitflip": (["--epsilon", "1", "--domain", "8"], 'kind = "bitflip", epsilon = 1.0, domain = 8', ""),
    "oue": (["--epsilon", "1", "--domain", "8"], 'kind = "oue", epsilon = 1.0, domain = 8', ""),
    "subset": (["--epsilon", "1", "--domain", "8"], 'kind = "subset", epsilon = 1.0, domain = 8', ""),
    "gauss": (["--rho", "0.5", "--domain", "8"], 'kind = "gauss", rho = 0.5, domain = 8', ""),
    "laplace": (["--epsilon", "1", "--domain", "8"], 'kind = "laplace", epsilon = 1.0, domain = 8', ""),
    "hadamard": (["--epsilon", "1", "--domain", "8"], 'kind = "hadamard", epsilon = 1.0, domain = 8', ""),
    "cohort": (
        ["--epsilon", "1", "--domain", "8", "--cohorts", "16"],
        'kind = "cohort", epsilon = 1.0, domain = 8, cohorts = 16',
        "",
    ),
    # A small Monte Carlo null keeps the OLH test to a fraction of a second.
    "olh": (["--epsilon", "1", "--domain", "8"], 'kind = "olh", epsilon = 1.0, domain = 8', "mc_samples = 99"),
    "matrix": (
        ["--matrix", "0.8,0.1,0.1;0.1,0.8,0.1;0.1,0.1,0.8"],
        "kind = \"matrix\", matrix = [[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]]",
        "",
    ),
    "raw": (["--domain", "8"], 'kind = "raw", domain = 8', ""),
}
# The longitudinal kinds: reports from simulated devices (`simulate --devices`), one per
# device and period, so no groups and no window across periods (docs/STATISTICS.md §1.9).
for _kind in ("lgrr", "losue", "lsue"):
    KIND_CASES[_kind] = (
        ["--epsilon-perm", "2", "--epsilon-1", "1", "--domain", "8", "--period", "1d"],
        f'kind = "{_kind}", epsilon_perm = 2.0, epsilon_1 = 1.0, domain = 8, period = "1d"',
        "",
    )
LONGITUDINAL_KINDS = ("lgrr", "losue", "lsue")

# One grouped, timed stream of a kind: a global and a one-minute tumbling GOF test.
KIND_CONFIG = """
[[stream]]
name = "s"
source = {{ kind = "parquet", paths = ["{data}/{kind}-*.parquet"] }}
mechanism = {{ {mechanism} }}
columns = {{ group_by = ["group"] }}
[[stream.test]]
name = "global"
kind = "gof"
null = "uniform"
{extra}
[[stream.test]]
name = "minutes"
kind = "gof"
null = "uniform"
window = {{ kind = "tumbling", size = "1m" }}
{extra}
"""


# A longitudinal kind's stream: six-hour windows inside its one-day period.
DEVICES_CONFIG = """
[[stream]]
name = "s"
source = {{ kind = "parquet", paths = ["{data}/{kind}-*.parquet"] }}
mechanism = {{ {mechanism} }}
[[stream.test]]
name = "quarters"
kind = "gof"
null = "uniform"
window = {{ kind = "tumbling", size = "6h" }}
{extra}
"""


def kind_reference(data: Path, kind: str) -> "Reference":
    """Two grouped, timed Parquet files of `kind` (4,000 reports) written by `simulate`,
    and what `batch` makes of them; for a longitudinal kind, two files of 2,000 simulated
    devices' reports over one period."""
    args, mechanism, extra = KIND_CASES[kind]
    if kind in LONGITUDINAL_KINDS:
        return _devices_reference(data, kind, args, mechanism, extra)
    files = []
    for i, groups in enumerate(["a=1500,b=500", "a=800,b=1200"]):
        path = data / f"{kind}-{i}.parquet"
        ldpstream(
            "simulate", "--mechanism", kind, *args, "--groups", groups, "--seed", str(i),
            "--ts-start", "2026-01-01T00:00:00Z", "--rate", "20", "--out", str(path),
        )
        files.append(path)
    config = data / f"{kind}.toml"
    config.write_text(KIND_CONFIG.format(data=data, kind=kind, mechanism=mechanism, extra=extra))
    out = data / f"ref-{kind}"
    out.mkdir()
    return Reference(config, files, out)


def _devices_reference(data: Path, kind: str, args, mechanism: str, extra: str) -> "Reference":
    files = []
    for i in range(2):
        path = data / f"{kind}-{i}.parquet"
        ldpstream(
            "simulate", "--mechanism", kind, *args, "--devices", "2000", "--periods", "1",
            "--seed", str(i), "--ts-start", "2026-01-01T00:00:00Z", "--out", str(path),
        )
        files.append(path)
    config = data / f"{kind}.toml"
    config.write_text(DEVICES_CONFIG.format(data=data, kind=kind, mechanism=mechanism, extra=extra))
    out = data / f"ref-{kind}"
    out.mkdir()
    return Reference(config, files, out)


def binary() -> str:
    """The ldpstream binary: $LDPSTREAM_BIN, else ldpstream in $LDPSTREAM_BIN_DIR, else
    the debug build in $CARGO_TARGET_DIR (or target/), built if missing."""
    if os.environ.get("LDPSTREAM_BIN"):
        return os.environ["LDPSTREAM_BIN"]
    if os.environ.get("LDPSTREAM_BIN_DIR"):
        return os.path.join(os.environ["LDPSTREAM_BIN_DIR"], "ldpstream")
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    path = target / "debug" / "ldpstream"
    if not path.exists():
        cargo = shutil.which("cargo")
        assert cargo, f"no ldpstream binary at {path} and no cargo to build it"
        subprocess.run([cargo, "build", "--quiet", "--bin", "ldpstream"], cwd=REPO, check=True)
    return str(path)


def ldpstream(*args: str) -> subprocess.CompletedProcess:
    out = subprocess.run([binary(), *args], capture_output=True, text=True)
    assert out.returncode == 0, f"ldpstream {' '.join(args)}:\n{out.stderr}"
    return out


def simulate(data: Path) -> Dict[str, List[Path]]:
    """Three GenRR and two bit-flip Parquet files, grouped, with event times."""
    files: Dict[str, List[Path]] = {"grr": [], "bitflip": []}
    for i, groups in enumerate(["a=20000,b=5000", "a=7000,b=9000", "b=12000,a=3000"]):
        path = data / f"grr-{i}.parquet"
        ldpstream(
            "simulate", "--mechanism", "grr", "--epsilon", "1", "--domain", "6",
            "--p", "0.3,0.2,0.1,0.1,0.2,0.1", "--groups", groups, "--seed", str(i),
            "--ts-start", "2026-01-01T00:00:00Z", "--rate", "20", "--out", str(path),
        )
        files["grr"].append(path)
    for i, groups in enumerate(["a=30000,b=10000", "b=25000,a=5000"]):
        path = data / f"bitflip-{i}.parquet"
        ldpstream(
            "simulate", "--mechanism", "bitflip", "--epsilon", "2", "--domain", "6",
            "--p", "0.25,0.15,0.1,0.2,0.2,0.1", "--groups", groups, "--seed", str(10 + i),
            "--ts-start", "2026-01-01T00:00:00Z", "--rate", "30", "--out", str(path),
        )
        files["bitflip"].append(path)
    return files


class Reference:
    """What `ldpstream batch` makes of one config over its files."""

    def __init__(self, config: Path, files: List[Path], out: Path):
        self.config = config
        self.files = files
        inputs = [a for f in files for a in ("--input", str(f))]
        parquet = out / "records.parquet"
        ldpstream("batch", "--config", str(config), *inputs, "--output", str(parquet))
        self.table = pq.read_table(parquet)
        jsonl = out / "records.jsonl"
        ldpstream("batch", "--config", str(config), *inputs, "--output", str(jsonl))
        self.records = [json.loads(line) for line in jsonl.read_text().splitlines()]
        sketches = out / "sketches"
        ldpstream("batch", "--config", str(config), *inputs, "--emit-sketches", str(sketches))
        (emitted,) = sorted(sketches.glob("*.ldpp"))
        self.sketch_file = emitted.read_bytes()


def write_config(template: str, data: Path, name: str) -> Path:
    path = data / name
    path.write_text(template.format(data=data))
    return path


def sketch_body(data: bytes) -> bytes:
    """The sketches of a sketch file without its header (which names the inputs: file
    paths for `batch`, `arrow:` identities for in-memory folds) and checksum: `LDPP`, the
    version byte, the header's u32 length and JSON, the state encoding, a CRC-32C."""
    assert data[:4] == b"LDPP", data[:16]
    (header_len,) = struct.unpack_from("<I", data, 5)
    json.loads(data[9 : 9 + header_len])
    return data[9 + header_len : -4]


def assert_same_records(table: pa.Table, reference: Reference) -> None:
    """Exactly the records of `batch`: the Parquet output's table, value for value, and
    every JSON record's numbers."""
    assert table.schema == reference.table.schema, (table.schema, reference.table.schema)
    assert table.equals(reference.table), _first_difference(table, reference.table)
    rows = table.to_pylist()
    assert len(rows) == len(reference.records)
    for row, record in zip(rows, reference.records):
        for key, value in record.items():
            if isinstance(value, (int, float, bool, list)) or value is None:
                assert row[key] == value, (key, row[key], value)


def _first_difference(a: pa.Table, b: pa.Table) -> str:
    for i, (x, y) in enumerate(zip(a.to_pylist(), b.to_pylist())):
        if x != y:
            keys = [k for k in x if x.get(k) != y.get(k)]
            return f"record {i} differs in {keys}: {[(x[k], y.get(k)) for k in keys]}"
    return f"{a.num_rows} vs {b.num_rows} records"
