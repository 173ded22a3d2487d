"""Driver for benches/python_bench.sh: the Python package against `ldpstream batch`, against
multi-freq-ldpy, and on Spark local[2]. Each section prints a Markdown table for
benches/RESULTS.md and checks results as it goes (a bench that computes something else
fails instead of reporting a time).

  python_bench.py fold  --bin B --grr FILE [--rounds R]
  python_bench.py grouped --bin B --file GROUPED_FILE [--rounds R]
  python_bench.py peers --grr FILE --bitflip FILE [--oue FILE] [--rounds R]
  python_bench.py spark --bin B --grr FILE [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import ldpstream


def gof_config(path: str, mechanism: str) -> str:
    """A one-stream GOF config over `path` (the batch runs read it; Python folds ignore it)."""
    return (
        f'[[stream]]\nname = "b"\nsource = {{ kind = "parquet", paths = ["{path}"] }}\n'
        f"mechanism = {{ {mechanism} }}\n"
        '[[stream.test]]\nname = "t"\nkind = "gof"\nnull = "uniform"\n'
    )


def write_config(text: str) -> str:
    fd, path = tempfile.mkstemp(suffix=".toml")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def timed(fn, rounds: int):
    """Median, min and max wall seconds of `rounds` calls after one warm-up call, and the
    warm-up call's result."""
    result = fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times), max(times), result


def batch_run(binary: str, config: str, path: str):
    def run():
        out = subprocess.run(
            [binary, "batch", "--config", config, "--input", path, "--output", "-"],
            capture_output=True,
            text=True,
        )
        if out.returncode != 0:
            sys.exit(f"ldpstream batch failed:\n{out.stderr}")
        return [json.loads(line) for line in out.stdout.splitlines()]

    return run


def row(name: str, n: int, t, base: float) -> str:
    median, lo, hi, _ = t
    return (
        f"| {name} | {median:.3f} | {lo:.3f} | {hi:.3f} | {n / median:.3g} | "
        f"{base / median:.2f} |"
    )


def bench_fold(args) -> None:
    """job.fold on an in-memory pyarrow Table against `ldpstream batch` on its file."""
    table = pq.read_table(args.grr, columns=["report"])
    n = table.num_rows
    config = write_config(gof_config(os.path.abspath(args.grr), 'kind = "grr", epsilon = 1.0, domain = 16'))
    job = ldpstream.Job(config)
    cli = timed(batch_run(args.bin, config, args.grr), args.rounds)
    named = timed(lambda: job.fold(table, input_id="bench"), args.rounds)
    fingerprinted = timed(lambda: job.fold(table), args.rounds)
    # The same counts: the Python fold's record equals batch's.
    record = job.evaluate(named[3]).to_pylist()[0]
    reference = cli[3][0]
    for key in ("n", "statistic", "p_value", "estimate"):
        if record[key] != reference[key]:
            sys.exit(f"fold: {key} differs: {record[key]} vs batch {reference[key]}")
    base = n / cli[0]
    print(f"\nGenRR d = 16, {n:,} reports, {table.nbytes / 2**20:.0f} MiB in memory; all agree on n, statistic, p-value, estimate")
    print("| fold | median s | min s | max s | reports/s | rate / batch |")
    print("|---|---|---|---|---|---|")
    print(row("`ldpstream batch` (whole process, Parquet file)", n, cli, cli[0]))
    print(row('`job.fold(table, input_id="bench")`', n, named, cli[0]))
    print(row("`job.fold(table)` (default identity: XXH3-128 of the columns)", n, fingerprinted, cli[0]))
    print(f"batch rate {base:.3g} reports/s")
    os.unlink(config)


def grouped_config(path: str, test: bool) -> str:
    """A GenRR d = 16 stream grouped by `grp` (the files of benches/grouped_tools.py), with a
    uniform GOF or without a test."""
    text = (
        f'[[stream]]\nname = "b"\nsource = {{ kind = "parquet", paths = ["{path}"] }}\n'
        'mechanism = { kind = "grr", epsilon = 1.0, domain = 16 }\n'
        'columns = { group_by = ["grp"] }\nmax_groups = 200000\n'
    )
    if test:
        text += '[[stream.test]]\nname = "t"\nkind = "gof"\nnull = "uniform"\n'
    return text


