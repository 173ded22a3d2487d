"""The package against the CLI: the same sketches (bit for bit) and records as
`ldpstream batch`, sketch bytes that `ldpstream merge` takes next to its own files and the
reverse, merge's double-count protection for in-memory data, every Arrow producer of the
PyCapsule interface, the GIL released while folding, the randomizers and the ledger."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ldpstream
from cli_reference import sketch_body
from conftest import grr_config, run_cli


def emit(config: Path, files, out: Path) -> Path:
    inputs = [a for f in files for a in ("--input", str(f))]
    run_cli("batch", "--config", str(config), *inputs, "--emit-sketches", str(out))
    (written,) = sorted(out.glob("*.ldpp"))
    return written


def batch_records(config: Path, files, out: Path):
    inputs = [a for f in files for a in ("--input", str(f))]
    run_cli("batch", "--config", str(config), *inputs, "--output", str(out))
    return [json.loads(line) for line in out.read_text().splitlines()]


def jsonl(records_table: pa.Table):
    """The records as `batch` writes JSON: maps as objects."""
    return records_table.to_pylist(maps_as_pydicts="strict")


def _plain(value):
    """A value as JSON has it: structs without their null fields."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    return value


def same_records(python_records, cli_records):
    """Every number, flag, list and map of every record equal (timestamps are RFC 3339
    text in JSON and timestamps in Arrow: compared through the Parquet schema instead)."""
    assert len(python_records) == len(cli_records)
    for mine, theirs in zip(python_records, cli_records):
        for key, value in theirs.items():
            if isinstance(value, str) and key in ("window_start", "window_end", "look_end"):
                continue
            assert _plain(mine[key]) == value, (key, mine[key], value)


def test_fold_gives_the_sketches_of_batch_bit_for_bit(grr_files, tmp_path):
    config = grr_config(grr_files[0].parent)
    cli = emit(config, grr_files, tmp_path / "cli").read_bytes()
    job = ldpstream.Job(config)
    sk = job.fold(pq.read_table(grr_files[0])).merge(job.fold(pq.read_table(grr_files[1])))
    assert sketch_body(sk.to_bytes()) == sketch_body(cli)
    assert sk.reports == {"s": 9000}


def test_run_gives_the_records_of_batch(grr_files, tmp_path):
    config = grr_config(grr_files[0].parent)
    cli = batch_records(config, grr_files, tmp_path / "o.jsonl")
    table = pa.concat_tables([pq.read_table(f) for f in grr_files])
    records = ldpstream.Job(config).run(table)
    assert records.schema == pq.read_schema(_parquet_records(config, grr_files, tmp_path))
    same_records(jsonl(records), cli)
    assert {r["test"] for r in cli} == {"global", "ten_minutes", "a_vs_b"}


def _parquet_records(config, files, tmp_path) -> Path:
    out = tmp_path / "records.parquet"
    inputs = [a for f in files for a in ("--input", str(f))]
    run_cli("batch", "--config", str(config), *inputs, "--output", str(out))
    return out


def test_ldpstream_merge_takes_python_sketch_bytes_next_to_cli_files(grr_files, tmp_path):
    config = grr_config(grr_files[0].parent)
    parts = tmp_path / "parts"
    emit(config, grr_files[:1], parts)
    python_part = ldpstream.Job(config).fold(pq.read_table(grr_files[1]))
    (parts / "python.ldpp").write_bytes(python_part.to_bytes())
    merged = tmp_path / "merged.jsonl"
    run_cli("merge", "--config", str(config), "--input", str(parts / "*.ldpp"),
            "--output", str(merged))
    merged_records = [json.loads(line) for line in merged.read_text().splitlines()]
    same_records(merged_records, batch_records(config, grr_files, tmp_path / "all.jsonl"))


def test_python_evaluates_cli_sketch_files_merged_with_its_own(grr_files, tmp_path):
    config = grr_config(grr_files[0].parent)
    cli_part = ldpstream.Sketches.from_bytes(emit(config, grr_files[:1], tmp_path / "p").read_bytes())
    job = ldpstream.Job(config)
    merged = cli_part.merge(job.fold(pq.read_table(grr_files[1])))
    same_records(jsonl(job.evaluate(merged)),
                 batch_records(config, grr_files, tmp_path / "all.jsonl"))


