"""The randomizers never repeat themselves across processes or threads (issue 43,
fork_rng): every call draws from a generator freshly seeded from the OS. rand 0.9's
thread-local generator, which they used before, is not reseeded in a forked child, so
children of a parent that had randomized replayed its draws."""

from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

import ldpstream

fork_only = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

# Two draws of 64 reports over 1000 categories agree by chance with probability ~1e-190.
M = ldpstream.Mechanism.grr(epsilon=1.0, domain=1000)


def _draw(_=None):
    return (M.randomize([7] * 64).to_pylist(), [bytes(b) for b in M.messages([3] * 8)])


def _in_child(fn):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.write(w, repr(fn()).encode())
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    out = b""
    while chunk := os.read(r, 1 << 16):
        out += chunk
    os.close(r)
    return out.decode()


@fork_only
def test_forked_children_draw_other_reports_than_their_parent():
    M.randomize([0])  # the parent draws first, as a real program does
    children = [_in_child(_draw) for _ in range(3)]
    parent = repr(_draw())
    assert len(set(children + [parent])) == 4, children


@fork_only
def test_a_fork_pool_draws_distinct_batches():
    M.randomize([0])
    with mp.get_context("fork").Pool(3) as pool:
        outs = pool.map(_draw, range(6), chunksize=1)
    assert len({repr(o) for o in outs}) == 6


def test_threads_draw_distinct_batches():
    with ThreadPoolExecutor(8) as pool:
        outs = list(pool.map(_draw, range(8)))
    assert len({repr(o) for o in outs}) == 8


LEDGER_CONFIG = """
[[stream]]
name = "raw"
source = {{ kind = "parquet", paths = ["x"] }}
mechanism = {{ kind = "raw", domain = 20 }}
budget_epsilon = 100.0
[[stream.test]]
name = "collisions"
kind = "uniformity"
epsilon = 1.0
"""


@fork_only
def test_curator_noise_differs_in_forked_children(tmp_path):
    data = pa.table({"report": pa.array([i % 20 for i in range(2000)], pa.uint32())})

    def statistic(ledger):
        job = ldpstream.Job(LEDGER_CONFIG.format(), ledger=str(ledger))
        return job.run(data).to_pylist()[0]["statistic"]

    statistic(tmp_path / "parent.json")
    children = [_in_child(lambda i=i: statistic(tmp_path / f"child-{i}.json")) for i in range(3)]
    assert len(set(children)) == 3, children


GROUPED_JOB = {
    "stream": [{
        "name": "s",
        "source": {"kind": "parquet", "paths": ["x"]},
        "mechanism": {"kind": "grr", "epsilon": 1.0, "domain": 6},
        "columns": {"group_by": ["group"]},
        "test": [{"name": "g", "kind": "gof", "null": "uniform"}],
    }]
}
GROUPED_DATA = pa.table({
    "report": pa.array([(i * 7) % 6 for i in range(60_000)], pa.uint32()),
    "group": [f"g{i % 50}" for i in range(60_000)],
})


def _grouped_records(_=None):
    return ldpstream.Job(GROUPED_JOB).run(GROUPED_DATA).to_pylist()


@fork_only
def test_jobs_in_a_fork_pool_after_the_parent_ran_one():
    # The parent's job starts the worker threads; a forked worker (multiprocessing's
    # default on Linux, PySpark's daemon) has none of them and must not wait on them.
    parent = _grouped_records()
    with mp.get_context("fork").Pool(2) as pool:
        result = pool.map_async(_grouped_records, range(4), chunksize=1)
        children = result.get(timeout=120)
    assert all(c == parent for c in children)
    assert len(parent) == 50
