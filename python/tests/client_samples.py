"""Reports from the package's real CSPRNG (`Mechanism.randomize` without a seed), laid out
for the distribution and privacy halves of the conformance suite (conformance/README.md),
as clients/js/scripts/sample.mjs lays out the JS client's:

    python client_samples.py '<mechanism JSON>' <value> <n>   -> JSON counts
    python client_samples.py '<subset JSON>' <value> <n> --items  -> per-item counts

Counts: grr, matrix: per category; hadamard, cohort: per 2·index + (report < 0); bitflip,
oue: per bit position, the number of reports with that bit set; subset: per colex index
Σ_i C(s_i, i+1) of the sorted items, or with --items per category the reports holding it;
olh: per seed·g + report (the audit's numbering of the S × g table).
engine/tests/client_distribution.rs runs it and tests the counts against the channel the
server debiases with; test_conformance.py audits `audit_index` with `ldpstream audit
--reports`."""

from __future__ import annotations

import json
import math
import sys
from typing import Any, Dict

import numpy as np
import pyarrow as pa

import ldpstream

# The audit's bins for a noise report's first coordinate (engine/src/audit.rs NOISE_BIN_EDGES).
NOISE_BIN_EDGES = np.array([-3.0, -2.0, -1.0, -0.25, 0.5, 1.25, 2.0, 3.0, 4.0])


def mechanism(table: Dict[str, Any]) -> ldpstream.Mechanism:
    """The Mechanism of a config table (a cohort seed may be a decimal string)."""
    params = dict(table)
    kind = params.pop("kind")
    for seed in ("seed", "pool_seed"):
        if seed in params:
            params[seed] = int(params[seed])
    return getattr(ldpstream.Mechanism, kind)(**params)


def draw(m: ldpstream.Mechanism, x: int, n: int) -> pa.Array:
    return m.randomize(pa.array(np.full(n, x, dtype=np.uint32)))


def _signed_index(m: ldpstream.Mechanism, reports: pa.Array) -> np.ndarray:
    index = reports.field("row" if m.kind == "hadamard" else "cohort").to_numpy()
    negative = reports.field("report").to_numpy() < 0
    return 2 * index.astype(np.int64) + negative


def _olh_cell(m: ldpstream.Mechanism, reports: pa.Array) -> np.ndarray:
    """seed·g + report, g as the config resolves it (round(e^epsilon) + 1, at most 2^16)."""
    g = m.config.get("g") or min(max(round(math.exp(m.config["epsilon"])) + 1, 2), 65536)
    seed = reports.field("seed").to_numpy().astype(np.int64)
    return seed * g + reports.field("report").to_numpy()


def _bits(m: ldpstream.Mechanism, reports: pa.Array) -> np.ndarray:
    """Each report's bits, one row per report (packed LSB first)."""
    width = (m.domain + 7) // 8
    packed = np.frombuffer(reports.buffers()[1], dtype=np.uint8)[: len(reports) * width]
    return np.unpackbits(packed.reshape(len(reports), width), axis=1, bitorder="little")[:, : m.domain]


def _colex(m: ldpstream.Mechanism, reports: pa.Array) -> np.ndarray:
    """Each subset report's colex index (engine/src/mechanism/subset_index.rs)."""
    k = len(reports[0]) if len(reports) else 0
    items = reports.flatten().to_numpy().astype(np.int64).reshape(len(reports), k)
    return sum((np.array([math.comb(int(s), i + 1) for s in range(m.domain)])[items[:, i]]
                for i in range(k)), np.zeros(len(reports), dtype=np.int64))


def counts(m: ldpstream.Mechanism, x: int, n: int, items: bool = False):
    """The histogram the distribution test reads: a dict of output index to count, or the
    per-bit counts of a unary encoding, or a subset's per-item counts."""
    reports = draw(m, x, n)
    if items:
        held = reports.flatten().to_numpy()
        return [int(c) for c in np.bincount(held, minlength=m.domain)]
    if m.kind == "subset":
        return {str(k): int(c) for k, c in enumerate(np.bincount(_colex(m, reports))) if c}
    if m.kind in ("bitflip", "oue"):
        return [int(c) for c in _bits(m, reports).sum(axis=0)]
    if m.kind == "olh":
        return {str(k): int(c) for k, c in enumerate(np.bincount(_olh_cell(m, reports))) if c}
    index = _signed_index(m, reports) if m.kind in ("hadamard", "cohort") else reports.to_numpy()
    return {str(k): int(c) for k, c in enumerate(np.bincount(index)) if c}


def audit_index(m: ldpstream.Mechanism, reports: pa.Array) -> np.ndarray:
    """Each report as the index of `ldpstream audit`'s enumeration of outputs."""
    if m.kind in ("hadamard", "cohort"):
        return _signed_index(m, reports)
    if m.kind in ("bitflip", "oue"):
        return _bits(m, reports).astype(np.int64) @ (1 << np.arange(m.domain, dtype=np.int64))
    if m.kind == "subset":
        return _colex(m, reports)
    if m.kind == "olh":
        return _olh_cell(m, reports)
    if m.kind in ("gauss", "laplace"):
        first = reports.flatten().to_numpy()[:: m.domain]
        return np.searchsorted(NOISE_BIN_EDGES, first, side="right")
    return reports.to_numpy().astype(np.int64)


if __name__ == "__main__":
    table, value, n = sys.argv[1:4]
    items = sys.argv[4:5] == ["--items"]
    print(json.dumps(counts(mechanism(json.loads(table)), int(value), int(n), items)))