def test_the_same_data_folded_twice_is_refused_by_both_merges(grr_files, tmp_path):
    config = grr_config(grr_files[0].parent)
    job = ldpstream.Job(config)
    table = pq.read_table(grr_files[0])
    first, again = job.fold(table), job.fold(pa.table(table.to_pydict(), schema=table.schema))
    assert first.inputs == again.inputs, "the identity is the content, not the object"
    with pytest.raises(ValueError, match="count its reports twice"):
        first.merge(again)
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "one.ldpp").write_bytes(first.to_bytes())
    (parts / "two.ldpp").write_bytes(again.to_bytes())
    out = run_cli("merge", "--config", str(config), "--input", str(parts / "*.ldpp"), ok=False)
    assert "count its reports twice" in out.stderr
    # Other data, or the same data under another explicit identity, merges.
    other = job.fold(pq.read_table(grr_files[1]))
    assert first.merge(other).reports == {"s": 9000}
    assert first.merge(job.fold(table, input_id="replay-2")).reports == {"s": 10000}


def test_every_arrow_producer_folds_to_the_same_sketches(grr_files):
    polars = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    pd = pytest.importorskip("pandas")
    job = ldpstream.Job(grr_config(grr_files[0].parent))
    table = pq.read_table(grr_files[0])
    expected = sketch_body(job.fold(table).to_bytes())
    con = duckdb.connect()
    con.register("t", table)
    producers = {
        "pyarrow Table": table,
        "RecordBatchReader": pa.RecordBatchReader.from_batches(table.schema, table.to_batches(1000)),
        "RecordBatch": table.combine_chunks().to_batches()[0],
        "polars": polars.from_arrow(table),
        "duckdb": con.sql("select * from t"),
        "pandas (Arrow dtypes)": pa.table(table.to_pandas(types_mapper=pd.ArrowDtype)),
    }
    for name, data in producers.items():
        assert sketch_body(job.fold(data).to_bytes()) == expected, name


def test_pandas_frames_with_arrow_dtypes_fold_directly(grr_files):
    pd = pytest.importorskip("pandas")
    job = ldpstream.Job(grr_config(grr_files[0].parent))
    table = pq.read_table(grr_files[0])
    frame = table.to_pandas(types_mapper=pd.ArrowDtype)
    if not hasattr(frame, "__arrow_c_stream__"):
        pytest.skip(f"pandas {pd.__version__} frames have no __arrow_c_stream__")
    assert job.fold(frame).reports == {"s": 5000}


def test_fold_releases_the_gil():
    m = ldpstream.Mechanism.grr(epsilon=1.0, domain=16)
    chunk = m.randomize(list(range(16)) * 62_500, insecure_seed=3)
    table = pa.Table.from_batches([pa.record_batch({"report": chunk})] * 40)  # 40M reports
    job = ldpstream.Job({"stream": [{
        "name": "s", "source": {"kind": "parquet", "paths": ["x"]},
        "mechanism": m.config,
        "test": [{"name": "g", "kind": "gof", "null": "uniform"}]}]})
    done = threading.Event()
    folded = []

    def fold():
        folded.append(job.fold(table))
        done.set()

    started = time.perf_counter()
    thread = threading.Thread(target=fold)
    thread.start()
    spins = 0
    while not done.is_set():
        spins += 1
    thread.join()
    elapsed = time.perf_counter() - started
    assert folded[0].reports == {"s": 40_000_000}
    # With the GIL held, this thread could not run until the fold returned.
    assert spins > 1000, (spins, elapsed)


def test_randomize_draws_fresh_noise_unless_seeded_insecurely():
    m = ldpstream.Mechanism.grr(epsilon=0.5, domain=8)
    values = list(range(8)) * 500
    assert m.randomize(values) != m.randomize(values)
    assert m.randomize(values, insecure_seed=7) == m.randomize(values, insecure_seed=7)
    with pytest.raises(TypeError):
        m.randomize(values, 7)  # the seed is keyword-only, never positional
    with pytest.raises(ValueError, match="8"):
        m.randomize([8])
    assert m.randomize(pa.array(values, pa.int64()), insecure_seed=1) == \
        m.randomize(values, insecure_seed=1)


