"""What `ldpstream.spark` and `ldpstream.ray` share: one stream's columns read from the
config, the cast of an engine's batches back to the report schema, and the fold of one
partition into serialized sketches with an input identity of its own.

Spark and Ray hand a worker Arrow batches in their own types: Spark has no unsigned
integers (a Parquet UInt32 column arrives as Int64, a List(UInt32) as List(Int64)) and no
fixed-size binary or list (bit-flip reports arrive as Binary, noise vectors as List).
`Job.fold` refuses any type but the report schema's (docs/user-guide.md, "Input schema"),
as `ldpstream batch` refuses such a Parquet file, so each batch is cast back here, column
by column, before it is folded. `_LAYOUT` says how for every mechanism kind; a kind
missing from it is refused, so a new mechanism cannot silently go uncast (the tests check
it against the kinds the native module lists).
"""

from __future__ import annotations

import hashlib
import os  # noqa: F401 - ConfigLike names os.PathLike
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Union

import pyarrow as pa
import pyarrow.compute as pc

# The reports of a partition are folded this many Arrow bytes at a time, so a worker holds
# one chunk, not its whole partition (Spark sizes partitions by compressed Parquet bytes;
# 50M dictionary-encoded GenRR reports are 25 MB on disk and 400 MB as Int64).
CHUNK_BYTES = 256 << 20

_U32_MAX = 2**32 - 1

ConfigLike = Union[str, "os.PathLike[str]", Dict[str, Any]]


@dataclass(frozen=True)
class StreamColumns:
    """The columns one stream reads, and the Arrow type each must be folded as."""

    stream: str
    kind: str
    report: str
    # Hadamard's `row`, the cohort mechanism's `cohort` or OLH's `seed` column (UInt32),
    # else None.
    index: Optional[str]
    # group_by columns, then two-sample `by` columns not among them.
    labels: Tuple[str, ...]
    ts: str
    domain: int

    def names(self) -> List[str]:
        extra = [self.index] if self.index else []
        return [self.report, *extra, *self.labels, self.ts]


def config_tree(job: Any) -> Dict[str, Any]:
    """The checked config of `job` (an `ldpstream.Job`) as a dict, for the column names
    only: the text `Job` read its argument into (a dict, TOML text or a path, by its own
    rule), so the two cannot read one argument differently."""
    return _parse_toml(job._config_text)


def _parse_toml(text: str) -> Dict[str, Any]:
    try:
        import tomllib  # Python >= 3.11
    except ImportError:  # pragma: no cover - Python 3.9 and 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib.loads(text)


def stream_columns(tree: Dict[str, Any], stream: Optional[str]) -> StreamColumns:
    """The columns of `stream` (None: the config's only stream) in a config that `Job`
    has already checked, so only what the partitioned fold needs is read here."""
    streams = tree.get("stream", [])
    if stream is None:
        if len(streams) != 1:
            names = ", ".join(repr(s.get("name")) for s in streams)
            raise ValueError(f"the config has {len(streams)} streams ({names}): pass stream=")
        table = streams[0]
    else:
        found = [s for s in streams if s.get("name") == stream]
        if not found:
            names = ", ".join(repr(s.get("name")) for s in streams)
            raise ValueError(f"stream {stream!r} is not in the config (it has {names})")
        table = found[0]
    name = table["name"]
    mechanism = table["mechanism"]
    kind = mechanism["kind"]
    columns = table.get("columns", {})
    _refuse_row_order_tests(name, table.get("test", []))
    labels = list(columns.get("group_by", []))
    for test in table.get("test", []):
        by = test.get("by")
        if by is not None and by not in labels:
            labels.append(by)
    if kind not in _LAYOUT:
        raise ValueError(
            f"stream {name!r}: mechanism kind {kind!r} has no column layout in "
            "ldpstream._partitioned (_LAYOUT), so its reports cannot be cast back from "
            "Spark's or Ray's types; please report it"
        )
    index_key = _LAYOUT[kind][1]
    index = columns.get(index_key, index_key) if index_key else None
    domain = len(mechanism["matrix"][0]) if kind == "matrix" else int(mechanism.get("domain", 0))
    return StreamColumns(
        stream=name,
        kind=kind,
        report=columns.get("report", "report"),
        index=index,
        labels=tuple(labels),
        ts=columns.get("ts", "ts"),
        domain=domain,
    )