def bench_grouped(args) -> None:
    """job.fold on a grouped pyarrow Table (the group column as pyarrow reads it: strings)
    against `ldpstream batch` on its file, both without a test, so that the fold is timed
    and not the per-group tests; then, untimed, every group's n of the Python fold (through
    job.evaluate with a GOF) against batch's records."""
    path = os.path.abspath(args.file)
    table = pq.read_table(path, columns=["grp", "report"])
    n = table.num_rows
    fold_only = write_config(grouped_config(path, test=False))
    job = ldpstream.Job(fold_only)
    cli = timed(batch_run(args.bin, fold_only, path), args.rounds)
    named = timed(lambda: job.fold(table, input_id="bench"), args.rounds)
    as_dictionary = table.set_column(0, "grp", table.column("grp").dictionary_encode())
    dictionary = timed(lambda: job.fold(as_dictionary, input_id="bench"), args.rounds)
    with_test = write_config(grouped_config(path, test=True))
    job_test = ldpstream.Job(with_test)
    records = job_test.evaluate(job_test.fold(table, input_id="bench")).to_pylist()
    reference = batch_run(args.bin, with_test, path)()
    # A record table keeps the group as a map: (column, value) pairs.
    got = {dict(r["group"])["grp"]: r["n"] for r in records}
    want = {r["group"]["grp"]: r["n"] for r in reference}
    if got != want:
        sys.exit(f"grouped: the Python fold's n per group differs from batch's ({len(got)} vs {len(want)} groups)")
    print(f"\nGenRR d = 16, {n:,} reports in {len(want):,} groups, {table.nbytes / 2**20:.0f} MiB in memory; "
          f"every group's n agrees with batch; load {os.getloadavg()[0]:.2f}")
    print("| fold, no test | median s | min s | max s | reports/s | rate / batch |")
    print("|---|---|---|---|---|---|")
    print(row("`ldpstream batch` (whole process, Parquet file)", n, cli, cli[0]))
    print(row('`job.fold(table, input_id="bench")`, `grp` as strings', n, named, cli[0]))
    print(row('`job.fold(...)`, `grp` dictionary-encoded', n, dictionary, cli[0]))
    os.unlink(fold_only)
    os.unlink(with_test)


def peer_grr(reports: np.ndarray, k: int, epsilon: float):
    from multi_freq_ldpy.pure_frequency_oracles.GRR import GRR_Aggregator_MI

    return GRR_Aggregator_MI(reports, k, epsilon)


def peer_ue(reports: np.ndarray, epsilon: float, optimal: bool = False):
    from multi_freq_ldpy.pure_frequency_oracles.UE import UE_Aggregator_MI

    # optimal=False: symmetric unary encoding, bits kept w.p. e^(eps/2)/(e^(eps/2)+1),
    # which is ldpstream's bit flip; optimal=True is OUE (p = 1/2, q = 1/(e^eps+1)),
    # ldpstream's `oue`.
    return UE_Aggregator_MI(reports, epsilon, optimal=optimal)


def unpacked(path: str):
    """A bit-report file as ldpstream reads it and as the peer's UE_Client returns it
    (float vectors of 0s and 1s: its natural input)."""
    bits = pq.read_table(path, columns=["report"]).column("report").combine_chunks()
    packed = np.frombuffer(bits.buffers()[1], dtype=np.uint8)[: len(bits) * 8].reshape(len(bits), 8)
    return bits, np.unpackbits(packed, axis=1, bitorder="little").astype(np.float64)


def post_process(estimate: np.ndarray) -> np.ndarray:
    """multi-freq-ldpy's MI post-processing: clip at 0, renormalize to sum 1."""
    clipped = np.clip(estimate, 0, None)
    return clipped / clipped.sum() if clipped.sum() > 0 else clipped


def bench_peers(args) -> None:
    """ldpstream.estimate (one Python call) against multi-freq-ldpy's MI aggregators."""
    cases = []
    grr = pq.read_table(args.grr, columns=["report"]).column("report").combine_chunks()
    grr_np = grr.to_numpy().astype(np.int64)  # the peer takes integer reports
    cases.append(
        (
            f"GenRR, d = 16, ε = 1, {len(grr):,} reports",
            ldpstream.Mechanism.grr(epsilon=1.0, domain=16),
            grr,
            lambda: peer_grr(grr_np, 16, 1.0),
            "GRR_Aggregator_MI(reports, 16, 1.0)",
        )
    )
    bits, bits_np = unpacked(args.bitflip)
    cases.append(
        (
            f"bit flip, d = 64, ε = 1, {len(bits):,} reports",
            ldpstream.Mechanism.bitflip(epsilon=1.0, domain=64),
            bits,
            lambda: peer_ue(bits_np, 1.0),
            "UE_Aggregator_MI(reports, 1.0, optimal=False)",
        )
    )
    if args.oue:
        oue, oue_np = unpacked(args.oue)
        cases.append(
            (
                f"OUE, d = 64, ε = 1, {len(oue):,} reports",
                ldpstream.Mechanism.oue(epsilon=1.0, domain=64),
                oue,
                lambda: peer_ue(oue_np, 1.0, optimal=True),
                "UE_Aggregator_MI(reports, 1.0, optimal=True)",
            )
        )
    for title, mechanism, reports, peer, peer_call in cases:
        ours = timed(lambda: estimate_of(reports, mechanism), args.rounds)
        theirs = timed(peer, args.rounds)
        unbiased = np.asarray(ours[3])
        peer_out = np.asarray(theirs[3])
        diff_raw = float(np.max(np.abs(unbiased - peer_out)))
        diff_pp = float(np.max(np.abs(post_process(unbiased) - peer_out)))
        clipped = int(np.sum(unbiased < 0))
        print(f"\n{title}")
        print("| tool | median s | min s | max s | ratio |")
        print("|---|---|---|---|---|")
        print(f"| `ldpstream.estimate(reports, mechanism)` | {ours[0]:.4f} | {ours[1]:.4f} | {ours[2]:.4f} | 1 |")
        print(f"| multi-freq-ldpy `{peer_call}` | {theirs[0]:.3f} | {theirs[1]:.3f} | {theirs[2]:.3f} | {theirs[0] / ours[0]:.0f}× slower |")
        print(
            f"estimates: sum of ldpstream's unbiased estimate {unbiased.sum():.12f}, "
            f"categories below 0: {clipped}; max |ldpstream - peer| = {diff_raw:.3g}; after the "
            f"peer's post-processing (clip at 0, renormalize) applied to ldpstream's: {diff_pp:.3g}"
        )
        if diff_pp > 1e-12:
            sys.exit(f"{title}: the estimates differ by {diff_pp}")


