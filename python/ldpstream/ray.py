"""Batch jobs on Ray Data: each block is folded by a Ray task into integer sketches
(`map_batches` with ``batch_format="pyarrow"``), the sketches are merged exactly on the
driver, and the tests run once.

The records equal those of `ldpstream batch` over the same Parquet files: sketches are
integer counts, so folding in blocks and merging gives the same sketches bit for bit.

Examples
--------
>>> import ray, ldpstream.ray
>>> ds = ray.data.read_parquet("reports/")  # doctest: +SKIP
>>> table = ldpstream.ray.run(ds, "job.toml")  # doctest: +SKIP
>>> table.to_pylist()[0]["p_value"]  # doctest: +SKIP

Every node needs the `ldpstream` wheel installed (docs/SPARK_RAY.md).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Dict, Optional

import pyarrow as pa

from ldpstream._partitioned import (
    FOLD_SCHEMA,
    ConfigLike,
    StreamColumns,
    check_schema,
    config_tree,
    fold_partition,
    fold_record,
    merge_partitions,
    select_present,
    stream_columns,
    worker_error,
)

if TYPE_CHECKING:  # pragma: no cover
    from ray.data import Dataset

    from ldpstream import Sketches

__all__ = ["fold", "run"]


def fold(
    dataset: "Dataset",
    config: ConfigLike,
    *,
    stream: Optional[str] = None,
    ledger: Optional[str] = None,
    input_id: str = "ray",
    metrics: Optional[Dict[str, Any]] = None,
) -> "Sketches":
    """Folds `dataset` into one stream's sketches: one task per block, merged exactly.

    Parameters
    ----------
    dataset
        A Ray Dataset with the stream's columns (docs/user-guide.md, "Input schema"); Ray keeps
        Parquet's Arrow types. Int64, Binary and List columns are cast as in
        `ldpstream.spark.fold`. A task's error is raised as the worker's ldpstream
        exception (a ValueError), not as Ray's RayTaskError.
    config, stream, ledger
        As for `ldpstream.Job` and `Job.fold`; the workers get the checked config text.
    input_id
        A name for this input. A Ray task is not told which block it folds, so chunk k
        of a block gets the identity ``<input_id>/block/<k>:sha256:<digest of its
        reports>``: the same block folded again has the same identity and
        `Sketches.merge` and `ldpstream merge` refuse counting it twice. Two blocks with
        the very same reports in the same layout are refused too (they cannot be told
        apart from one block folded twice): repartition such a dataset. The privacy
        ledger knows a budgeted stream's input by the multiset digest of its rows
        instead, whatever the blocks (docs/SPARK_RAY.md).
    metrics
        When given, filled as by `ldpstream.spark.fold`.
    """
    from ldpstream import Job

    return _fold(Job(config, ledger=ledger), dataset, config, stream, input_id, metrics)


def run(
    dataset: "Dataset",
    config: ConfigLike,
    *,
    stream: Optional[str] = None,
    ledger: Optional[str] = None,
    input_id: str = "ray",
    metrics: Optional[Dict[str, Any]] = None,
    insecure_seed: Optional[int] = None,
) -> pa.Table:
    """The whole batch job on Ray: `fold`, then `Job.evaluate` once on the driver.

    Returns the records as a pyarrow Table with the columns of `ldpstream batch`'s
    Parquet output. Parameters as for `fold`; `insecure_seed` as for `Job.evaluate`
    (curator-model noise, for tests only).
    """
    from ldpstream import Job

    job = Job(config, ledger=ledger)
    sketches = _fold(job, dataset, config, stream, input_id, metrics)
    start = time.perf_counter()
    table = job.evaluate(sketches, insecure_seed=insecure_seed)
    if metrics is not None:
        metrics["evaluate_seconds"] = time.perf_counter() - start
    return table


def _fold(
    job: Any,
    dataset: "Dataset",
    config: ConfigLike,
    stream: Optional[str],
    input_id: str,
    metrics: Optional[Dict[str, Any]],
) -> "Sketches":
    import ray

    columns = stream_columns(config_tree(job), stream)
    schema = _arrow_schema(dataset)
    present = select_present(columns, schema.names)
    selected = dataset.select_columns(present)
    check_schema(job, columns, pa.schema([schema.field(name) for name in present]))
    try:
        tables = ray.get(_fold_blocks(selected, job, columns, input_id).to_arrow_refs())
    except Exception as e:  # noqa: BLE001 - only a worker's ValueError is re-raised as one
        error = worker_error(e)
        if error is e:
            raise
        raise error from e
    folded = pa.concat_tables([t.cast(FOLD_SCHEMA) for t in tables]) if tables else FOLD_SCHEMA.empty_table()
    return merge_partitions(job, columns, folded, lambda: schema, input_id, metrics)


def _fold_blocks(selected: "Dataset", job: Any, columns: StreamColumns, input_id: str) -> "Dataset":
    return selected.map_batches(
        _fold_block,
        batch_format="pyarrow",
        batch_size=None,
        zero_copy_batch=True,
        fn_kwargs={
            # The job travels pickled: its checked TOML text and ledger path.
            "job": job,
            "columns": columns,
            "identity": f"{input_id}/block",
        },
    )


def _fold_block(
    block: pa.Table,
    *,
    job: Any,
    columns: StreamColumns,
    identity: str,
) -> pa.Table:
    folded = fold_partition(job, columns, iter(block.to_batches()), identity)
    if folded is None:
        return FOLD_SCHEMA.empty_table()
    # Ray does not say which block this is; the merge sorts by partition, and integer
    # sums do not depend on the order anyway.
    return pa.Table.from_batches([fold_record(0, folded)])


def _arrow_schema(dataset: "Dataset") -> pa.Schema:
    schema = dataset.schema()
    base = getattr(schema, "base_schema", None)
    if isinstance(base, pa.Schema):
        return base
    return pa.schema(list(zip(schema.names, schema.types)))
