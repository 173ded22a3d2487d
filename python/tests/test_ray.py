"""ldpstream.ray on a real Ray (ray[data] from PyPI, num_cpus=2): the records equal those
of `ldpstream batch` over the same Parquet files exactly, and the merged sketches equal
the sketch file of `batch --emit-sketches` bit for bit, for a grouped stream with windows,
an independence test and a two-sample test (GenRR and bit flip)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ray = pytest.importorskip("ray", reason="pip install -r python/requirements-spark.txt")

import ldpstream  # noqa: E402
import ldpstream.ray  # noqa: E402
from cli_reference import (  # noqa: E402
    BITFLIP_CONFIG,
    GRR_CONFIG,
    KIND_CASES,
    Reference,
    assert_same_records,
    kind_reference,
    ldpstream as cli,
    simulate,
    sketch_body,
    write_config,
)
from ldpstream._ldpstream import _mechanism_kinds  # noqa: E402
from ldpstream.exceptions import BudgetError, InputError  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("ray")
    files = simulate(root)
    refs = {}
    for kind, template in (("grr", GRR_CONFIG), ("bitflip", BITFLIP_CONFIG)):
        config = write_config(template, root, f"{kind}.toml")
        out = root / f"ref-{kind}"
        out.mkdir()
        refs[kind] = Reference(config, files[kind], out)
    return refs


def dataset(reference: Reference, blocks=None):
    ds = ray.data.read_parquet([str(f) for f in reference.files])
    return ds if blocks is None else ds.repartition(blocks)


@pytest.mark.parametrize("kind", ["grr", "bitflip"])
@pytest.mark.parametrize("blocks", [None, 5])
def test_records_and_sketches_equal_batch(cluster, data, kind, blocks):
    ref = data[kind]
    ds = dataset(ref, blocks)
    metrics: dict = {}
    sketches = ldpstream.ray.fold(ds, ref.config, metrics=metrics)
    assert sketch_body(sketches.to_bytes()) == sketch_body(ref.sketch_file)
    assert metrics["reports"] == _rows(ref)
    assert_same_records(ldpstream.ray.run(ds, str(ref.config)), ref)


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


# Issue 43 (spark_newmech): olh lost its seed column on Ray. Every kind the native module
# lists runs here, so none can be left out again. Five blocks per dataset, as slices of the
# reference's rows: several tasks' sketches are merged, without the shuffle a repartition
# costs (read_parquet and repartition are covered by the GenRR and bit-flip tests above),
# which made these 28 Ray jobs the slowest part of the Python suite.
@pytest.mark.parametrize("kind", sorted(_mechanism_kinds()))
def test_every_mechanism_kind_gives_the_records_of_batch(cluster, kind_refs, kind):
    ref = kind_refs(kind)
    table = pa.concat_tables([pq.read_table(f) for f in ref.files])
    step = -(-table.num_rows // 5)
    ds = ray.data.from_arrow([table.slice(i, step) for i in range(0, table.num_rows, step)])
    assert ds.num_blocks() >= 2, ds.num_blocks()
    sketches = ldpstream.ray.fold(ds, ref.config)
    assert sketch_body(sketches.to_bytes()) == sketch_body(ref.sketch_file)
    assert_same_records(ldpstream.ray.run(ds, ref.config), ref)


def test_a_workers_error_is_the_documented_value_error_not_ray_task_error(cluster, data):
    # A bit-flip report of the wrong width cannot be cast to FixedSizeBinary: the task's
    # ValueError (InputError) is raised as such, not wrapped in RayTaskError.
    ref = data["bitflip"]
    table = pa.table({"report": pa.array([b"\x01", b"\x01\x02"], pa.binary()), "group": ["a", "b"]})
    with pytest.raises(ValueError, match="column 'report'") as caught:
        ldpstream.ray.run(ray.data.from_arrow(table), ref.config)
    assert not type(caught.value).__module__.startswith("ray"), type(caught.value)
    long = pa.table({"report": pa.array([1], pa.uint32()), "group": ["x" * 200]})
    with pytest.raises(InputError) as caught:
        ldpstream.ray.run(ray.data.from_arrow(long), data["grr"].config)
    assert not type(caught.value).__module__.startswith("ray"), type(caught.value)


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


def test_reblocked_rows_are_the_same_input_to_the_ledger(cluster, tmp_path):
    # Issue 43 (ledger_rechunk, part 2): other blocks over the same rows, or Job.run over
    # them, are the same input to a budgeted stream's ledger: a renamed stream is refused.
    cli("simulate", "--mechanism", "raw", "--domain", "6", "--n", "6000", "--seed", "4",
        "--out", str(tmp_path / "raw.parquet"))
    config = write_config(RAW_CONFIG, tmp_path, "raw.toml")
    ledger = str(tmp_path / "ledger.json")
    ds = ray.data.read_parquet(str(tmp_path / "raw.parquet"))
    (first,) = ldpstream.ray.run(ds.repartition(3), config, ledger=ledger, insecure_seed=1).to_pylist()
    assert first["epsilon_spent"] == 1.0
    renamed = config.read_text().replace('name = "raw"', 'name = "raw2"', 1)
    with pytest.raises(BudgetError, match='same input .* "raw"'):
        ldpstream.ray.run(ds.repartition(5), renamed, ledger=ledger)
    with pytest.raises(BudgetError, match='same input .* "raw"'):
        ldpstream.Job(renamed, ledger=ledger).run(pq.read_table(tmp_path / "raw.parquet"))


def _rows(ref: Reference) -> int:
    return sum(pq.ParquetFile(f).metadata.num_rows for f in ref.files)


def test_int64_reports_from_arrow_tables(cluster, data):
    # Arrow data built elsewhere often holds Int64 reports: cast back, exactly as folded.
    ref = data["grr"]
    table = pa.table({"report": pa.array([0, 5, 7, -2, 3], pa.int64()), "group": ["a", "b", "a", "b", "a"]})
    folded = ldpstream.ray.fold(ray.data.from_arrow(table), ref.config)
    u32 = pa.array([0, 5, 7, 2**32 - 1, 3], pa.uint32())
    expected = ldpstream.Job(ref.config).fold(table.set_column(0, "report", u32))
    assert sketch_body(folded.to_bytes()) == sketch_body(expected.to_bytes())


def test_the_same_blocks_folded_twice_are_refused(cluster, data):
    # Blocks that are the same from run to run (one per file; a repartition shuffles).
    ref = data["grr"]
    ds = ray.data.from_arrow([pq.read_table(f) for f in ref.files])
    first = ldpstream.ray.fold(ds, ref.config)
    again = ldpstream.ray.fold(ds, ref.config)
    with pytest.raises(ValueError, match="twice"):
        first.merge(again)


def test_identical_blocks_are_refused_as_documented(cluster, data):
    # A task is not told its block's index, so two blocks of the same bytes look like
    # one block folded twice: refused (ldpstream.ray.fold's docstring), never counted once.
    ref = data["grr"]
    table = pa.table({"report": pa.array([1, 2, 3], pa.uint32()), "group": ["a", "b", "a"]})
    with pytest.raises(ValueError, match="twice"):
        ldpstream.ray.fold(ray.data.from_arrow([table, table]), ref.config)