def test_reports_have_the_documented_formats_and_batch_reads_them(tmp_path):
    cases = {
        "grr": (ldpstream.Mechanism.grr(epsilon=1.0, domain=5), pa.uint32()),
        "bitflip": (ldpstream.Mechanism.bitflip(epsilon=1.0, domain=12), pa.binary(2)),
        "oue": (ldpstream.Mechanism.oue(epsilon=1.0, domain=12), pa.binary(2)),
        "gauss": (ldpstream.Mechanism.gauss(rho=0.5, domain=5), pa.list_(pa.field("item", pa.float64(), False), 5)),
        "laplace": (ldpstream.Mechanism.laplace(epsilon=1.0, domain=5), pa.list_(pa.field("item", pa.float64(), False), 5)),
        "matrix": (ldpstream.Mechanism.matrix(matrix=[[0.7, 0.3], [0.3, 0.7]]), pa.uint32()),
        "raw": (ldpstream.Mechanism.raw(domain=5), pa.uint32()),
    }
    for kind, (m, expected) in cases.items():
        reports = m.randomize([i % m.domain for i in range(2000)])
        assert reports.type == expected, (kind, reports.type)
        assert m.kind == kind
    for m, index in [(ldpstream.Mechanism.hadamard(epsilon=1.0, domain=8), "row"),
                     (ldpstream.Mechanism.cohort(epsilon=1.0, domain=4, cohorts=16), "cohort")]:
        reports = m.randomize([i % 4 for i in range(4000)])
        assert reports.type == pa.struct([pa.field(index, pa.uint32(), False),
                                          pa.field("report", pa.int8(), False)])
        path = tmp_path / f"{m.kind}.parquet"
        pq.write_table(pa.Table.from_batches([pa.RecordBatch.from_struct_array(reports)]), path)
        config = tmp_path / f"{m.kind}.toml"
        table = ", ".join(f"{k} = {json.dumps(v)}" for k, v in m.config.items())
        config.write_text(
            f'[[stream]]\nname = "s"\nsource = {{ kind = "parquet", paths = ["{path}"] }}\n'
            f"mechanism = {{ {table} }}\n"
            '[[stream.test]]\nname = "g"\nkind = "gof"\nnull = "uniform"\n')
        (record,) = batch_records(config, [path], tmp_path / f"{m.kind}.jsonl")
        assert record["n"] == 4000, record
        assert record["rejected_reports"] == {k: 0 for k in record["rejected_reports"]}


def test_oue_reports_estimate_the_truth():
    # OUE keeps the true bit with probability 1/2 and sets each other bit with 1/(e+1):
    # the debiased estimate of 20,000 reports of a known law lands within 4 s.e.
    m = ldpstream.Mechanism.oue(epsilon=1.0, domain=4)
    truth = [0.4, 0.3, 0.2, 0.1]
    values = [j for j, p in enumerate(truth) for _ in range(int(p * 20_000))]
    est = ldpstream.estimate(m.randomize(values, insecure_seed=5), m)
    for j, p in enumerate(truth):
        assert abs(est["estimate"][j] - p) < 4 * est["std_error"][j], (j, est)


