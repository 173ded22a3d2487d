"""ldpstream.spark on a real Spark (pyspark from PyPI, local[2]): the records equal those
of `ldpstream batch` over the same Parquet files exactly, and the merged sketches equal
the sketch file of `batch --emit-sketches` bit for bit, for a grouped stream with windows,
an independence test and a two-sample test (GenRR and bit flip)."""

from __future__ import annotations

import os
import sys

import pyarrow as pa
import pytest

pyspark = pytest.importorskip("pyspark", reason="pip install -r python/requirements-spark.txt")

import ldpstream  # noqa: E402
import ldpstream.spark  # noqa: E402
from cli_reference import (  # noqa: E402
    BITFLIP_CONFIG,
    GRR_CONFIG,
    KIND_CASES,
    Reference,
    assert_same_records,
    ldpstream as cli,
    kind_reference,
    simulate,
    sketch_body,
    write_config,
)
from ldpstream._ldpstream import _mechanism_kinds  # noqa: E402
from ldpstream.exceptions import BudgetError, InputError  # noqa: E402


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    # Executors start `python3` from PATH unless told: use this interpreter, whose
    # site-packages has ldpstream.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("ldpstream-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        # Small Arrow batches: a partition arrives as many batches, as it does at scale.
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "3000")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("spark")
    files = simulate(root)
    refs = {}
    for kind, template in (("grr", GRR_CONFIG), ("bitflip", BITFLIP_CONFIG)):
        config = write_config(template, root, f"{kind}.toml")
        out = root / f"ref-{kind}"
        out.mkdir()
        refs[kind] = Reference(config, files[kind], out)
    return refs


def frame(spark, reference: Reference, partitions=None):
    df = spark.read.parquet(*[str(f) for f in reference.files])
    return df if partitions is None else df.repartition(partitions)


@pytest.mark.parametrize("kind", ["grr", "bitflip"])
@pytest.mark.parametrize("partitions", [None, 5])
def test_records_and_sketches_equal_batch(spark, data, kind, partitions):
    ref = data[kind]
    df = frame(spark, ref, partitions)
    metrics: dict = {}
    sketches = ldpstream.spark.fold(df, ref.config, metrics=metrics)
    assert sketch_body(sketches.to_bytes()) == sketch_body(ref.sketch_file)
    assert metrics["reports"] == _rows(ref)
    if partitions is not None:
        assert metrics["partitions"] == partitions
    table = ldpstream.spark.run(df, str(ref.config))
    assert_same_records(table, ref)


@pytest.fixture(scope="module")
def kind_refs(tmp_path_factory):
    root = tmp_path_factory.mktemp("kinds")
    cache = {}

    def reference(kind: str) -> Reference:
        if kind not in KIND_CASES:
            pytest.fail(f"mechanism kind {kind!r} has no KIND_CASES entry in cli_reference.py")
        if kind not in cache:
            cache[kind] = kind_reference(root, kind)
        return cache[kind]

    return reference


# Issue 43 (spark_newmech): oue, subset and olh failed on Spark (a Binary report not cast
# to FixedSizeBinary, array<bigint> read as every report bad_size, olh's seed column never
# selected). Every kind the native module lists runs here, so none can be left out again.
@pytest.mark.parametrize("kind", sorted(_mechanism_kinds()))
@pytest.mark.parametrize("partitions", [None, 5])
def test_every_mechanism_kind_gives_the_records_of_batch(spark, kind_refs, kind, partitions):
    ref = kind_refs(kind)
    df = frame(spark, ref, partitions)
    sketches = ldpstream.spark.fold(df, ref.config)
    assert sketch_body(sketches.to_bytes()) == sketch_body(ref.sketch_file)
    assert_same_records(ldpstream.spark.run(df, ref.config), ref)


def _rows(ref: Reference) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in ref.files)


def test_config_as_text_or_dict_and_empty_partitions(spark, data):
    ref = data["grr"]
    text = ref.config.read_text()
    # Two groups hashed into 6 partitions: most partitions are empty and yield nothing.
    df = frame(spark, ref).repartition(6, "group")
    assert_same_records(ldpstream.spark.run(df, text), ref)
    if sys.version_info >= (3, 11):
        import tomllib

        assert_same_records(ldpstream.spark.run(df, tomllib.loads(text)), ref)


