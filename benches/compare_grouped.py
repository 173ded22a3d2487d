"""Driver for the grouped cases of benches/compare.sh: one file, every tool as its own
process writing its grouped result to a file inside the timed run, alternating tools
round by round. Afterwards, untimed: every group's n equals DuckDB's count(*), the group
sets are equal, and every tool's (group, category) counts agree (ldpstream's recovered
from its debiased estimates). Prints medians, the ratio to DuckDB, ldpstream's fold-only
seconds (its `folded` log line), peak RSS, CPU seconds (user + system), and the load
average before and after.

    compare_grouped.py --bin LDPSTREAM --kind grr|bitflip --file F.parquet --groups G
                       [--rounds R] [--no-peers] [--tools ldpstream-no-test,duckdb,...]

Tools: ldpstream (batch with a uniform GOF per group, records to a file), ldpstream-1thread,
ldpstream-no-test (the same stream without a test: fold and pane state only), duckdb,
polars (GenRR only), pyarrow. Only tools that write results are checked.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable
sys.path.insert(0, HERE)
from compare import counts_from_ldpstream  # noqa: E402


def config(path, kind, groups, tests=True):
    mech = {"grr": 'kind = "grr", epsilon = 1.0, domain = 16',
            "bitflip": 'kind = "bitflip", epsilon = 1.0, domain = 64'}[kind]
    fd, cfg = tempfile.mkstemp(suffix=".toml")
    with os.fdopen(fd, "w") as f:
        f.write(f'[[stream]]\nname = "b"\nsource = {{ kind = "parquet", paths = ["{path}"] }}\n'
                f'mechanism = {{ {mech} }}\ncolumns = {{ group_by = ["grp"] }}\n'
                f'max_groups = {max(groups, 200000)}\n')
        if tests:
            f.write('[[stream.test]]\nname = "t"\nkind = "gof"\nnull = "uniform"\n')
    return cfg


def run(cmd, env=None):
    """Wall time of the whole process, peak RSS (MiB) and CPU seconds (user + system) from
    /usr/bin/time, and stderr. On a loaded machine the wall time is mostly waiting for a
    core; the CPU time says what the run itself cost."""
    start = time.perf_counter()
    out = subprocess.run(["/usr/bin/time", "-f", "__TIME__ %M %U %S"] + cmd,
                         capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{out.stderr[-4000:]}")
    line = [l for l in out.stderr.splitlines() if l.startswith("__TIME__")][-1].split()
    return wall, int(line[1]) / 1024.0, float(line[2]) + float(line[3]), out.stderr


def fold_seconds(stderr):
    m = re.findall(r"folded.*?seconds=([0-9.e+-]+)", stderr)
    return float(m[-1]) if m else float("nan")


def ldpstream_counts(path, kind):
    """{group: (n, [count per category or per bit])} from ldpstream's records."""
    out = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if "estimate" not in r:
                continue
            out[r["group"]["grp"]] = (r["n"], counts_from_ldpstream(r, kind))
    return out


