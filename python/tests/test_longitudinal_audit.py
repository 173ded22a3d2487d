"""`ldpstream audit --reports` on the Python longitudinal client's own reports (issue 47,
"Privacy"; conformance/README.md, "Privacy"): `Mechanism.lgrr/losue/lsue(...).client()`
over a memo store, drawing from the real CSPRNG.

* One report of a device is the composed kind at epsilon_1, so its audit stays below
  epsilon_1 (and well above 0).
* 1,000 reports of one value by one device all come from one memo, so their statistic
  (the modal category, or the per-bit majority: `audit --device-reports`, the engine's
  audit::device) stays below epsilon_perm, where a client without memo passes it, yet
  above epsilon_1: the audit sees more than one report's worth.

A store that forgets its memos makes the client memoryless, and the second audit then
fails, as it must (`test_a_client_whose_store_forgets_fails_the_audit`).

A device is one metric of one client: a metric's memo is drawn, kept in the store and
reused exactly as a device's own, and different metrics' memos are independent draws."""

from __future__ import annotations

from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

import ldpstream
from conftest import run_cli

EPSILON_PERM, EPSILON_1, DOMAIN = 2.0, 0.5, 3
DAY = 86_400_000
FLAGS = ["--epsilon-perm", str(EPSILON_PERM), "--epsilon-1", str(EPSILON_1), "--domain", str(DOMAIN)]


def statistic(reports: list) -> int:
    """The audit's index of one device's reports: the category or the packed bits as an
    integer (byte i at bits 8i..8i+7) for one report; for more, the most frequent category
    (the smallest on a tie) or each bit set when more than half of the reports set it."""
    if len(reports) == 1:
        (r,) = reports
        return r if isinstance(r, int) else int.from_bytes(r, "little")
    if isinstance(reports[0], int):
        counts = np.bincount(np.asarray(reports), minlength=DOMAIN)
        return int(np.argmax(counts))  # the first maximum: the smallest category on a tie
    bits = np.unpackbits(np.frombuffer(b"".join(reports), dtype=np.uint8).reshape(len(reports), -1),
                         axis=1, bitorder="little")
    majority = (2 * bits.sum(axis=0) > len(reports)).astype(np.uint8)
    return int.from_bytes(np.packbits(majority, bitorder="little").tobytes(), "little")


def audit(kind: str, devices: int, reports: int, tmp_path, store: Optional[object] = None, ok: bool = True) -> dict:
    """`devices` devices per input, each reporting its value `reports` times (one report a
    day), through one client over `store`; the audit's printed lines (`ok`: whether it
    must pass)."""
    m = getattr(ldpstream.Mechanism, kind)(epsilon_perm=EPSILON_PERM, epsilon_1=EPSILON_1, domain=DOMAIN)
    client = m.client(store=store if store is not None else ldpstream.MemoryMemoStore())
    inputs, outputs = [], []
    for x in range(DOMAIN):
        for i in range(devices):
            metric = f"device-{x}-{i}"
            drawn = [client.report(metric, x, t * DAY) for t in range(reports)]
            inputs.append(x)
            outputs.append(statistic(drawn))
    pairs = tmp_path / f"{kind}-{reports}.csv"
    pacsv.write_csv(pa.table({"x": pa.array(inputs, pa.int64()), "y": pa.array(outputs, pa.int64())}), pairs,
                    pacsv.WriteOptions(include_header=False))
    # One report is the composed kind at epsilon_1 exactly: at the default 95% such a tight
    # claim fails up to 5% of runs of OS-random reports, which no seed replays.
    extra = ["--device-reports", str(reports)] if reports > 1 else ["--confidence", "0.999"]
    out = run_cli("audit", "--mechanism", kind, *FLAGS, "--reports", str(pairs), *extra, ok=ok).stdout
    lines = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.splitlines())}
    lines["bound"] = float(lines["empirical ε lower bound"].split()[0])
    lines["out"] = out
    return lines


@pytest.mark.parametrize("kind", ["lgrr", "losue", "lsue"])
def test_the_audit_of_one_report_stays_below_epsilon_1(kind, tmp_path):
    a = audit(kind, 100_000, 1, tmp_path)
    assert a["claimed privacy"] == f"ε = {EPSILON_1}", a["out"]
    print(f"{kind}, one report: lower bound {a['bound']}")
    assert 0.25 < a["bound"] <= EPSILON_1, a["out"]


@pytest.mark.parametrize("kind", ["lgrr", "losue", "lsue"])
def test_the_audit_of_a_thousand_reports_of_one_value_stays_below_epsilon_perm(kind, tmp_path):
    a = audit(kind, 300, 1_000, tmp_path)
    assert a["claimed privacy"].startswith(f"ε∞ = {EPSILON_PERM:g} (epsilon_perm"), a["out"]
    print(f"{kind}, 1,000 reports: lower bound {a['bound']}")
    assert EPSILON_1 < a["bound"] < EPSILON_PERM, a["out"]


class ForgetfulStore:
    """A store that keeps nothing: every report draws a new memo, as a client without memo."""

    def load(self, metric):
        return None

    def save(self, metric, text):
        pass


def test_a_client_whose_store_forgets_fails_the_audit(tmp_path):
    # 1,000 reports at epsilon_1 = 0.5 each, with no memo, average to the value: their mode
    # is the value almost surely, and the bound passes epsilon_perm (a VIOLATION, exit 1).
    a = audit("lgrr", 300, 1_000, tmp_path, store=ForgetfulStore(), ok=False)
    assert "VIOLATION" in a["out"] and a["bound"] > EPSILON_PERM, a["out"]