def _refuse_row_order_tests(stream: str, tests: Iterable[Dict[str, Any]]) -> None:
    # SubsampleAndAggregate's blocks are consecutive reports in the input's order (config
    # README, `block_size`). A partition does not know how many rows precede it, so its
    # blocks would be numbered from 0 again and merge into the wrong block.
    for test in tests:
        if "block_size" in test:
            raise ValueError(
                f"stream {stream!r} test {test.get('name')!r} sets block_size: its blocks "
                "are consecutive reports in input order, which a partitioned engine does "
                "not keep; run it with `ldpstream batch` or Job.run on the whole input"
            )


def select_present(columns: StreamColumns, available: Iterable[str]) -> List[str]:
    """The stream's columns among `available`, in the engine's order. A missing report
    column is left for `Job.fold` to refuse, naming it."""
    have = list(available)
    return [c for c in columns.names() if c in have]


def coerce(batch: pa.RecordBatch, columns: StreamColumns) -> pa.RecordBatch:
    """`batch` with the stream's columns cast back to the report schema. Integer values
    a UInt32 column cannot hold become u32::MAX, which every mechanism rejects per report
    (out_of_domain, row_out_of_range, cohort_out_of_range), as it does any value >= d."""
    arrays = []
    for name, array in zip(batch.schema.names, batch.columns):
        if name == columns.report:
            array = _cast_report(array, columns, name)
        elif name == columns.index:
            array = _to_u32(array)
        arrays.append(array)
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


def _cast_report(array: pa.Array, columns: StreamColumns, name: str) -> pa.Array:
    return _LAYOUT[columns.kind][0](array, columns, name)


def _category(array: pa.Array, columns: StreamColumns, name: str) -> pa.Array:
    return _to_u32(array)


def _sign(array: pa.Array, columns: StreamColumns, name: str) -> pa.Array:
    return _to_i8(array)


def _fixed_binary(array: pa.Array, columns: StreamColumns, name: str) -> pa.Array:
    width = (columns.domain + 7) // 8
    if pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type):
        return _cast_sized(array, pa.binary(width), name, f"{width}-byte")
    return array


def _fixed_list(array: pa.Array, columns: StreamColumns, name: str) -> pa.Array:
    t = array.type
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        target = pa.list_(t.value_type, columns.domain)
        return _cast_sized(array, target, name, f"{columns.domain}-coordinate")
    return array


def _u32_list(array: pa.Array, columns: StreamColumns, name: str) -> pa.Array:
    """A list of integers (Spark's `array<bigint>`) as List(UInt32), items cast as
    `_to_u32` casts them (outside UInt32: u32::MAX, which is outside the domain), null
    lists kept. Anything else is left for `Job.fold` to refuse, naming the column."""
    t = array.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
        return array
    if not pa.types.is_integer(t.value_type):
        return array
    if pa.types.is_list(t) and t.value_type == pa.uint32():
        return array
    offsets = array.offsets
    first = offsets[0].as_py()
    items = array.values.slice(first, offsets[-1].as_py() - first)
    rebased = pc.cast(pc.subtract(offsets, first), pa.int32())
    mask = array.is_null() if array.null_count else None
    return pa.ListArray.from_arrays(
        rebased, _to_u32(items), type=pa.list_(pa.uint32()), mask=mask
    )


def _to_u32(array: pa.Array) -> pa.Array:
    if not pa.types.is_integer(array.type) or array.type == pa.uint32():
        return array  # a wrong type goes through, for Job.fold's error naming the column
    try:
        return pc.cast(array, pa.uint32())
    except pa.ArrowInvalid:
        outside = pc.or_(pc.less(array, 0), pc.greater(array, _U32_MAX))
        clipped = pc.if_else(outside, pa.scalar(_U32_MAX, array.type), array)
        return pc.cast(clipped, pa.uint32())


def _to_i8(array: pa.Array) -> pa.Array:
    if not pa.types.is_integer(array.type) or array.type == pa.int8():
        return array
    # Anything but +-1 is rejected as not_plus_minus_one, so a value Int8 cannot hold may
    # become any other value that is not +-1: its own sign times 127.
    clipped = pc.max_element_wise(
        pc.min_element_wise(array, 127, skip_nulls=False), -127, skip_nulls=False
    )
    return pc.cast(clipped, pa.int8())


