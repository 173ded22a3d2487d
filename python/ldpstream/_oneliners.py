"""The common one-liners: each builds a one-stream config and runs it with ``Job.run``,
so they are the batch job itself, with the same tests and the same records."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Union

import pyarrow as pa
import pyarrow.compute as pc

from ._ldpstream import Job, Mechanism, _plan
from .exceptions import InputError

#: The source a one-liner's config names: never read, the data comes from memory.
_IN_MEMORY = {"kind": "parquet", "paths": ["<in-memory>"]}


# Kinds whose reports are one UInt32 category per report.
_CATEGORY_KINDS = ("grr", "matrix", "raw")


def _reports_table(reports: Any, mechanism: Mechanism) -> Any:
    """``reports`` as table-like Arrow data with the canonical report columns.

    Taken as a data scientist has them: ``Mechanism.randomize``'s output, any Arrow table
    or array (pyarrow, or anything with ``__arrow_c_stream__`` or ``__arrow_c_array__``:
    a polars Series or DataFrame, a DuckDB result), a numpy array, a pandas Series or a
    list. Integer categories of another width are cast to UInt32 when every value fits;
    anything else that is not the report type is refused naming its type.
    """
    if isinstance(reports, (pa.Table, pa.RecordBatch, pa.RecordBatchReader)):
        return reports
    if isinstance(reports, pa.ChunkedArray):
        array = reports.combine_chunks()
    elif isinstance(reports, pa.Array):
        array = reports
    elif hasattr(reports, "__arrow_c_stream__"):
        chunked = pa.chunked_array(reports)
        if pa.types.is_struct(chunked.type):
            return pa.table(reports)  # a table: a polars DataFrame, a DuckDB result
        array = chunked.combine_chunks()
    else:
        # __arrow_c_array__, numpy, pandas, a list: whatever pyarrow makes an array of.
        try:
            array = pa.array(reports)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
            raise InputError(
                f"reports: cannot read a {type(reports).__name__} as an Arrow array ({e}); "
                "pass Mechanism.randomize's output, Arrow data, a numpy array or a list"
            ) from None
    if pa.types.is_struct(array.type):
        return pa.RecordBatch.from_struct_array(array)
    return pa.table({"report": _report_type(array, mechanism)})


def _report_type(array: pa.Array, mechanism: Mechanism) -> pa.Array:
    # Any other mismatch (floats, strings, another mechanism's reports) is left for
    # Job.fold, whose error names the column with both types, as `ldpstream batch` does.
    if mechanism.kind not in _CATEGORY_KINDS or not pa.types.is_integer(array.type):
        return array
    if array.type == pa.uint32():
        return array
    try:
        return pc.cast(array, pa.uint32())
    except pa.ArrowInvalid:
        raise InputError(
            f"reports: {array.type} values outside 0 to 2^32 - 1; {mechanism.kind} "
            "reports are UInt32 categories (integers from 0 to d - 1)"
        ) from None


def _run(mechanism: Mechanism, test: Dict[str, Any], data: Any,
         group_by: Optional[List[str]] = None) -> List[Dict[str, Any]]:
    stream: Dict[str, Any] = {
        "name": "reports",
        "source": dict(_IN_MEMORY),
        "mechanism": mechanism.config,
        "test": [{k: v for k, v in test.items() if v is not None}],
    }
    if group_by:
        stream["columns"] = {"group_by": group_by}
    # A one-liner's sketches are never merged, so the double-count identity is moot: naming
    # it skips hashing the whole input.
    records = Job({"stream": [stream]}).run(data, input_id="one-liner").to_pylist()
    return [r for r in records if r["final"]]


def gof(reports: Any, mechanism: Mechanism, null: Union[str, Sequence[float]] = "uniform",
        *, alpha: float = 0.05, method: Optional[str] = None,
        calibration: Optional[str] = None) -> Dict[str, Any]:
    """Goodness of fit: H0 is that the true distribution is ``null``.

    ``reports`` are the mechanism's reports: ``Mechanism.randomize``'s output, Arrow data
    with its report columns, or a column of categories as a numpy array, a polars or
    pandas Series or a list. Returns the test's record as a dict (``p_value``,
    ``reject``, ``estimate``, ``std_error``, ...), as ``ldpstream batch`` writes it.

    Example:
        >>> m = ldpstream.Mechanism.grr(epsilon=1.0, domain=4)
        >>> ldpstream.gof(m.randomize([0, 1, 2, 3] * 500), m)["reject"]  # doctest: +SKIP
        False
    """
    test = {"name": "gof", "kind": "gof", "null": null, "alpha": alpha,
            "method": method, "calibration": calibration}
    return _run(mechanism, test, _reports_table(reports, mechanism))[0]


def independence(reports: Any, mechanism: Mechanism, rows: int, cols: int, *,
                 alpha: float = 0.05, method: Optional[str] = None) -> Dict[str, Any]:
    """Independence of U and V, where each report privatizes the pair as ``u * cols + v``
    (``rows * cols`` must equal the mechanism's domain). Returns the record as a dict.

    Example:
        >>> m = ldpstream.Mechanism.grr(epsilon=2.0, domain=6)
        >>> ldpstream.independence(m.randomize(values), m, rows=2, cols=3)["p_value"]  # doctest: +SKIP
    """
    test = {"name": "independence", "kind": "independence", "rows": rows, "cols": cols,
            "alpha": alpha, "method": method}
    return _run(mechanism, test, _reports_table(reports, mechanism))[0]


def two_sample(reports_a: Any, reports_b: Any, mechanism: Mechanism, *,
               alpha: float = 0.05, method: Optional[str] = None) -> Dict[str, Any]:
    """Two-sample test: H0 is that ``reports_a`` and ``reports_b`` (reports of one
    mechanism) come from one distribution. Returns the record as a dict.

    Example:
        >>> ldpstream.two_sample(m.randomize(xs), m.randomize(ys), m)["reject"]  # doctest: +SKIP
    """
    tables = []
    for label, reports in (("a", reports_a), ("b", reports_b)):
        t = _reports_table(reports, mechanism)
        t = pa.table(t) if not isinstance(t, pa.Table) else t
        tables.append(t.append_column("sample", pa.array([label] * t.num_rows, pa.string())))
    test = {"name": "two_sample", "kind": "two_sample", "by": "sample", "a": "a", "b": "b",
            "alpha": alpha, "method": method}
    return _run(mechanism, test, pa.concat_tables(tables))[0]


def estimate(reports: Any, mechanism: Mechanism) -> Dict[str, Any]:
    """The debiased frequency estimate of every category with its standard error:
    ``{"n": ..., "estimate": [...], "std_error": [...]}`` (the estimate columns of a
    record, which do not depend on the test's null).

    Example:
        >>> ldpstream.estimate(m.randomize([0] * 900 + [1] * 100), m)["estimate"]  # doctest: +SKIP
    """
    # The estimate columns do not depend on the test, so the cheapest valid one is run: an
    # OLH or configured Monte Carlo test simulates mc_samples null tables, and 999 of them
    # took 0.9-3.3 s for an estimate that is milliseconds.
    test = {"name": "estimate", "kind": "gof", "null": "uniform", "alpha": 0.5,
            "mc_samples": 3}
    record = _run(mechanism, test, _reports_table(reports, mechanism))[0]
    return {"n": record["n"], "estimate": record["estimate"], "std_error": record["std_error"]}


def plan(domain: int, epsilon: float, alternative: Union[str, Sequence[float]], *,
         null: Union[str, Sequence[float]] = "uniform", alpha: float = 0.05,
         n: Optional[int] = None, power: Optional[float] = None) -> List[Dict[str, Any]]:
    """Power and sample size of every mechanism's test, as ``ldpstream plan`` prints them:
    one dict per mechanism with ``mechanism``, ``test``, ``df``, ``lambda`` and either
    ``power`` (at ``n`` reports) or ``n`` (reports needed for ``power``; None when no n
    reaches it, with the reason in ``note``). ``alternative`` is a distribution or
    ``"paninski:DIST"``.

    Example:
        >>> ldpstream.plan(16, 1.0, "paninski:0.2", power=0.8)[0]["n"]  # doctest: +SKIP
    """
    def text(d: Union[str, Sequence[float]]) -> str:
        return d if isinstance(d, str) else ",".join(repr(float(x)) for x in d)

    return _plan(domain, epsilon, text(alternative), text(null), alpha, n, power)
