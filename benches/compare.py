"""Driver for benches/compare.sh: times whole processes with /usr/bin/time, alternating
tools round by round, checks that all tools agree on the counts, prints medians and ratios."""
import argparse, json, math, os, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable


def counts_from_ldpstream(record, kind):
    """ldpstream reports debiased estimates; invert the affine debiasing to recover the
    integer report counts (exact after rounding)."""
    n = record["n"]
    e = record["privacy"]["epsilon"]
    p = record["estimate"]
    d = len(p)
    if kind == "grr":
        rho = 1 / (d - 1 + math.exp(e))
        gamma = (math.exp(e) - 1) * rho
        return [round(n * (rho + gamma * x)) for x in p]
    h = math.exp(e / 2)
    alpha, flip = (h - 1) / (h + 1), 1 / (h + 1)
    return [round(n * (alpha * x + flip)) for x in p]


def config(path, kind):
    mech = {"grr": 'kind = "grr", epsilon = 1.0, domain = 16',
            "bitflip": 'kind = "bitflip", epsilon = 1.0, domain = 64'}[kind]
    fd, cfg = tempfile.mkstemp(suffix=".toml")
    with os.fdopen(fd, "w") as f:
        f.write(f'[[stream]]\nname = "b"\nsource = {{ kind = "parquet", paths = ["{path}"] }}\n'
                f'mechanism = {{ {mech} }}\n[[stream.test]]\nname = "t"\nkind = "gof"\nnull = "uniform"\n')
    return cfg


def run(cmd, env=None):
    """Wall time from process start to exit (perf_counter around the whole process), and
    peak RSS from /usr/bin/time."""
    start = time.perf_counter()
    out = subprocess.run(["/usr/bin/time", "-f", "__TIME__ %M"] + cmd, capture_output=True,
                         text=True, env=env)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{out.stderr}")
    line = [l for l in out.stderr.splitlines() if l.startswith("__TIME__")][-1].split()
    return wall, int(line[1]) / 1024.0, out.stdout


def tools(kind, path, binary, cfg, peers=True):
    t = {
        "ldpstream": [binary, "batch", "--config", cfg, "--output", "-"],
        "ldpstream-1thread": [binary, "batch", "--config", cfg, "--output", "-", "--threads", "1"],
        "duckdb": [PY, os.path.join(HERE, "compare_tools.py"), "duckdb", kind, path],
        "pyarrow+numpy": [PY, os.path.join(HERE, "compare_tools.py"), "pyarrow", kind, path],
    }
    if not peers:
        return {k: v for k, v in t.items() if k.startswith("ldpstream")}
    if kind == "grr":
        t["polars"] = [PY, os.path.join(HERE, "compare_tools.py"), "polars", kind, path]
    return t


def parse_counts(name, kind, stdout):
    if name.startswith("ldpstream"):
        return counts_from_ldpstream(json.loads(stdout.splitlines()[0]), kind)
    return json.loads(stdout)


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--bin"), a.add_argument("--grr"), a.add_argument("--bitflip")
    a.add_argument("--rounds", type=int, default=3)
    a.add_argument("--no-peers", action="store_true", help="time ldpstream alone")
    args = a.parse_args()
    for kind, path in (("grr", args.grr), ("bitflip", args.bitflip)):
        cfg = config(os.path.abspath(path), kind)
        ts = tools(kind, os.path.abspath(path), args.bin, cfg, not args.no_peers)
        times = {k: [] for k in ts}
        rss = {k: [] for k in ts}
        reference = None
        for _ in range(1 + args.rounds):  # the first round warms the page cache
            for name, cmd in ts.items():
                wall, mem, stdout = run(cmd)
                counts = parse_counts(name, kind, stdout)
                if reference is None:
                    reference = counts
                elif counts != reference:
                    sys.exit(f"{kind}: {name} counts differ:\n{counts}\nvs\n{reference}")
                times[name].append(wall)
                rss[name].append(mem)
        base = statistics.median(times["ldpstream"][1:])
        print(f"\n{kind}: {os.path.basename(path)} — all tools agree on the counts")
        print(f"{'tool':20} {'median s':>9} {'min s':>7} {'max s':>7} {'ratio to ldpstream':>19} {'peak RSS MiB':>13}")
        for name in ts:
            w = times[name][1:]
            print(f"{name:20} {statistics.median(w):9.3f} {min(w):7.3f} {max(w):7.3f} "
                  f"{statistics.median(w) / base:19.2f} {max(rss[name][1:]):13.1f}")
        os.unlink(cfg)


if __name__ == "__main__":
    main()