def test_subset_reports_are_sorted_k_subsets_that_estimate_the_truth():
    # k omitted: ceil(1000/(e^2 + 1)) = 120, the engine's default; each report a sorted
    # list of k distinct categories below d (List(UInt32), the Parquet report format).
    m = ldpstream.Mechanism.subset(epsilon=2.0, domain=1000)
    assert m.kind == "subset" and "k" not in m.config
    rows = m.randomize([0, 999, 500], insecure_seed=1)
    assert pa.types.is_list(rows.type) and rows.type.value_type == pa.uint32()
    for row in rows.to_pylist():
        assert len(row) == 120 and row == sorted(set(row)) and row[-1] < 1000
    # With k = 2 of d = 4 the debiased item counts of 20,000 reports land within 4 s.e.
    m = ldpstream.Mechanism.subset(epsilon=1.0, domain=4, k=2)
    assert m.config["k"] == 2
    truth = [0.4, 0.3, 0.2, 0.1]
    values = [j for j, p in enumerate(truth) for _ in range(int(p * 20_000))]
    est = ldpstream.estimate(m.randomize(values, insecure_seed=5), m)
    for j, p in enumerate(truth):
        assert abs(est["estimate"][j] - p) < 4 * est["std_error"][j], (j, est)
    for bad in [0, 4]:
        with pytest.raises(ValueError, match="k"):
            ldpstream.Mechanism.subset(epsilon=1.0, domain=4, k=bad)


def test_olh_reports_are_pool_index_and_bucket_that_estimate_the_truth():
    # g and pool_size omitted: round(e^2) + 1 = 8 and 1024, the config's defaults, left out
    # of the config as the config leaves them; reports a struct of seed and report (UInt32).
    m = ldpstream.Mechanism.olh(epsilon=2.0, domain=1000)
    assert m.kind == "olh" and "g" not in m.config and "pool_size" not in m.config
    assert m.fingerprint == ldpstream.Mechanism.olh(epsilon=2.0, domain=1000, g=8, pool_size=1024).fingerprint
    rows = m.randomize([0, 999, 500], insecure_seed=1)
    assert [(f.name, f.type) for f in rows.type] == [("seed", pa.uint32()), ("report", pa.uint32())]
    assert all(r["seed"] < 1024 and r["report"] < 8 for r in rows.to_pylist())
    # d = 4, g = 3: the debiased support counts of 40,000 reports within 4 s.e. The pool is
    # 2^12 because a fixed pool adds a collision bias (STATISTICS.md §1.8): here every |z| is
    # below 1.2, while 16 seeds put the first estimate 11.6 s.e. off.
    m = ldpstream.Mechanism.olh(epsilon=1.0, domain=4, g=3, pool_size=4096, pool_seed=7)
    assert m.config == {"kind": "olh", "epsilon": 1.0, "domain": 4, "g": 3, "pool_size": 4096, "pool_seed": 7}
    truth = [0.4, 0.3, 0.2, 0.1]
    values = [j for j, p in enumerate(truth) for _ in range(int(p * 40_000))]
    reports = m.randomize(values, insecure_seed=5)
    est = ldpstream.estimate(reports, m)
    for j, p in enumerate(truth):
        assert abs(est["estimate"][j] - p) < 4 * est["std_error"][j], (j, est)
    # estimate runs a cheap test (alpha 0.5, 3 null tables) instead of gof's 999 Monte
    # Carlo tables; the estimate columns are the same numbers.
    record = ldpstream.gof(reports, m)
    assert (est["n"], est["estimate"], est["std_error"]) == (
        record["n"], record["estimate"], record["std_error"])
    (j,) = m.messages([3], ts=9)
    message = json.loads(j)
    assert list(message) == ["seed", "report", "ts", "fingerprint"]
    assert message["seed"] < 4096 and message["report"] < 3
    (b,) = m.messages([3], format="binary")
    assert len(b) == 1 + 4 + 8 + 4 + 4 and int.from_bytes(b[13:17], "little") < 4096
    for kwargs, name in [
        ({"g": 1}, "g"),
        ({"g": 65537}, "g"),
        ({"pool_size": 0}, "pool_size"),
        ({"g": 65536, "pool_size": 512}, "pool_size"),
        ({"epsilon": float("nan")}, "epsilon"),
    ]:
        with pytest.raises(ValueError, match=name):
            ldpstream.Mechanism.olh(**{"epsilon": 1.0, "domain": 4, **kwargs})


def test_mechanism_parameters_are_checked_as_the_config_checks_them():
    with pytest.raises(ValueError, match="epsilon"):
        ldpstream.Mechanism.grr(epsilon=-1.0, domain=4)
    with pytest.raises(ValueError, match="domain"):
        ldpstream.Mechanism.bitflip(epsilon=1.0, domain=1)