def estimate_of(reports, mechanism):
    """The unbiased estimate through the package's one-liner."""
    out = ldpstream.estimate(reports, mechanism)
    if isinstance(out, pa.Table):
        return out.to_pylist()[0]["estimate"]
    if isinstance(out, dict):
        return out["estimate"]
    return out


def bench_spark(args) -> None:
    """ldpstream.spark.run over a Parquet file on Spark local[2], against `ldpstream batch`."""
    from pyspark.sql import SparkSession

    import ldpstream.spark

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("ldpstream-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(args.arrow_batch))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    path = os.path.abspath(args.grr)
    n = pq.ParquetFile(path).metadata.num_rows
    config = write_config(gof_config(path, 'kind = "grr", epsilon = 1.0, domain = 16'))
    df = spark.read.parquet(path)
    partitions = df.rdd.getNumPartitions()
    metrics: list = []

    def spark_run():
        m: dict = {}
        start = time.perf_counter()
        table = ldpstream.spark.run(df, config, metrics=m)
        m["wall"] = time.perf_counter() - start
        metrics.append(m)
        return table.to_pylist()

    cli = timed(batch_run(args.bin, config, path), args.rounds)
    sp = timed(spark_run, args.rounds)
    for key in ("n", "statistic", "p_value", "estimate"):
        if sp[3][0][key] != cli[3][0][key]:
            sys.exit(f"spark: {key} differs: {sp[3][0][key]} vs batch {cli[3][0][key]}")
    timed_metrics = metrics[1:]
    print(f"\nSpark local[2], GenRR d = 16, {n:,} reports in one Parquet file, {partitions} partitions, "
          f"Arrow batches of {args.arrow_batch:,} rows; records equal batch's")
    print("| run | median s | min s | max s | reports/s | ratio to batch |")
    print("|---|---|---|---|---|---|")
    print(f"| `ldpstream batch` | {cli[0]:.3f} | {cli[1]:.3f} | {cli[2]:.3f} | {n / cli[0]:.3g} | 1 |")
    print(f"| `ldpstream.spark.run(df, config)` | {sp[0]:.3f} | {sp[1]:.3f} | {sp[2]:.3f} | {n / sp[0]:.3g} | {sp[0] / cli[0]:.0f} |")
    print("| run | wall s | executor fold s (sum) | serialize s (sum) | driver merge s | evaluate s | sketch bytes | overhead |")
    print("|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for i, m in enumerate(timed_metrics):
        overhead = (m["serialize_seconds"] + m["merge_seconds"]) / m["wall"]
        worst = max(worst, overhead)
        print(f"| {i + 1} | {m['wall']:.2f} | {m['fold_seconds']:.2f} | {m['serialize_seconds']:.5f} | "
              f"{m['merge_seconds']:.5f} | {m['evaluate_seconds']:.4f} | {m['sketch_bytes']:,} | {100 * overhead:.3f}% |")
    print(f"worst overhead (sketch serialization + merge, over the run's wall time): {100 * worst:.3f}%")
    spark.stop()
    os.unlink(config)
    if worst >= 0.10:
        sys.exit(f"the Spark path's own overhead is {100 * worst:.1f}% (target < 10%)")


def main() -> None:
    a = argparse.ArgumentParser()
    a.add_argument("section", choices=["fold", "grouped", "peers", "spark"])
    a.add_argument("--file")
    a.add_argument("--bin")
    a.add_argument("--grr")
    a.add_argument("--bitflip")
    a.add_argument("--oue")
    a.add_argument("--rounds", type=int, default=3)
    a.add_argument("--arrow-batch", type=int, default=10_000)
    args = a.parse_args()
    {"fold": bench_fold, "grouped": bench_grouped, "peers": bench_peers,
     "spark": bench_spark}[args.section](args)


if __name__ == "__main__":
    main()