def _cast_sized(array: pa.Array, target: pa.DataType, name: str, what: str) -> pa.Array:
    try:
        return pc.cast(array, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        # Spark and Ray have no fixed-size type to keep a wrong-sized report in, so it
        # cannot be counted as bad_size the way `batch` counts it in a Parquet file.
        raise ValueError(
            f"column {name!r}: every report must be {what} ({target}); found {array.type} "
            f"values of another size ({e})"
        ) from None


def digest(batches: List[pa.RecordBatch]) -> str:
    """SHA-256 of the batches' buffers as folded, so the same partition folded twice has
    one identity (merge refuses it) and two partitions of other data do not."""
    h = hashlib.sha256()
    for batch in batches:
        h.update(batch.num_rows.to_bytes(8, "little"))
        for name, array in zip(batch.schema.names, batch.columns):
            h.update(name.encode())
            _hash_array(h, array)
    return "sha256:" + h.hexdigest()


def _hash_array(h: "hashlib._Hash", array: pa.Array) -> None:
    h.update(str(array.type).encode())
    h.update(len(array).to_bytes(8, "little") + array.offset.to_bytes(8, "little"))
    for buffer in array.buffers():
        if buffer is None:
            h.update(b"\x00")
        else:
            h.update(buffer.size.to_bytes(8, "little"))
            h.update(buffer)


def check_schema(job: Any, columns: StreamColumns, schema: pa.Schema) -> None:
    """Raises `Job.fold`'s ValueError (naming the column) on the driver, before any task
    starts, when the input's columns cannot be folded once cast: a zero-row fold."""
    empty = pa.RecordBatch.from_arrays(
        [pa.array([], type=f.type) for f in schema], names=schema.names
    )
    job.fold(pa.Table.from_batches([coerce(empty, columns)]), stream=columns.stream, input_id="schema check")


# Every mechanism kind: how its report column is cast back from Spark's and Ray's types,
# and the key of `columns` naming its index column (also its default name), if it has one.
_LAYOUT: Dict[str, Tuple[Callable[[pa.Array, StreamColumns, str], pa.Array], Optional[str]]] = {
    "grr": (_category, None),
    "matrix": (_category, None),
    "raw": (_category, None),
    "bitflip": (_fixed_binary, None),
    "oue": (_fixed_binary, None),
    "subset": (_u32_list, None),
    "gauss": (_fixed_list, None),
    "laplace": (_fixed_list, None),
    "hadamard": (_sign, "row"),
    "cohort": (_sign, "cohort"),
    "olh": (_category, "seed"),
    # The longitudinal kinds report in their composed kind's format (docs/STATISTICS.md §1.9).
    "lgrr": (_category, None),
    "losue": (_fixed_binary, None),
    "lsue": (_fixed_binary, None),
}


def worker_error(error: BaseException) -> BaseException:
    """The error a Spark or Ray worker raised, as the driver should see it: the worker's
    ldpstream exception (or ValueError) itself, found in the causes Ray wraps it in, or
    re-made from the text of a Spark `PythonException` as its class with the worker's
    message. Any other error is returned unchanged."""
    from ldpstream import exceptions

    # Ray: a RayTaskError (itself made a subclass of the cause's class) holds the worker's
    # exception in `cause`, possibly inside further wrappers.
    seen = set()
    current: Optional[BaseException] = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        wrapper = type(current).__module__.startswith("ray.")
        if current is not error and not wrapper and isinstance(current, ValueError):
            return current
        cause = getattr(current, "cause", None)
        current = cause if isinstance(cause, BaseException) else current.__cause__
    # Spark: only the text of the worker's traceback reaches the driver; so too for Ray when
    # the worker's exception did not survive as a cause (it is in the RayTaskError's text).
    from_ray = any(c.__module__.startswith("ray.") for c in type(error).__mro__)
    if type(error).__name__ != "PythonException" and not from_ray:
        return error
    matches = list(re.finditer(r"(?:ldpstream\.exceptions\.(\w+)|\bValueError): (.*)", str(error)))
    if not matches:
        return error
    last = matches[-1]
    cls = getattr(exceptions, last.group(1) or "", None)
    if not (isinstance(cls, type) and issubclass(cls, exceptions.LdpError)):
        cls = ValueError
    return cls(last.group(2).strip())


@dataclass
class PartitionFold:
    """One partition's sketches and what folding them cost the worker."""

    sketches: bytes
    reports: int
    fold_seconds: float
    serialize_seconds: float


def fold_partition(
    job: Any,
    columns: StreamColumns,
    batches: Iterator[pa.RecordBatch],
    identity: str,
    chunk_bytes: int = CHUNK_BYTES,
) -> Optional[PartitionFold]:
    """Folds one partition's batches chunk by chunk and merges the chunks' sketches.
    Chunk k's input identity is `identity/k:<digest>`. None for an empty partition."""
    merged = None
    reports = 0
    fold_seconds = 0.0
    pending: List[pa.RecordBatch] = []
    size = 0
    chunk = 0

    def flush() -> None:
        nonlocal merged, reports, fold_seconds, pending, size, chunk
        start = time.perf_counter()
        table = pa.Table.from_batches(pending)
        input_id = f"{identity}/{chunk}:{digest(pending)}"
        sketches = job.fold(table, stream=columns.stream, input_id=input_id)
        merged = sketches if merged is None else merged.merge(sketches)
        fold_seconds += time.perf_counter() - start
        reports += table.num_rows
        pending, size, chunk = [], 0, chunk + 1

    for batch in batches:
        if batch.num_rows == 0:
            continue
        batch = coerce(batch, columns)
        pending.append(batch)
        size += batch.nbytes
        if size >= chunk_bytes:
            flush()
    if pending:
        flush()
    if merged is None:
        return None
    start = time.perf_counter()
    data = merged.to_bytes()
    return PartitionFold(data, reports, fold_seconds, time.perf_counter() - start)


FOLD_SCHEMA = pa.schema(
    [
        ("partition", pa.int64()),
        ("sketches", pa.binary()),
        ("reports", pa.int64()),
        ("fold_seconds", pa.float64()),
        ("serialize_seconds", pa.float64()),
    ]
)


def fold_record(partition: int, folded: PartitionFold) -> pa.RecordBatch:
    """A worker's answer: one row per non-empty partition."""
    return pa.RecordBatch.from_pydict(
        {
            "partition": [partition],
            "sketches": [folded.sketches],
            "reports": [folded.reports],
            "fold_seconds": [folded.fold_seconds],
            "serialize_seconds": [folded.serialize_seconds],
        },
        schema=FOLD_SCHEMA,
    )


def merge_partitions(
    job: Any,
    columns: StreamColumns,
    folded: pa.Table,
    schema: Callable[[], pa.Schema],
    identity: str,
    metrics: Optional[Dict[str, Any]],
) -> Any:
    """The exact merge, on the driver, of every partition's sketches (in partition order,
    though integer sums do not depend on it). With no report in any partition, an empty
    table of the input's `schema()` is folded instead, so the records still say n = 0."""
    from ldpstream import Sketches

    start = time.perf_counter()
    folded = folded.sort_by("partition")
    merged = None
    for blob in folded.column("sketches").to_pylist():
        part = Sketches.from_bytes(blob)
        merged = part if merged is None else merged.merge(part)
    if merged is None:
        empty = pa.RecordBatch.from_arrays(
            [pa.array([], type=f.type) for f in schema()], names=schema().names
        )
        table = pa.Table.from_batches([coerce(empty, columns)])
        merged = job.fold(table, stream=columns.stream, input_id=f"{identity}/empty")
    if metrics is not None:
        metrics.update(
            partitions=folded.num_rows,
            reports=int(pc.sum(folded.column("reports")).as_py() or 0),
            fold_seconds=float(pc.sum(folded.column("fold_seconds")).as_py() or 0.0),
            serialize_seconds=float(pc.sum(folded.column("serialize_seconds")).as_py() or 0.0),
            sketch_bytes=int(pc.sum(pc.binary_length(folded.column("sketches"))).as_py() or 0),
            merge_seconds=time.perf_counter() - start,
        )
    return merged
