"""One tool, one job, one process: prints the report counts as a JSON list."""
import json, sys

tool, kind, path = sys.argv[1:4]
D = {"grr": 16, "bitflip": 64}[kind]

if tool == "duckdb":
    import duckdb
    if kind == "grr":
        rows = duckdb.sql(f"SELECT report, count(*) FROM read_parquet('{path}') GROUP BY report").fetchall()
        counts = [0] * D
        for r, c in rows:
            counts[r] = c
    else:
        # Bit j sits in byte j/8 at position j%8 (LSB first); DuckDB numbers a BIT string's
        # bits from the most significant bit of the first byte.
        sums = ", ".join(f"sum(get_bit(report::BIT, {8 * (j // 8) + 7 - j % 8}))" for j in range(D))
        counts = [int(x) for x in duckdb.sql(f"SELECT {sums} FROM read_parquet('{path}')").fetchall()[0]]
elif tool == "polars":
    import polars as pl
    df = pl.scan_parquet(path).group_by("report").len().collect()
    counts = [0] * D
    for r, c in df.iter_rows():
        counts[r] = c
elif tool == "pyarrow":
    import numpy as np
    import pyarrow.parquet as pq
    f = pq.ParquetFile(path)
    counts = np.zeros(D, dtype=np.int64)
    for batch in f.iter_batches(columns=["report"], batch_size=1 << 20):
        col = batch.column(0)
        if kind == "grr":
            counts += np.bincount(col.to_numpy(), minlength=D)
        else:
            buf = np.frombuffer(col.buffers()[1], dtype=np.uint8)[col.offset * 8:(col.offset + len(col)) * 8]
            counts += np.unpackbits(buf.reshape(-1, 8), axis=1, bitorder="little").sum(axis=0, dtype=np.int64)
    counts = [int(x) for x in counts]
print(json.dumps(counts))
