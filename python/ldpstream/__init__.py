"""ldpstream: hypothesis tests and frequency estimates on locally private reports.

The native core is the same Rust code as the ``ldpstream`` command line: the batch job's
fold, the sketch files of ``batch --emit-sketches`` and the tests. Arrow data goes in
through the Arrow PyCapsule interface (pyarrow, polars, DuckDB, pandas with Arrow dtypes)
without a copy, and results come back as ``pyarrow.Table``.

Example:
    >>> import ldpstream
    >>> m = ldpstream.Mechanism.grr(epsilon=1.0, domain=4)
    >>> reports = m.randomize([0, 1, 2, 3] * 1000)
    >>> ldpstream.gof(reports, m, null="uniform")["p_value"]  # doctest: +SKIP
"""

# The exceptions first: the native module raises them, and checks at import that they load.
from .exceptions import (
    BudgetError,
    ConfigError,
    InputError,
    InternalError,
    LdpError,
    MechanismMismatchError,
)
from ._ldpstream import (
    FileMemoStore,
    Job,
    LongitudinalClient,
    Mechanism,
    MemoryMemoStore,
    Sketches,
    __version__,
)
from ._oneliners import estimate, gof, independence, plan, two_sample

__all__ = [
    "BudgetError",
    "ConfigError",
    "FileMemoStore",
    "InputError",
    "InternalError",
    "Job",
    "LdpError",
    "LongitudinalClient",
    "Mechanism",
    "MechanismMismatchError",
    "MemoryMemoStore",
    "Sketches",
    "__version__",
    "estimate",
    "gof",
    "independence",
    "plan",
    "two_sample",
]