def peer_counts(path, kind):
    import pyarrow.parquet as pq
    t = pq.read_table(path).to_pydict()
    out = {}
    if kind == "grr":
        count_col = "n" if "n" in t else ("len" if "len" in t else "report_count")
        for g, rep, n in zip(t["grp"], t["report"], t[count_col]):
            total, cells = out.setdefault(g, [0, [0] * 16])
            cells[rep] += n
            out[g][0] = total + n
        return {g: (v[0], v[1]) for g, v in out.items()}
    for i, g in enumerate(t["grp"]):
        out[g] = (t["n"][i], [t[f"b{j}"][i] for j in range(64)])
    return out


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--bin", required=True)
    a.add_argument("--kind", required=True)
    a.add_argument("--file", required=True)
    a.add_argument("--groups", type=int, required=True)
    a.add_argument("--rounds", type=int, default=3)
    a.add_argument("--no-peers", action="store_true")
    a.add_argument("--tools", help="comma-separated subset of the tools to run")
    args = a.parse_args()
    path = os.path.abspath(args.file)
    cfg = config(path, args.kind, args.groups)
    # The same stream without a test: the fold and the pane state, no evaluation, no
    # records. It separates the fold from the per-group tests (a Monte Carlo p-value for
    # every group with too few reports for the χ² law).
    cfg_fold = config(path, args.kind, args.groups, tests=False)
    work = tempfile.mkdtemp()
    outs = {}
    tools = {}
    for name, extra in (("ldpstream", []), ("ldpstream-1thread", ["--threads", "1"])):
        outs[name] = os.path.join(work, f"{name}.jsonl")
        tools[name] = [args.bin, "batch", "--config", cfg, "--output", outs[name]] + extra
    tools["ldpstream-no-test"] = [args.bin, "batch", "--config", cfg_fold, "--output",
                                  os.path.join(work, "no-test.jsonl")]
    peers = [] if args.no_peers else ["duckdb", "polars", "pyarrow"]
    if args.kind != "grr" and "polars" in peers:
        peers.remove("polars")
    for name in peers:
        outs[name] = os.path.join(work, f"{name}.parquet")
        tools[name] = [PY, os.path.join(HERE, "grouped_tools.py"), "run", name, args.kind, path,
                       outs[name]]
    if args.tools:
        wanted = args.tools.split(",")
        tools = {k: v for k, v in tools.items() if k in wanted}
        peers = [p for p in peers if p in wanted]
    env = dict(os.environ, RUST_LOG="info")
    load_before = os.getloadavg()
    times = {k: [] for k in tools}
    rss = {k: [] for k in tools}
    folds = {k: [] for k in tools}
    cpus = {k: [] for k in tools}
    for _ in range(1 + args.rounds):  # the first round warms the page cache
        for name, cmd in tools.items():
            wall, mem, cpu, stderr = run(cmd, env)
            times[name].append(wall)
            cpus[name].append(cpu)
            rss[name].append(mem)
            folds[name].append(fold_seconds(stderr))
    load_after = os.getloadavg()
    # The checks, untimed, on the last round's outputs.
    results = {name: ldpstream_counts(outs[name], args.kind)
               for name in ("ldpstream", "ldpstream-1thread") if name in tools}
    for name in peers:
        results[name] = peer_counts(outs[name], args.kind)
    if not results:
        sys.exit("no tool with a result to check")
    reference_name = "duckdb" if "duckdb" in results else next(iter(results))
    reference = results[reference_name]
    for name, r in results.items():
        if set(r) != set(reference):
            sys.exit(f"{name}: {len(r)} groups, {reference_name}: {len(reference)}; "
                     f"e.g. {sorted(set(r) ^ set(reference))[:5]}")
        for g, (n, cells) in reference.items():
            if r[g][0] != n:
                sys.exit(f"{name}: group {g} has n = {r[g][0]}, {reference_name} {n}")
            if r[g][1] != cells:
                sys.exit(f"{name}: group {g} counts {r[g][1]} differ from {reference_name} {cells}")
    print(f"\n{args.kind}: {os.path.basename(path)}, {len(reference)} groups — every group's n "
          f"and counts agree across {', '.join(results)}")
    print(f"nproc {os.cpu_count()}; load average before {load_before[0]:.2f} "
          f"{load_before[1]:.2f} {load_before[2]:.2f}, after {load_after[0]:.2f} "
          f"{load_after[1]:.2f} {load_after[2]:.2f}")
    base = statistics.median(times["duckdb"][1:]) if "duckdb" in times else None
    cpu_base = statistics.median(cpus["duckdb"][1:]) if "duckdb" in cpus else None
    print(f"{'tool':20} {'median s':>9} {'min s':>7} {'max s':>7} {'÷ DuckDB':>9} "
          f"{'fold s':>7} {'peak RSS MiB':>13} {'CPU s':>7} {'CPU ÷ DuckDB':>13}")
    for name in tools:
        w = times[name][1:]
        ratio = f"{statistics.median(w) / base:9.2f}" if base else f"{'-':>9}"
        f = [x for x in folds[name][1:] if x == x]
        fold = f"{statistics.median(f):7.3f}" if f else f"{'-':>7}"
        c = statistics.median(cpus[name][1:])
        cpu_ratio = f"{c / cpu_base:13.2f}" if cpu_base else f"{'-':>13}"
        print(f"{name:20} {statistics.median(w):9.3f} {min(w):7.3f} {max(w):7.3f} {ratio} "
              f"{fold} {max(rss[name][1:]):13.1f} {c:7.3f} {cpu_ratio}")
    os.unlink(cfg)
    os.unlink(cfg_fold)


if __name__ == "__main__":
    main()
