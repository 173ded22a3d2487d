"""Bad input raises a Python exception naming what is wrong, and never takes the
interpreter down: wrong or missing columns, sketches of another mechanism, corrupt sketch
bytes (the fuzz corpus, truncations and bit flips), and merges of other configs (the
message of `ldpstream merge`)."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ldpstream
from conftest import grr_config, run_cli

REPO = Path(__file__).resolve().parents[2]


def grr_job(domain: int = 6, epsilon: float = 1.0, group_by=("group",)) -> ldpstream.Job:
    stream = {
        "name": "s",
        "source": {"kind": "parquet", "paths": ["x"]},
        "mechanism": {"kind": "grr", "epsilon": epsilon, "domain": domain},
        "test": [{"name": "g", "kind": "gof", "null": "uniform"}],
    }
    if group_by:
        stream["columns"] = {"group_by": list(group_by)}
    return ldpstream.Job({"stream": [stream]})


def test_a_missing_report_column_is_named():
    with pytest.raises(ValueError, match='column "report" not found'):
        grr_job().fold(pa.table({"reports": pa.array([1, 2], pa.uint32()),
                                 "group": ["a", "b"]}))


def test_a_report_column_of_the_wrong_type_is_named_with_both_types():
    with pytest.raises(ValueError, match=r'column "report" has type Int64, expected UInt32'):
        grr_job().fold(pa.table({"report": [1, 2], "group": ["a", "b"]}))


def test_group_and_time_columns_of_the_wrong_type_are_named():
    reports = pa.array([1, 2], pa.uint32())
    with pytest.raises(ValueError, match='column "group" has type Int64'):
        grr_job().fold(pa.table({"report": reports, "group": [1, 2]}))
    with pytest.raises(ValueError, match='column "ts" has type Utf8'):
        grr_job(group_by=()).fold(pa.table({"report": reports, "ts": ["now", "later"]}))


def test_not_arrow_data_is_a_type_error():
    with pytest.raises(TypeError, match="__arrow_c_stream__"):
        grr_job().fold([1, 2, 3])


def test_reports_of_another_mechanism_are_refused_naming_the_column():
    bits = ldpstream.Mechanism.bitflip(epsilon=1.0, domain=6)
    grr = ldpstream.Mechanism.grr(epsilon=1.0, domain=6)
    with pytest.raises(ValueError, match=r'column "report" has type FixedSizeBinary\(1\)'):
        ldpstream.gof(bits.randomize([1, 2, 3]), grr)


def test_sketches_of_another_mechanism_are_refused():
    sk = grr_job(domain=4).fold(pa.table({"report": pa.array([1, 2, 3], pa.uint32()),
                                          "group": ["a", "b", "a"]}))
    with pytest.raises(ValueError, match="mechanism domain changed from 4 to 6"):
        grr_job(domain=6).evaluate(sk)
    with pytest.raises(ValueError, match="mechanism epsilon changed from 1 to 2"):
        grr_job(domain=4, epsilon=2.0).evaluate(sk)


def _valid_bytes() -> bytes:
    return grr_job().fold(pa.table({"report": pa.array([0, 1, 2, 5] * 50, pa.uint32()),
                                    "group": ["a", "b"] * 100})).to_bytes()


def _corrupt(data: bytes) -> None:
    """from_bytes on `data` either decodes or raises ValueError; nothing else."""
    try:
        ldpstream.Sketches.from_bytes(data)
    except ValueError:
        pass


def test_corrupt_sketch_bytes_raise_value_error_never_crash():
    valid = _valid_bytes()
    with pytest.raises(ValueError, match="checksum mismatch"):
        ldpstream.Sketches.from_bytes(valid[:-1] + bytes([valid[-1] ^ 1]))
    with pytest.raises(ValueError, match="not an ldpstream sketch file"):
        ldpstream.Sketches.from_bytes(b"PAR1")
    for cut in range(len(valid)):
        with pytest.raises(ValueError):
            ldpstream.Sketches.from_bytes(valid[:cut])
    rng = random.Random(28)
    for _ in range(2000):
        damaged = bytearray(valid)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(damaged))
            damaged[i] ^= 1 << rng.randrange(8)
        _corrupt(bytes(damaged))


def test_the_fuzz_corpus_raises_value_error_or_decodes():
    seeds = sorted((REPO / "fuzz" / "seeds").glob("**/*"))
    files = [p for p in seeds if p.is_file()]
    assert files, "the fuzz corpus (fuzz/seeds) is missing"
    for path in files:
        data = path.read_bytes()
        _corrupt(data)
        # The same bytes behind a valid frame: checksums hold, so the decoder meets them.
        _corrupt(_reframed(data))


def _reframed(body: bytes) -> bytes:
    """`body` as the state part of a sketch file with a valid header and checksum."""
    import struct

    header = b'{"ldpstream":"0","inputs":{"s":["x"]}}'
    framed = b"LDPP" + bytes([1]) + struct.pack("<I", len(header)) + header + body
    return framed + struct.pack("<I", _crc32c(framed))


def _crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), which the standard library lacks; the frame is small."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def test_merging_other_configs_is_refused_with_the_message_of_ldpstream_merge(grr_files, tmp_path):
    one = ldpstream.Job(grr_config(grr_files[0].parent, epsilon=1.0, name="one.toml"))
    two_config = grr_config(grr_files[0].parent, epsilon=2.0, name="two.toml")
    two = ldpstream.Job(two_config)
    a = one.fold(pq.read_table(grr_files[0]))
    b = two.fold(pq.read_table(grr_files[1]))
    with pytest.raises(ValueError) as python:
        b.merge(a)
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "a.ldpp").write_bytes(b.to_bytes())
    (parts / "b.ldpp").write_bytes(a.to_bytes())
    cli = run_cli("merge", "--config", str(two_config), "--input", str(parts / "*.ldpp"),
                  ok=False).stderr
    reason = str(python.value).split("was counted under other settings:")[1]
    assert "was counted under other settings:" + reason in cli, (str(python.value), cli)
    assert "mechanism epsilon changed from 1 to 2" in reason
