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
from ldpstream.exceptions import ConfigError, InputError

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


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: ldpstream.Mechanism.oue(epsilon=float("nan"), domain=8), "epsilon = NaN"),
        (lambda: ldpstream.Mechanism.grr(epsilon=float("inf"), domain=8), "epsilon = inf"),
        (lambda: ldpstream.Mechanism.gauss(rho=float("nan"), domain=8), "rho = NaN"),
        # A NaN max_abs used to become null, i.e. silently the default.
        (lambda: ldpstream.Mechanism.laplace(epsilon=1.0, domain=8, max_abs=float("nan")),
         "max_abs = NaN"),
        (lambda: ldpstream.Mechanism.matrix(matrix=[[0.5, float("nan")], [0.5, 0.5]]),
         r"matrix\[0\]\[1\] = NaN"),
        # Issue 43 (py_misc): subset skipped the check and said "invalid type: null".
        (lambda: ldpstream.Mechanism.subset(epsilon=float("nan"), domain=8), "epsilon = NaN"),
    ],
)
def test_non_finite_mechanism_parameters_are_named(make, name):
    with pytest.raises(ValueError, match=name + ": must be a finite number"):
        make()


def test_a_nan_in_a_config_dict_gets_the_cli_message_naming_the_key():
    stream = {
        "name": "s",
        "source": {"kind": "parquet", "paths": ["x"]},
        "mechanism": {"kind": "grr", "epsilon": float("nan"), "domain": 4},
        "test": [{"name": "g", "kind": "gof", "null": "uniform"}],
    }
    with pytest.raises(ValueError, match=r"epsilon.*finite number > 0"):
        ldpstream.Job({"stream": [stream]})


def test_a_config_dict_value_toml_cannot_hold_is_named():
    with pytest.raises(ValueError, match=r"stream\[0\]\.mechanism\.domain is a NoneType"):
        ldpstream.Job({"stream": [{"name": "s", "mechanism": {"kind": "grr", "domain": None}}]})


@pytest.mark.parametrize("text", ["", "   "])
def test_an_empty_config_string_is_refused_as_such(text):
    with pytest.raises(ValueError, match="empty string is neither TOML text nor a path"):
        ldpstream.Job(text)


# Issue 43 (sketch_dup): two sections for one stream were accepted; Sketches.reports
# showed the last, Job.evaluate and `ldpstream merge` used the first.
def test_a_sketch_file_with_two_sections_for_one_stream_is_refused(tmp_path):
    import sketch_bytes

    job = grr_job(group_by=())
    sk = job.fold(pa.table({"report": pa.array([0, 1, 2, 3] * 100, pa.uint32())}))
    header, version, streams = sketch_bytes.parse(sk.to_bytes())
    second = dict(streams[0], retired=[([], sketch_bytes.counts_sketch([4000, 0, 0, 0, 0, 0]))])
    data = sketch_bytes.write(header, version, [streams[0], second])
    with pytest.raises(InputError, match='stream "s" has two sections'):
        ldpstream.Sketches.from_bytes(data)
    (tmp_path / "dup.ldpp").write_bytes(data)
    config = tmp_path / "job.toml"
    config.write_text('[[stream]]\nname = "s"\nsource = { kind = "parquet", paths = ["x"] }\n'
                      'mechanism = { kind = "grr", epsilon = 1.0, domain = 6 }\n'
                      '[[stream.test]]\nname = "g"\nkind = "gof"\nnull = "uniform"\n')
    cli = run_cli("merge", "--config", str(config), "--input", str(tmp_path / "dup.ldpp"), ok=False)
    assert 'stream "s" has two sections' in cli.stderr, cli.stderr


@pytest.mark.parametrize(
    "counts, n",
    [([10, 10, 10, 10, 10, 1000, 5], None), ([2**64 - 4, 1, 1, 1, 0, 0], None)],
    ids=["another domain", "n past 2^64"],
)
def test_sketches_that_cannot_be_added_are_an_input_error_not_internal(counts, n):
    # Issue 43: a crafted sketch's wrong domain or overflowing n raised RuntimeError (a
    # fault of ldpstream) from Sketches.merge, whose docstring promises ValueError.
    import sketch_bytes

    job = grr_job(group_by=())
    sk = job.fold(pa.table({"report": pa.array([0, 1, 2, 3] * 100, pa.uint32())}))
    header, version, streams = sketch_bytes.parse(sk.to_bytes())
    header = dict(header, inputs={"s": ["arrow:other"]}, input_ids={"s": ["other"]})
    crafted = dict(streams[0], retired=[([], sketch_bytes.counts_sketch(counts, n))])
    other = ldpstream.Sketches.from_bytes(sketch_bytes.write(header, version, [crafted]))
    with pytest.raises(InputError, match="cannot be added"):
        sk.merge(other)


