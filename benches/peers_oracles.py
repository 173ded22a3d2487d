"""Driver for `benches/python_bench.sh oracles` (issue 30, "Speed"): the aggregation of
the same reports by `ldpstream batch`, pure-LDP 1.2.0 and multi-freq-ldpy 0.2.5, for GRR,
OUE, k-subset selection and OLH, side by side. Every comparison is asserted before a time
is printed (a bench that computes something else fails instead):

* the peers' unbiased estimates (pure-LDP: counts, divided by n here) equal ldpstream's
  `estimate`;
* multi-freq-ldpy's MI estimates equal ldpstream's `estimate` after that library's own
  post-processing (clip at 0, renormalize);
* multi-freq-ldpy's IBU estimates, with `nb_iter` set to ldpstream's cap
  min(10,000, 2^14/d), equal ldpstream's `estimate_ibu`.

OLH: ldpstream's hash is its pinned multiply-shift pool, the peers' is xxhash. pure-LDP's
FastLHServer (a fixed pool of k seeds, like ldpstream's) takes a precomputed hash matrix,
so it is given ldpstream's pool buckets (its constructor still hashes the domain first, with
a call xxhash 4 refuses, so its module's xxhash is patched as below); multi-freq-ldpy's LH aggregators hash with `xxhash.xxh32(str(v), seed).intdigest()
% g` and the report's seed, so its module's `xxhash` is replaced by an object that returns
ldpstream's bucket of v under pool entry `seed` (the report's pool index). pure-LDP has no
subset selection.

The longitudinal kinds (issue 47), with --lgrr, --lgrr-d2, --losue and --lsue (one period
of `simulate --devices`, so one window of the period): multi-freq-ldpy's L-OSUE second
round is ldpstream's (both make one report OUE at ε1), so `L_OSUE_Aggregator_MI` runs as it
is. Its L-SUE (RAPPOR's bit flip at ε∞/2 memoized, then a symmetric bit flip per report)
is ldpstream's lsue: the same round 1, and a round 2 whose flip 1 − p2 (its closed-form
root) is ldpstream's q2 = (b−a)/((1+b)(1−a)), a = e^{−ε∞/2}, b = e^{−ε1/2}, so that one
report is bit flip at ε1; the script checks both before `L_SUE_Aggregator_MI` runs as it is.
Its L-GRR second round is the paper's, whose composition is exact only at d = 2
(docs/STATISTICS.md §1.9): `L_GRR_Aggregator_MI` is compared at d = 2, and at any d its
estimator `MI_long` is given ldpstream's round probabilities. All to 1e-12.

  peers_oracles.py --bin B --grr F --oue F --subset F --olh F --epsilon E --domain D
                   --k K --pool-size S --pool-seed P [--rounds R]
                   [--lgrr F --lgrr-d2 F --losue F --lsue F --epsilon-perm EP --epsilon-1 E1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import pyarrow.parquet as pq

# One timing rule for every bench table (this script runs from benches/, beside it).
from python_bench import timed

TOLERANCE = 1e-9
# The longitudinal aggregators are one closed form each: the issue asks for 1e-12.
LONGITUDINAL_TOLERANCE = 1e-12
MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def batch_record(binary: str, path: str, mechanism: str, window: str = ""):
    """`ldpstream batch` on one file: the whole process (start, Parquet read, fold,
    snapshot with estimate, Norm-Sub and IBU, GOF test), as a user runs it. The peers run
    no test, so it is given the fewest Monte Carlo samples alpha = 0.05 allows (OLH's
    test is always simulated; the others' are asymptotic here). `window`: the test's
    window table, if not the global window (the longitudinal kinds need one period's)."""
    fd, config = tempfile.mkstemp(suffix=".toml")
    with os.fdopen(fd, "w") as f:
        f.write(
            f'[[stream]]\nname = "b"\nsource = {{ kind = "parquet", paths = ["{path}"] }}\n'
            f"mechanism = {{ {mechanism} }}\n"
            '[[stream.test]]\nname = "t"\nkind = "gof"\nnull = "uniform"\nmc_samples = 25\n'
            + (f"window = {window}\n" if window else "")
        )

    def run():
        out = subprocess.run([binary, "batch", "--config", config], capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"ldpstream batch failed:\n{out.stderr}")
        return json.loads(out.stdout.splitlines()[0])

    return run


def splitmix64(z: int) -> int:
    z = (z + GOLDEN) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def olh_buckets(pool_seed: int, pool_size: int, g: int, d: int) -> np.ndarray:
    """ldpstream's pool (engine/src/mechanism/olh.rs): entry i is (a, b) = (next(2i) | 1,
    next(2i+1)) of SplitMix64 from the seed; h_i(v) = ((((a v + b) mod 2^64) >> 32) g) >> 32.
    The S x d matrix of buckets."""
    nxt = lambda k: splitmix64((pool_seed + k * GOLDEN) & MASK)  # noqa: E731
    out = np.empty((pool_size, d), dtype=np.int64)
    for i in range(pool_size):
        a, b = nxt(2 * i) | 1, nxt(2 * i + 1)
        out[i] = [((((a * v + b) & MASK) >> 32) * g) >> 32 for v in range(d)]
    return out


def post_process(estimate: np.ndarray) -> np.ndarray:
    """multi-freq-ldpy's MI post-processing: clip at 0, renormalize to sum 1."""
    clipped = np.clip(estimate, 0, None)
    return clipped / clipped.sum() if clipped.sum() > 0 else clipped


def pure_ldp_estimate(server, reports) -> np.ndarray:
    """pure-LDP's server over every report, from empty; it estimates counts, so divide by
    n. (`reset` leaves FastLHServer's S x g table, so that is cleared here too.)"""
    server.reset()
    if hasattr(server, "hash_counts"):
        server.hash_counts[:] = 0
    server.aggregate_all(reports)
    return server.estimate_all(range(server.d), suppress_warnings=True) / server.n


def cases(args):
    """(title, n, ldpstream mechanism TOML, file, [(peer label, call, key)])."""
    from multi_freq_ldpy.pure_frequency_oracles import GRR, LH, SS, UE
    from pure_ldp.frequency_oracles.direct_encoding import DEServer
    from pure_ldp.frequency_oracles.local_hashing import FastLHServer, fast_lh_server
    from pure_ldp.frequency_oracles.unary_encoding import UEServer

    eps, d = args.epsilon, args.domain
    # ldpstream's records cap the IBU at min(10,000, 2^14/d) iterations (serve computes one
    # per group per snapshot; engine/src/mle/ibu.rs): the peers' nb_iter is set to match.
    nb = int(min(10_000, max(1, (1 << 14) // d)))
    ident = lambda x: x  # noqa: E731  (pure-LDP's items are 1-based by default)
    grr = pq.read_table(args.grr).column("report").to_numpy().astype(np.int64)
    yield (
        f"GRR, d = {d}, ε = {eps}", len(grr), f"kind = \"grr\", epsilon = {eps}, domain = {d}", args.grr,
        [
            ("pure-LDP `DEServer`", lambda: pure_ldp_estimate(DEServer(eps, d, ident), grr), "estimate"),
            ("multi-freq-ldpy `GRR_Aggregator_MI`", lambda: GRR.GRR_Aggregator_MI(grr, d, eps), "mi"),
            ("multi-freq-ldpy `GRR_Aggregator_IBU`", lambda: GRR.GRR_Aggregator_IBU(grr, d, eps, nb), "estimate_ibu"),
        ],
    )
    bits = pq.read_table(args.oue).column("report").combine_chunks()
    width = (d + 7) // 8
    packed = np.frombuffer(bits.buffers()[1], dtype=np.uint8)[: len(bits) * width]
    oue = np.unpackbits(packed.reshape(len(bits), width), axis=1, bitorder="little")[:, :d]
    oue = oue.astype(np.float64)  # UE_Client's own report type
    yield (
        f"OUE, d = {d}, ε = {eps}", len(oue), f"kind = \"oue\", epsilon = {eps}, domain = {d}", args.oue,
        [
            ("pure-LDP `UEServer(use_oue=True)`", lambda: pure_ldp_estimate(UEServer(eps, d, True, ident), oue), "estimate"),
            ("multi-freq-ldpy `UE_Aggregator_MI(optimal=True)`", lambda: UE.UE_Aggregator_MI(oue, eps, True), "mi"),
            ("multi-freq-ldpy `UE_Aggregator_IBU(optimal=True)`", lambda: UE.UE_Aggregator_IBU(oue, d, eps, True, nb), "estimate_ibu"),
        ],
    )
    sub_k = int(max(1, np.rint(d / (np.exp(eps) + 1))))
    if sub_k != args.k:
        sys.exit(f"subset: multi-freq-ldpy fixes k = {sub_k}, the file has k = {args.k}")
    lists = pq.read_table(args.subset).column("report").combine_chunks()
    subset = lists.flatten().to_numpy().astype(np.int64).reshape(len(lists), args.k)
    yield (
        f"subset, d = {d}, k = {args.k}, ε = {eps}", len(subset),
        f"kind = \"subset\", epsilon = {eps}, domain = {d}, k = {args.k}", args.subset,
        [
            ("multi-freq-ldpy `SS_Aggregator_MI`", lambda: SS.SS_Aggregator_MI(subset, d, eps), "mi"),
            ("multi-freq-ldpy `SS_Aggregator_IBU`", lambda: SS.SS_Aggregator_IBU(subset, d, eps, nb), "estimate_ibu"),
        ],
    )
    table = pq.read_table(args.olh)
    seeds = table.column("seed").to_numpy().astype(np.int64)
    ys = table.column("report").to_numpy().astype(np.int64)
    g = int(round(np.exp(eps))) + 1
    buckets = olh_buckets(args.pool_seed, args.pool_size, g, d)
    reports = list(zip(ys.tolist(), seeds.tolist()))

    class PoolHash:
        """Stands in for the `xxhash` module in multi-freq-ldpy's LH: xxh32(str(v), seed)
        is ldpstream's bucket of v under pool entry `seed` (already < g, so `% g` keeps it)."""

        def __init__(self, text, seed):
            self.bucket = int(buckets[seed, int(text)])

        def intdigest(self):
            return self.bucket

    LH.xxhash = type("xxhash", (), {"xxh32": PoolHash})
    # Built once: its constructor hashes the whole domain with `xxh32(str(v), seed=i)`
    # before it takes the given matrix, and xxhash 4 refuses a str, so that module is
    # patched the same way (its matrix is then ours twice over).
    fast_lh_server.xxhash = LH.xxhash
    fast_lh = FastLHServer(eps, d, args.pool_size, use_olh=True, index_mapper=ident, hash_matrix=buckets)
    yield (
        f"OLH, d = {d}, ε = {eps}, g = {g}, S = {args.pool_size}", len(reports),
        f"kind = \"olh\", epsilon = {eps}, domain = {d}, pool_size = {args.pool_size}, pool_seed = {args.pool_seed}",
        args.olh,
        [
            (
                "pure-LDP `FastLHServer` (hash_matrix = ldpstream's pool)",
                lambda: pure_ldp_estimate(fast_lh, reports),
                "estimate_plain",
            ),
            ("multi-freq-ldpy `LH_Aggregator_MI` (hash patched)", lambda: LH.LH_Aggregator_MI(reports, d, eps), "mi_plain"),
            ("multi-freq-ldpy `LH_Aggregator_IBU` (hash patched)", lambda: LH.LH_Aggregator_IBU(reports, d, eps, True, nb), "estimate_ibu"),
        ],
    )


def unpack_bits(path: str, d: int) -> np.ndarray:
    """A FixedSizeBinary report column as the n x d 0/1 matrix multi-freq-ldpy's UE
    aggregators take (bits packed LSB first, as the clients pack them)."""
    bits = pq.read_table(path).column("report").combine_chunks()
    width = (d + 7) // 8
    packed = np.frombuffer(bits.buffers()[1], dtype=np.uint8)[: len(bits) * width]
    return np.unpackbits(packed.reshape(len(bits), width), axis=1, bitorder="little")[:, :d].astype(np.float64)


def lgrr_rounds(ep: float, e1: float, d: int):
    """ldpstream's L-GRR (p1, q1, p2, q2): round 1 GRR at ε∞, round 2 GenRR with
    lie2 = (d−1)(b−a)/((1−a)(1+(d−1)b)), a = e^{−ε∞}, b = e^{−ε1} (conformance/README.md)."""
    a, b = np.exp(-ep), np.exp(-e1)
    lie1 = (d - 1) * a / (1 + (d - 1) * a)
    lie2 = (d - 1) * (b - a) / ((1 - a) * (1 + (d - 1) * b))
    return 1 - lie1, lie1 / (d - 1), 1 - lie2, lie2 / (d - 1)


def lsue_rounds_agree(reports: np.ndarray, ep: float, e1: float) -> None:
    """multi-freq-ldpy's L-SUE parameters are ldpstream's lsue (docs/STATISTICS.md §1.9),
    read from the call its aggregator makes: round 1 keeps a bit w.p. p1, ldpstream's bit
    flip at ε∞/2 (flip a/(1+a), a = e^{−ε∞/2}); round 2 flips w.p. q2, ldpstream's
    (b−a)/((1+b)(1−a)), b = e^{−ε1/2}; and their composition p1·p2 + q1·q2 is bit flip's
    keep at ε1. Its p2 is a closed-form root (losing accuracy at small ε∞, §1.9), hence
    the 1e-12."""
    from multi_freq_ldpy.long_freq_est import L_SUE

    seen = []
    real = L_SUE.MI_long
    L_SUE.MI_long = lambda c, n, *rounds: seen.append(rounds) or real(c, n, *rounds)
    try:
        L_SUE.L_SUE_Aggregator_MI(reports[:2], ep, e1)
    finally:
        L_SUE.MI_long = real
    theirs = tuple(float(v) for v in seen[0])
    p1, q1, p2, q2 = theirs
    a, b = float(np.exp(-ep / 2)), float(np.exp(-e1 / 2))
    ours = (1 / (1 + a), a / (1 + a), 1 - (b - a) / ((1 + b) * (1 - a)), (b - a) / ((1 + b) * (1 - a)))
    worst = max(abs(x - y) for x, y in zip(theirs, ours))
    keep = 1 / (1 + b)
    print(f"L-SUE rounds (p1, q1, p2, q2): multi-freq-ldpy {theirs}, ldpstream {ours}: max difference {worst:.2g}; "
          f"composed keep {p1 * p2 + q1 * q2!r}, bit flip's at ε1 {keep!r}")
    if not worst <= LONGITUDINAL_TOLERANCE or abs(p1 * p2 + q1 * q2 - keep) > LONGITUDINAL_TOLERANCE:
        sys.exit("lsue: multi-freq-ldpy's L-SUE rounds are not ldpstream's")


def longitudinal_cases(args):
    """The issue-47 comparisons (see the module's docstring), when their files are given."""
    from multi_freq_ldpy.estimators.Histogram_estimator import MI_long
    from multi_freq_ldpy.long_freq_est import L_GRR, L_OSUE, L_SUE

    ep, e1, d = args.epsilon_perm, args.epsilon_1, args.domain
    table = lambda kind, dd: (  # noqa: E731
        f'kind = "{kind}", epsilon_perm = {ep}, epsilon_1 = {e1}, domain = {dd}, period = "1d"'
    )
    lgrr = pq.read_table(args.lgrr).column("report").to_numpy().astype(np.int64)
    rounds = lgrr_rounds(ep, e1, d)
    # The counts as its L_GRR_Aggregator_MI makes them, inside the timed call.
    mi = lambda: MI_long(np.bincount(lgrr, minlength=d).astype(np.float64), len(lgrr), *rounds)  # noqa: E731
    yield (
        f"L-GRR, d = {d}, ε∞ = {ep}, ε1 = {e1}", len(lgrr), table("lgrr", d), args.lgrr,
        [("multi-freq-ldpy `MI_long` (ldpstream's p1, q1, p2, q2)", mi, "mi")],
    )
    lgrr2 = pq.read_table(args.lgrr_d2).column("report").to_numpy().astype(np.int64)
    yield (
        f"L-GRR, d = 2, ε∞ = {ep}, ε1 = {e1}", len(lgrr2), table("lgrr", 2), args.lgrr_d2,
        [("multi-freq-ldpy `L_GRR_Aggregator_MI`", lambda: L_GRR.L_GRR_Aggregator_MI(lgrr2, 2, ep, e1), "mi")],
    )
    losue = unpack_bits(args.losue, d)
    yield (
        f"L-OSUE, d = {d}, ε∞ = {ep}, ε1 = {e1}", len(losue), table("losue", d), args.losue,
        [("multi-freq-ldpy `L_OSUE_Aggregator_MI`", lambda: L_OSUE.L_OSUE_Aggregator_MI(losue, ep, e1), "mi")],
    )
    lsue = unpack_bits(args.lsue, d)
    lsue_rounds_agree(lsue, ep, e1)
    yield (
        f"L-SUE, d = {d}, ε∞ = {ep}, ε1 = {e1}", len(lsue), table("lsue", d), args.lsue,
        [("multi-freq-ldpy `L_SUE_Aggregator_MI`", lambda: L_SUE.L_SUE_Aggregator_MI(lsue, ep, e1), "mi")],
    )


def main() -> None:
    a = argparse.ArgumentParser()
    for flag in ("--bin", "--grr", "--oue", "--subset", "--olh"):
        a.add_argument(flag, required=True)
    a.add_argument("--epsilon", type=float, required=True)
    a.add_argument("--domain", type=int, required=True)
    a.add_argument("--k", type=int, required=True)
    a.add_argument("--pool-size", type=int, required=True)
    a.add_argument("--pool-seed", type=int, required=True)
    a.add_argument("--rounds", type=int, default=3)
    for flag in ("--lgrr", "--lgrr-d2", "--losue", "--lsue"):
        a.add_argument(flag)
    a.add_argument("--epsilon-perm", type=float)
    a.add_argument("--epsilon-1", type=float)
    args = a.parse_args()
    all_cases = [(case, "", TOLERANCE) for case in cases(args)]
    longitudinal = (args.lgrr, args.lgrr_d2, args.losue, args.lsue, args.epsilon_perm, args.epsilon_1)
    if any(v is not None for v in longitudinal):
        if any(v is None for v in longitudinal):
            sys.exit("--lgrr, --lgrr-d2, --losue, --lsue, --epsilon-perm and --epsilon-1 go together")
        # One period of device reports: the test's window is that period.
        day = '{ kind = "tumbling", size = "1d" }'
        all_cases += [(case, day, LONGITUDINAL_TOLERANCE) for case in longitudinal_cases(args)]
    for (title, n, mechanism, path, peers), window, tolerance in all_cases:
        ours = timed(batch_record(args.bin, path, mechanism, window), args.rounds)
        record = ours[3]
        if record["n"] != n:
            sys.exit(f"{title}: batch folded {record['n']} reports, the file has {n}")
        want = {
            "estimate": np.asarray(record["estimate"]),
            "mi": post_process(np.asarray(record["estimate"])),
            "estimate_ibu": np.asarray(record["estimate_ibu"]),
        }
        # OLH (issue 44): `estimate` is the fixed pool's unbiased estimate; the peers compute
        # Wang et al.'s plain one, which records keep as `estimate_plain` for this comparison.
        if "estimate_plain" in record:
            want["estimate_plain"] = np.asarray(record["estimate_plain"])
            want["mi_plain"] = post_process(want["estimate_plain"])
        print(f"\n{title}, {n:,} reports (ldpstream `ibu_iterations` {record['ibu_iterations']}, converged {record['ibu_converged']})")
        print("| aggregator | compared with ldpstream's | max abs difference | median s | min s | max s | reports/s | time / ldpstream's |")
        print("|---|---|---|---|---|---|---|---|")
        print(f"| `ldpstream batch` (whole process) | | | {ours[0]:.4f} | {ours[1]:.4f} | {ours[2]:.4f} | {n / ours[0]:.3g} | 1 |")
        for label, call, key in peers:
            theirs = timed(call, args.rounds)
            diff = float(np.max(np.abs(np.asarray(theirs[3], dtype=np.float64) - want[key])))
            against = {
                "estimate": "`estimate`",
                "mi": "`estimate`, clipped and renormalized",
                "estimate_ibu": "`estimate_ibu`",
                "estimate_plain": "`estimate_plain`",
                "mi_plain": "`estimate_plain`, clipped and renormalized",
            }[key]
            print(
                f"| {label} | {against} | {diff:.2g} | {theirs[0]:.4f} | {theirs[1]:.4f} | {theirs[2]:.4f} | "
                f"{n / theirs[0]:.3g} | {theirs[0] / ours[0]:.1f} |"
            )
            if not diff <= tolerance:
                sys.exit(f"{title}: {label} differs from ldpstream's {key} by {diff}")


if __name__ == "__main__":
    main()
