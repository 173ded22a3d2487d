"""Grouped side-by-side cases: one data generator and one tool run per process.

    grouped_tools.py gen grr|bitflip ROWS GROUPS SEED OUT.parquet [ZIPF_S]
    grouped_tools.py run TOOL grr|bitflip IN.parquet OUT.parquet

`gen` writes a file with pyarrow's default writer (dictionary encoding, snappy, default
row groups): a string column `grp` whose segments are Zipf-popular (rank k drawn with
p ∝ k^-s, i.i.d. per row, so segments interleave at random) and named so that their
lexicographic order differs from their popularity, and a `report` column: uniform
UInt32 < 16 (GenRR, d = 16) or 8 random bytes (bit flip, d = 64).

`run` is one tool's grouped count, written to Parquet inside the timed run, as a user
would keep it: DuckDB's GROUP BY, polars' group_by, pyarrow's Acero group_by. For bit
flip each tool sums the 64 bits per group (DuckDB with get_bit, pyarrow with numpy).
"""
import sys
import time


def gen(kind, rows, groups, seed, out, s=1.0):
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, groups + 1) ** s
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    # Names by a random permutation: "seg-000123" sorts apart from rank 123.
    perm = rng.permutation(groups)
    names = pa.array([f"seg-{perm[k]:06d}" for k in range(groups)])
    writer = None
    chunk = 1 << 22
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        rank = np.searchsorted(cdf, rng.random(n), side="right").clip(0, groups - 1)
        grp = pa.DictionaryArray.from_arrays(pa.array(rank.astype(np.int32)), names)
        grp = grp.cast(pa.string())
        if kind == "grr":
            report = pa.array(rng.integers(0, 16, n, dtype=np.uint32))
        else:
            report = pa.FixedSizeBinaryArray.from_buffers(
                pa.binary(8), n, [None, pa.py_buffer(rng.bytes(8 * n))])
        table = pa.table({"grp": grp, "report": report})
        if writer is None:
            writer = pq.ParquetWriter(out, table.schema)
        writer.write_table(table)
    writer.close()
    meta = pq.ParquetFile(out).metadata
    encodings = sorted({e for rg in range(meta.num_row_groups)
                        for e in meta.row_group(rg).column(0).encodings})
    print(f"{out}: {rows} rows, {groups} groups, {meta.num_row_groups} row groups, "
          f"grp encodings {encodings}", file=sys.stderr)


def bit_sums_sql():
    # Bit j sits in byte j/8 at position j%8 (LSB first); DuckDB numbers a BIT string's
    # bits from the most significant bit of the first byte.
    return ", ".join(f"sum(get_bit(report::BIT, {8 * (j // 8) + 7 - j % 8}))::BIGINT b{j}"
                     for j in range(64))


def run(tool, kind, path, out):
    if tool == "duckdb":
        import duckdb
        if kind == "grr":
            q = f"SELECT grp, report, count(*) n FROM read_parquet('{path}') GROUP BY ALL"
        else:
            q = (f"SELECT grp, count(*) n, {bit_sums_sql()} FROM read_parquet('{path}') "
                 f"GROUP BY grp")
        duckdb.sql(f"COPY ({q}) TO '{out}' (FORMAT parquet)")
    elif tool == "polars":
        import polars as pl
        if kind != "grr":
            raise SystemExit("polars: no bit-flip case")
        pl.scan_parquet(path).group_by("grp", "report").len().sink_parquet(out)
    elif tool == "pyarrow":
        import numpy as np
        import pyarrow as pa
        import pyarrow.parquet as pq
        t = pq.read_table(path)
        if kind == "grr":
            r = t.group_by(["grp", "report"]).aggregate([("report", "count")])
        else:
            grp = t.column("grp").combine_chunks().dictionary_encode()
            idx = grp.indices.to_numpy()
            rep = t.column("report").combine_chunks()
            buf = np.frombuffer(rep.buffers()[1], dtype=np.uint8)[rep.offset * 8:(rep.offset + len(rep)) * 8]
            bits = np.unpackbits(buf.reshape(-1, 8), axis=1, bitorder="little")
            order = np.argsort(idx, kind="stable")
            sorted_idx = idx[order]
            starts = np.flatnonzero(np.r_[True, sorted_idx[1:] != sorted_idx[:-1]])
            sums = np.add.reduceat(bits[order].astype(np.int64), starts, axis=0)
            cols = {"grp": grp.dictionary.take(pa.array(sorted_idx[starts])),
                    "n": pa.array(np.diff(np.r_[starts, len(idx)]))}
            for j in range(64):
                cols[f"b{j}"] = pa.array(sums[:, j])
            r = pa.table(cols)
        pq.write_table(r, out)
    else:
        raise SystemExit(f"unknown tool {tool}")


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        kind, rows, groups, seed, out = sys.argv[2:7]
        s = float(sys.argv[7]) if len(sys.argv) > 7 else 1.0
        gen(kind, int(rows), int(groups), int(seed), out, s)
    else:
        t0 = time.perf_counter()
        run(*sys.argv[2:6])
        print(f"{time.perf_counter() - t0:.4f}", file=sys.stderr)