def test_python_sketches_merge_in_the_cli(spark, data, tmp_path):
    ref = data["grr"]
    sketches = ldpstream.spark.fold(frame(spark, ref, 3), ref.config)
    path = tmp_path / "spark.ldpp"
    path.write_bytes(sketches.to_bytes())
    out = tmp_path / "merged.parquet"
    cli("merge", "--config", str(ref.config), "--input", str(path), "--output", str(out))
    import pyarrow.parquet as pq

    assert pq.read_table(out).equals(ref.table)


def test_the_same_partitions_folded_twice_are_refused(spark, data):
    ref = data["grr"]
    df = frame(spark, ref, 3)
    first = ldpstream.spark.fold(df, ref.config)
    again = ldpstream.spark.fold(df, ref.config)
    with pytest.raises(ValueError, match="twice"):
        first.merge(again)


def test_identical_partitions_are_not_a_double_count(spark, data):
    # Two DataFrames of the same rows, unioned: partitions with the very same reports,
    # which are still separate inputs and must both be counted.
    ref = data["grr"]
    rows = [(1, "a"), (2, "b"), (3, "a"), (1, "b")]
    half = spark.createDataFrame(rows, "report long, group string")  # 2 slices, local[2]
    twice = half.union(half)
    assert half.rdd.getNumPartitions() == 2 and twice.rdd.getNumPartitions() == 4
    folded = ldpstream.spark.fold(twice, ref.config)
    table = pa.table({"report": pa.array([r for r, _ in rows] * 2, pa.uint32()), "group": [g for _, g in rows] * 2})
    expected = ldpstream.Job(ref.config).fold(table)
    assert sketch_body(folded.to_bytes()) == sketch_body(expected.to_bytes())


def test_spark_types_are_cast_back_and_out_of_range_integers_rejected(spark, data):
    ref = data["grr"]
    # Int64 reports Spark-side: -1 and 2^40 are outside UInt32, so outside the domain.
    df = spark.createDataFrame(
        [(-1, "a"), (5, "a"), (2**40, "b"), (3, "b"), (None, "a")], "report long, group string"
    )
    folded = ldpstream.spark.fold(df, ref.config)
    u32max = 2**32 - 1
    same = pa.table(
        {
            "report": pa.array([u32max, 5, u32max, 3, None], pa.uint32()),
            "group": ["a", "a", "b", "b", "a"],
        }
    )
    expected = ldpstream.Job(ref.config).fold(same)
    assert sketch_body(folded.to_bytes()) == sketch_body(expected.to_bytes())
    records = ldpstream.spark.run(df, ref.config).to_pylist()
    rejected = {r["test"]: dict(r["rejected_reports"]) for r in records if r["group"] == [("group", "a")]}
    assert rejected["global"]["out_of_domain"] == 1
    assert rejected["global"]["null"] == 1


def test_wrong_types_and_missing_columns_name_the_column(spark, data):
    ref = data["grr"]
    df = spark.createDataFrame([("x", "a")], "report string, group string")
    with pytest.raises(ValueError, match="report"):
        ldpstream.spark.run(df, ref.config)
    df = spark.createDataFrame([(1, "a")], "other long, group string")
    with pytest.raises(ValueError, match="report"):
        ldpstream.spark.run(df, ref.config)


def test_blocked_tests_are_refused(spark, tmp_path):
    config = """
[[stream]]
name = "raw"
source = { kind = "parquet", paths = ["x.parquet"] }
mechanism = { kind = "raw", domain = 4 }
budget_epsilon = 10.0
[[stream.test]]
name = "blocks"
kind = "uniformity"
epsilon = 1.0
block_size = 100
"""
    df = spark.createDataFrame([(1,)], "report long")
    with pytest.raises(ValueError, match="block_size"):
        ldpstream.spark.fold(df, config, ledger=str(tmp_path / "ledger.json"))


def test_results_as_a_spark_dataframe(spark, data):
    ref = data["grr"]
    out = ldpstream.spark.run_dataframe(frame(spark, ref, 2), ref.config)
    rows = out.collect()
    assert len(rows) == ref.table.num_rows
    assert [r["p_value"] for r in rows] == ref.table.column("p_value").to_pylist()
    assert [r["n"] for r in rows] == ref.table.column("n").to_pylist()
    assert [r["estimate"] for r in rows] == ref.table.column("estimate").to_pylist()