# Issue 43 (py_misc): floats were truncated and strings parsed as categories.
@pytest.mark.parametrize(
    "values, type_name",
    [(pa.array([2.9, 0.5]), "Float64"), (pa.array(["1", "3"]), "Utf8"), (pa.array([True]), "Boolean")],
)
def test_randomize_refuses_values_that_are_not_integers_naming_the_type(values, type_name):
    m = ldpstream.Mechanism.grr(epsilon=1.0, domain=4)
    with pytest.raises(InputError, match=f"an array of {type_name}.*must be integers"):
        m.randomize(values)
    assert m.randomize(pa.array([1, 3], pa.int64()), insecure_seed=1) == m.randomize([1, 3], insecure_seed=1)
    with pytest.raises(InputError):
        m.randomize(pa.array([-1], pa.int64()))


# Issue 43 (py_misc): out-of-range integers raised OverflowError naming nothing.
@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: ldpstream.Mechanism.grr(epsilon=1.0, domain=-1), "domain = -1"),
        (lambda: ldpstream.Mechanism.grr(epsilon=1.0, domain=2**32), "domain = 4294967296"),
        (lambda: ldpstream.Mechanism.cohort(epsilon=1.0, domain=4, cohorts=8, seed=-2), "seed = -2"),
        (lambda: ldpstream.Mechanism.grr(epsilon=1.0, domain=4).randomize([1], insecure_seed=-1),
         "insecure_seed = -1"),
        (lambda: ldpstream.Mechanism.grr(epsilon=1.0, domain=4).messages([1], ts=2**63), "ts = 9223372036854775808"),
        (lambda: grr_job().run(pa.table({"report": pa.array([1], pa.uint32()), "group": ["a"]}),
                               insecure_seed=-1), "insecure_seed = -1"),
        (lambda: ldpstream.plan(-4, 1.0, "paninski:0.2", power=0.8), "domain = -4"),
    ],
)
def test_integers_out_of_range_are_config_errors_naming_the_parameter(call, name):
    with pytest.raises(ConfigError, match=name + ": must be an integer from"):
        call()


def test_integer_parameters_refuse_other_types():
    with pytest.raises(TypeError, match="domain must be an integer"):
        ldpstream.Mechanism.grr(epsilon=1.0, domain=4.0)
    with pytest.raises(TypeError, match="domain must be an integer"):
        ldpstream.Mechanism.grr(epsilon=1.0, domain=True)


# Issue 43 (py_misc): repeated group names made JSON with duplicate keys, which readers
# resolve differently (the server takes the first).
def test_messages_refuse_repeated_group_names_and_the_messages_own_keys():
    m = ldpstream.Mechanism.grr(epsilon=1.0, domain=4)
    with pytest.raises(InputError, match='"a" is given twice'):
        m.messages([1], groups=[("a", "1"), ("a", "2")])
    for key in ("report", "ts", "fingerprint"):
        with pytest.raises(InputError, match="key of the message itself"):
            m.messages([1], groups={key: "x"})
    olh = ldpstream.Mechanism.olh(epsilon=1.0, domain=4)
    with pytest.raises(InputError, match="key of the message itself"):
        olh.messages([1], groups={"seed": "x"})
    assert m.messages([1], groups={"country": "fr", "os": "ios"})


# Issue 43 (py_misc): a str path holding '=' was read as TOML text.
def test_a_config_path_with_an_equals_sign_is_a_path(tmp_path):
    run = tmp_path / "run=1"
    run.mkdir()
    path = run / "job.toml"
    path.write_text('[[stream]]\nname = "s"\nsource = { kind = "parquet", paths = ["x"] }\n'
                    'mechanism = { kind = "grr", epsilon = 1.0, domain = 4 }\n'
                    '[[stream.test]]\nname = "g"\nkind = "gof"\nnull = "uniform"\n')
    for config in (str(path), path):
        assert ldpstream.Job(config).streams == ["s"]
    one_line = ('stream = [{ name = "t", source = { kind = "parquet", paths = ["x"] }, '
                'mechanism = { kind = "grr", epsilon = 1.0, domain = 4 }, '
                'test = [{ name = "g", kind = "gof", null = "uniform" }] }]')
    assert ldpstream.Job(one_line).streams == ["t"]
    with pytest.raises(ConfigError, match=r"neither a file \(No such file.*\) nor TOML text"):
        ldpstream.Job(str(run / "missing.toml"))


def test_a_polars_categorical_group_column_folds_as_its_strings():
    polars = pytest.importorskip("polars")
    reports = pa.array([0, 1, 2, 3] * 100, pa.uint32())
    groups = ["a", "b"] * 200
    expected = grr_job().fold(pa.table({"report": reports, "group": groups})).to_bytes()
    frame = polars.DataFrame({"report": reports.to_pylist(), "group": groups}).with_columns(
        polars.col("report").cast(polars.UInt32), polars.col("group").cast(polars.Categorical))
    from cli_reference import sketch_body

    assert sketch_body(grr_job().fold(frame).to_bytes()) == sketch_body(expected)