def test_config_errors_carry_the_cli_message(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[[stream]]\nname = "s"\nsource = { kind = "parquet", paths = ["x"] }\n'
                   'mechanism = { kind = "grr", epsilon = 1.0, domain = 1 }\n'
                   '[[stream.test]]\nname = "g"\nkind = "gof"\nnull = "uniform"\n')
    cli = run_cli("check", "--config", str(bad), ok=False).stderr
    with pytest.raises(ValueError) as caught:
        ldpstream.Job(bad)
    assert str(caught.value) in cli, (str(caught.value), cli)
    assert "domain" in str(caught.value)
    for source in (str(bad), bad.read_text()):
        with pytest.raises(ValueError, match="domain"):
            ldpstream.Job(source)
    with pytest.raises(ValueError, match="no_such_key"):
        ldpstream.Job({"stream": [], "no_such_key": 1})


LEDGER_CONFIG = """
[[stream]]
name = "raw"
source = { kind = "parquet", paths = ["x"] }
mechanism = { kind = "raw", domain = 20 }
budget_epsilon = 1.0
[[stream.test]]
name = "collisions"
kind = "uniformity"
epsilon = 0.4
"""


def test_curator_streams_need_a_ledger_and_stop_at_the_budget(tmp_path):
    with pytest.raises(ValueError, match="ledger"):
        ldpstream.Job(LEDGER_CONFIG)
    with pytest.raises(ValueError, match="absolute"):
        ldpstream.Job(LEDGER_CONFIG, ledger="relative.json")
    ledger = tmp_path / "ledger.json"
    job = ldpstream.Job(LEDGER_CONFIG, ledger=str(ledger))
    data = pa.table({"report": ldpstream.Mechanism.raw(domain=20).randomize(
        [i % 20 for i in range(5000)])})
    spent = [job.run(data, insecure_seed=1).to_pylist()[0] for _ in range(3)]
    assert [r["epsilon_spent"] for r in spent[:2]] == [0.4, 0.4]
    assert spent[2]["refused"] == "privacy budget exhausted"
    assert spent[2]["statistic"] is None
    book = json.loads(ledger.read_text())
    assert len(book["streams"]["raw"]["spends"]) == 2


def test_one_liners_run_the_batch_job():
    m = ldpstream.Mechanism.grr(epsilon=2.0, domain=4)
    skewed = m.randomize([0] * 3000 + [1] * 1000, insecure_seed=5)
    assert ldpstream.gof(skewed, m)["reject"] is True
    est = ldpstream.estimate(skewed, m)
    assert est["n"] == 4000 and abs(est["estimate"][0] - 0.75) < 0.1
    pairs = ldpstream.Mechanism.grr(epsilon=3.0, domain=6)
    independent = pairs.randomize([u * 3 + v for u in range(2) for v in range(3)] * 500)
    assert ldpstream.independence(independent, pairs, rows=2, cols=3)["reject"] is False
    a = m.randomize([0] * 2000, insecure_seed=1)
    b = m.randomize([3] * 2000, insecure_seed=2)
    assert ldpstream.two_sample(a, b, m)["reject"] is True
    (grr_row, *_) = ldpstream.plan(16, 1.0, "paninski:0.2", power=0.8)
    assert grr_row["mechanism"] == "GenRR" and grr_row["n"] > 1000


def test_sketches_and_jobs_pickle(grr_files):
    import pickle

    job = ldpstream.Job(grr_config(grr_files[0].parent))
    sk = job.fold(pq.read_table(grr_files[0]))
    again = pickle.loads(pickle.dumps(sk))
    assert again.to_bytes() == sk.to_bytes()
    assert pickle.loads(pickle.dumps(job)).streams == ["s"]


def test_every_mechanism_kind_has_a_spark_and_ray_layout_and_a_test_case():
    # Issue 43 (spark_newmech): the partitioned runners knew some kinds by name only, so
    # new kinds went uncast. The kinds come from the config's own list.
    from cli_reference import KIND_CASES
    from ldpstream._ldpstream import _mechanism_kinds
    from ldpstream._partitioned import _LAYOUT

    kinds = set(_mechanism_kinds())
    assert {"grr", "oue", "subset", "olh", "raw"} <= kinds
    assert set(_LAYOUT) == kinds, set(_LAYOUT) ^ kinds
    assert set(KIND_CASES) == kinds, set(KIND_CASES) ^ kinds