RAW_CONFIG = """
[[stream]]
name = "raw"
source = {{ kind = "parquet", paths = ["{data}/raw.parquet"] }}
mechanism = {{ kind = "raw", domain = 6 }}
budget_epsilon = 1.5
[[stream.test]]
name = "uniform"
kind = "uniformity"
epsilon = 1.0
"""


def test_a_budgeted_stream_spends_from_the_ledger_as_batch_does(spark, tmp_path):
    # Curator model: the first run spends epsilon 1 of 1.5 and releases, the second is
    # refused, as two `batch --ledger` runs (same noise seed) release and refuse.
    import pyarrow.parquet as pq

    cli("simulate", "--mechanism", "raw", "--domain", "6", "--n", "20000", "--seed", "3",
        "--out", str(tmp_path / "raw.parquet"))
    config = write_config(RAW_CONFIG, tmp_path, "raw.toml")
    expected = []
    for run in (1, 2):
        out = tmp_path / f"cli-{run}.parquet"
        cli("batch", "--config", str(config), "--ledger", str(tmp_path / "cli-ledger.json"),
            "--insecure-seed", "7", "--output", str(out))
        expected.append(pq.read_table(out))
    df = spark.read.parquet(str(tmp_path / "raw.parquet")).repartition(3)
    for want in expected:
        got = ldpstream.spark.run(df, config, ledger=str(tmp_path / "spark-ledger.json"), insecure_seed=7)
        assert got.equals(want), (got.to_pylist(), want.to_pylist())
    released, refused = (t.to_pylist()[0] for t in expected)
    assert released["epsilon_spent"] == 1.0 and refused["refused"] is not None


def test_a_bitflip_report_of_the_wrong_size_is_a_value_error_naming_the_column(spark, data):
    # Binary has no width to keep a wrong-sized report in (batch would count bad_size):
    # the executor's error reaches the driver as a ValueError, not a Py4J error.
    ref = data["bitflip"]
    df = spark.createDataFrame([(bytearray(b"\x01"), "a"), (bytearray(b"\x01\x02"), "b")], "report binary, group string")
    with pytest.raises(ValueError, match="column 'report'"):
        ldpstream.spark.run(df, ref.config)


def test_a_workers_ldpstream_error_keeps_its_class(spark, tmp_path):
    # A group value longer than max_group_value_bytes stops the fold in the executor with
    # an InputError; the driver raises that class, with the worker's message.
    config = RAW_CONFIG.replace("budget_epsilon = 1.5", "max_group_value_bytes = 4\ncolumns = {{ group_by = [\"g\"] }}\nbudget_epsilon = 1.5")
    config = write_config(config, tmp_path, "raw.toml")
    df = spark.createDataFrame([(1, "much too long")], "report long, g string")
    with pytest.raises(InputError, match="much too long|max_group_value_bytes"):
        ldpstream.spark.fold(df, config, ledger=str(tmp_path / "ledger.json"))


def test_repartitioned_rows_are_the_same_input_to_the_ledger(spark, tmp_path):
    # Issue 43 (ledger_rechunk, part 2): the ledger knows in-memory rows by their multiset
    # digest, so a renamed stream over the same rows repartitioned, or through Job.run, is
    # refused rather than given a fresh budget.
    import pyarrow.parquet as pq

    cli("simulate", "--mechanism", "raw", "--domain", "6", "--n", "6000", "--seed", "4",
        "--out", str(tmp_path / "raw.parquet"))
    config = write_config(RAW_CONFIG, tmp_path, "raw.toml")
    ledger = str(tmp_path / "ledger.json")
    df = spark.read.parquet(str(tmp_path / "raw.parquet"))
    (first,) = ldpstream.spark.run(df.repartition(3), config, ledger=ledger, insecure_seed=1).to_pylist()
    assert first["epsilon_spent"] == 1.0
    renamed = config.read_text().replace('name = "raw"', 'name = "raw2"', 1)
    with pytest.raises(BudgetError, match='same input .* "raw"'):
        ldpstream.spark.run(df.repartition(5), renamed, ledger=ledger)
    with pytest.raises(BudgetError, match='same input .* "raw"'):
        ldpstream.Job(renamed, ledger=ledger).run(pq.read_table(tmp_path / "raw.parquet"))
