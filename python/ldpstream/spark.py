"""Batch jobs on Spark: each partition is folded on its executor into integer sketches
(`mapInArrow`), the sketches are merged exactly on the driver, and the tests run once.

The records equal those of `ldpstream batch` over the same Parquet files: sketches are
integer counts, so folding in partitions and merging gives the same sketches bit for bit
(README, `batch --emit-sketches` and `merge`).

Examples
--------
>>> from pyspark.sql import SparkSession
>>> import ldpstream.spark
>>> spark = SparkSession.builder.master("local[2]").getOrCreate()  # doctest: +SKIP
>>> df = spark.read.parquet("reports/*.parquet")  # doctest: +SKIP
>>> table = ldpstream.spark.run(df, "job.toml")  # doctest: +SKIP
>>> table.to_pylist()[0]["p_value"]  # doctest: +SKIP
>>> ldpstream.spark.run_dataframe(df, "job.toml").show()  # doctest: +SKIP

Every executor needs the `ldpstream` wheel installed (docs/SPARK_RAY.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterator, Optional

import pyarrow as pa

from ldpstream._partitioned import (
    FOLD_SCHEMA,
    ConfigLike,
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
    from pyspark.sql import DataFrame, SparkSession

    from ldpstream import Sketches

__all__ = ["fold", "run", "run_dataframe", "to_spark"]

_FOLD_DDL = "partition long, sketches binary, reports long, fold_seconds double, serialize_seconds double"


def fold(
    df: "DataFrame",
    config: ConfigLike,
    *,
    stream: Optional[str] = None,
    ledger: Optional[str] = None,
    input_id: str = "spark",
    metrics: Optional[Dict[str, Any]] = None,
) -> "Sketches":
    """Folds `df` into one stream's sketches: one task per partition, merged exactly.

    Parameters
    ----------
    df
        A Spark DataFrame with the stream's columns (docs/user-guide.md, "Input schema"). Spark's own
        types for them are cast back per batch, for every mechanism kind: Int64 to UInt32
        (or Int8), Binary to FixedSizeBinary, List to FixedSizeList, List(Int64) to
        List(UInt32). An error of a worker (a report of the wrong size, say) is raised
        on the driver as the worker's ldpstream exception (a ValueError).
    config
        As for `ldpstream.Job`: TOML text, a path to a TOML file, or a dict. It is checked
        on the driver; the executors get the checked text (the path need not exist there).
    stream
        The stream the rows feed; required only when the config has more than one.
    ledger
        As for `ldpstream.Job`: the privacy ledger of curator-model streams. Folding spends
        nothing; `run` spends when it evaluates.
    input_id
        A name for this input. Partition p's chunk k gets the identity
        ``<input_id>/partition-<p>/<k>:sha256:<digest of its reports>``: the same
        partition folded again has the same identity, so `Sketches.merge` and
        `ldpstream merge` refuse counting it twice, while two partitions never collide,
        even when they hold the same reports. The privacy ledger does not go by these
        names: for a stream with `budget_epsilon` it knows the input by the multiset
        digest of its rows, so the same rows repartitioned, or run through `Job.run` or
        `ldpstream.ray`, are the same input (docs/SPARK_RAY.md, "What the ledger counts
        as the same input").
    metrics
        When given, filled with the partitions, reports, sketch bytes and the seconds the
        executors spent folding and serializing, and the driver merging.

    Returns
    -------
    ldpstream.Sketches
        Their `to_bytes()` is a sketch file that `ldpstream merge` takes.
    """
    from ldpstream import Job

    return _fold(Job(config, ledger=ledger), df, config, stream, input_id, metrics)


def _fold(
    job: Any,
    df: "DataFrame",
    config: ConfigLike,
    stream: Optional[str],
    input_id: str,
    metrics: Optional[Dict[str, Any]],
) -> "Sketches":
    columns = stream_columns(config_tree(job), stream)
    selected = df.select(*select_present(columns, df.columns))
    check_schema(job, columns, _arrow_schema(selected))

    def fold_spark_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        # `job` reaches the executor pickled: its checked TOML text and ledger path.
        identity = f"{input_id}/partition-{partition}"
        folded = fold_partition(job, columns, batches, identity)
        if folded is not None:
            yield fold_record(partition, folded)

    out = selected.mapInArrow(fold_spark_partition, _FOLD_DDL)
    try:
        table = _collect(out)
    except Exception as e:  # noqa: BLE001 - only a worker's ValueError is re-raised as one
        error = worker_error(e)
        if error is e:
            raise
        raise error from e
    return merge_partitions(job, columns, table, lambda: _arrow_schema(selected), input_id, metrics)


def run(
    df: "DataFrame",
    config: ConfigLike,
    *,
    stream: Optional[str] = None,
    ledger: Optional[str] = None,
    input_id: str = "spark",
    metrics: Optional[Dict[str, Any]] = None,
    insecure_seed: Optional[int] = None,
) -> pa.Table:
    """The whole batch job on Spark: `fold`, then `Job.evaluate` once on the driver.

    Returns the records as a pyarrow Table with the columns of `ldpstream batch`'s
    Parquet output; ``.to_pylist()`` gives its JSON records. Parameters as for `fold`;
    `insecure_seed` as for `Job.evaluate` (curator-model noise, for tests only).

    Examples
    --------
    >>> table = ldpstream.spark.run(spark.read.parquet("data/"), "job.toml")  # doctest: +SKIP
    >>> [r["reject"] for r in table.to_pylist()]  # doctest: +SKIP
    """
    import time

    from ldpstream import Job

    job = Job(config, ledger=ledger)
    sketches = _fold(job, df, config, stream, input_id, metrics)
    start = time.perf_counter()
    table = job.evaluate(sketches, insecure_seed=insecure_seed)
    if metrics is not None:
        metrics["evaluate_seconds"] = time.perf_counter() - start
    return table


def run_dataframe(
    df: "DataFrame",
    config: ConfigLike,
    **kwargs: Any,
) -> "DataFrame":
    """`run`, with the records as a Spark DataFrame in `df`'s session.

    Keyword arguments as for `run`. Column types as in `to_spark`.
    """
    return to_spark(run(df, config, **kwargs), df.sparkSession)


def to_spark(table: pa.Table, spark: Optional["SparkSession"] = None) -> "DataFrame":
    """A records table (from `run` or `Job.evaluate`) as a Spark DataFrame.

    Spark has no unsigned integers: UInt8, UInt16 and UInt32 columns widen to the next
    signed type, and UInt64 columns (counts, never near 2^63) become Int64, checked.
    """
    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.getOrCreate()
    return spark.createDataFrame(_signed(table))


def _signed(table: pa.Table) -> pa.Table:
    schema = pa.schema([f.with_type(_signed_type(f.type)) for f in table.schema])
    return table.cast(schema) if schema != table.schema else table


def _signed_type(t: pa.DataType) -> pa.DataType:
    wider = {
        pa.uint8(): pa.int16(),
        pa.uint16(): pa.int32(),
        pa.uint32(): pa.int64(),
        pa.uint64(): pa.int64(),
    }
    if t in wider:
        return wider[t]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(t.value_field.with_type(_signed_type(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(_signed_type(t.key_type), _signed_type(t.item_type))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_signed_type(f.type)) for f in t])
    return t


def _collect(out: "DataFrame") -> pa.Table:
    if hasattr(out, "toArrow"):  # Spark >= 4.0
        return out.toArrow().cast(FOLD_SCHEMA)
    rows = out.collect()
    return pa.Table.from_pylist([r.asDict() for r in rows], schema=FOLD_SCHEMA)


def _arrow_schema(df: "DataFrame") -> pa.Schema:
    if hasattr(df, "toArrow"):  # Spark >= 4.0
        return df.limit(0).toArrow().schema
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(df.schema)