def test_a_kind_without_a_layout_is_refused_by_the_partitioned_runners():
    from ldpstream._partitioned import stream_columns

    tree = {"stream": [{"name": "s", "mechanism": {"kind": "new_kind", "domain": 4}}]}
    with pytest.raises(ValueError, match="'new_kind' has no column layout"):
        stream_columns(tree, None)


def test_one_liners_take_numpy_lists_series_and_chunked_arrays():
    # Issue 43 (py_misc): a numpy array or a list raised TypeError and a polars Series
    # "C Data interface error"; they are the first thing a data scientist passes.
    np = pytest.importorskip("numpy")
    polars = pytest.importorskip("polars")
    pd = pytest.importorskip("pandas")
    m = ldpstream.Mechanism.grr(epsilon=1.0, domain=4)
    reports = m.randomize([0, 1, 2, 3] * 250 + [0] * 200, insecure_seed=3)
    expected = ldpstream.gof(reports, m)
    values = reports.to_pylist()
    for label, data in {
        "numpy int64": np.array(values, dtype=np.int64),
        "list": values,
        "polars Series": polars.Series("r", values),
        "ChunkedArray": pa.chunked_array([reports.slice(0, 500), reports.slice(500)]),
        "pandas Series": pd.Series(values),
    }.items():
        got = ldpstream.gof(data, m)
        assert (got["n"], got["statistic"], got["p_value"]) == (
            expected["n"], expected["statistic"], expected["p_value"]), label
    assert ldpstream.estimate(np.array(values), m)["n"] == 1200
    with pytest.raises(ldpstream.InputError, match="column \"report\" has type Float64"):
        ldpstream.gof(np.array([0.5, 1.5]), m)
    with pytest.raises(ldpstream.InputError, match="outside 0 to 2"):
        ldpstream.gof(np.array([-1, 2]), m)
    with pytest.raises(ldpstream.InputError):
        ldpstream.gof(object(), m)


def test_the_exception_hierarchy_keeps_value_error_and_runtime_error():
    import pickle

    from ldpstream import exceptions as ex

    for cls in (ex.ConfigError, ex.InputError, ex.BudgetError, ex.MechanismMismatchError):
        assert issubclass(cls, ex.LdpError) and issubclass(cls, ValueError), cls
    assert issubclass(ex.InternalError, ex.LdpError) and issubclass(ex.InternalError, RuntimeError)
    assert ldpstream.LdpError is ex.LdpError
    error = pickle.loads(pickle.dumps(ex.BudgetError("spent")))
    assert type(error) is ex.BudgetError and str(error) == "spent"
    # Each kind of fault raises its class, and `except ValueError` still catches it.
    with pytest.raises(ex.ConfigError):
        ldpstream.Mechanism.grr(epsilon=-1.0, domain=4)
    with pytest.raises(ex.ConfigError):
        ldpstream.Job("[[stream]]\nname = 1\n")
    with pytest.raises(ex.InputError):
        ldpstream.Sketches.from_bytes(b"PAR1")
    stream = {"name": "s", "source": {"kind": "parquet", "paths": ["x"]},
              "mechanism": {"kind": "grr", "epsilon": 1.0, "domain": 4},
              "test": [{"name": "g", "kind": "gof", "null": "uniform"}]}
    sk = ldpstream.Job({"stream": [stream]}).fold(pa.table({"report": pa.array([1, 2], pa.uint32())}))
    other = dict(stream, mechanism={"kind": "grr", "epsilon": 2.0, "domain": 4})
    with pytest.raises(ex.MechanismMismatchError, match="epsilon changed from 1 to 2"):
        ldpstream.Job({"stream": [other]}).evaluate(sk)
    with pytest.raises(ValueError):
        sk.merge(sk)
    with pytest.raises(ex.InputError, match="twice"):
        sk.merge(sk)
