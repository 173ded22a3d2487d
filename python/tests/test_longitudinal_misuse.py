"""The longitudinal client and its memo stores used carelessly (issue 47): a client shared
by threads, two clients over one Python store, a path that names no file or a directory,
a damaged file, a memo that parses but that the mechanism could not have drawn, a disk
that refuses the save, absurd numbers. Each is an exception of the package naming what is
wrong (ValueError subclasses for the user's input, OSError for the store), never a hang, a
panic or a second report in a period."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import ldpstream

DAY = 86_400_000


def lsue():
    return ldpstream.Mechanism.lsue(epsilon_perm=2.0, epsilon_1=0.5, domain=3)


def lgrr():
    return ldpstream.Mechanism.lgrr(epsilon_perm=2.0, epsilon_1=0.5, domain=3)


THREADS = textwrap.dedent(
    """
    import json, sys, threading, time
    import ldpstream

    class SlowStore:
        # A Python store: its methods run Python code, so another thread can run meanwhile.
        def __init__(self):
            self.saved = {}
        def load(self, metric):
            time.sleep(0.0005)
            return self.saved.get(metric)
        def save(self, metric, text):
            time.sleep(0.0005)
            self.saved[metric] = text

    m = ldpstream.Mechanism.lgrr(epsilon_perm=2.0, epsilon_1=0.5, domain=3)
    store = SlowStore()
    one = m.client(store=store)
    clients = [one, one] if sys.argv[1] == "one" else [m.client(store=store), m.client(store=store)]
    reported = []
    def run(client):
        for t in range(40):
            try:
                client.report("m", 1, t * 86_400_000)
                reported.append(t)
            except ValueError as e:
                # The other thread reported this period, or a later one.
                assert str(e).startswith(("same_period", "clock_went_back")), e
    threads = [threading.Thread(target=run, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"reported": sorted(reported), "reports": json.loads(store.saved["m"])["reports"]}))
    """
)


@pytest.mark.parametrize("clients", ["one", "two"])
def test_threads_reporting_through_a_python_store_neither_hang_nor_report_twice(clients):
    # One client shared by two threads used to deadlock (a thread waiting for the client's
    # lock held the GIL its holder needed to finish the store's load); two clients over
    # one store both reported in every period. In a child process, so a hang fails here.
    out = subprocess.run([sys.executable, "-c", THREADS, clients], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["reported"] == list(range(40)), "one report per period"
    assert result["reports"] == 40


def test_a_path_that_names_no_file_or_a_directory_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for path in ["", "/", f"{tmp_path}/sub/"]:
        with pytest.raises(ValueError, match="must name a file"):
            ldpstream.FileMemoStore(path)
    assert list(tmp_path.iterdir()) == [], "no lock file made"
    (tmp_path / "memo.json").mkdir()
    with pytest.raises(OSError, match="cannot read it: Is a directory"):
        ldpstream.FileMemoStore(tmp_path / "memo.json")


@pytest.mark.parametrize("content", [b"", b'{"version":1,"metrics":{"m":{"vers', b"\xff\xfe\x00garbage"],
                         ids=["empty", "truncated", "not-utf8"])
def test_a_damaged_file_is_a_value_error_and_left_as_it_was(tmp_path, content):
    path = tmp_path / "memo.json"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="does not read back"):
        ldpstream.FileMemoStore(path)
    assert path.read_bytes() == content


def memo_file(path, m, values, last_report=None):
    memo = {"version": 1, "kind": m.kind, "fingerprint": m.fingerprint, "period_ms": DAY, "values": values,
            "last_period": None, "last_report": last_report, "stopped": False, "reports": 0}
    path.write_text(json.dumps({"version": 1, "metrics": {"m": memo}}))


@pytest.mark.parametrize(
    "mechanism, values, last_report, what",
    [
        (lsue, [[1, "f8"]], None, "the memo of value 1"),  # bits 3..7 of d = 3
        (lsue, [[1, "0100"]], None, "the memo of value 1"),
        (lsue, [[7, "01"]], None, "value 7"),
        (lgrr, [[1, 9]], None, "the memo of value 1"),
        (lgrr, [], 5, "last_report"),
    ],
    ids=["padding-bits", "two-bytes", "value-outside", "category-outside", "last-report"],
)
def test_a_memo_the_mechanism_could_not_have_drawn_is_an_error_not_a_report(tmp_path, mechanism, values,
                                                                             last_report, what):
    # Before: the padding bits went out in the report, a value outside the domain counted
    # towards the cap, a category outside it was "out_of_domain" for the user's value.
    m = mechanism()
    path = tmp_path / "memo.json"
    memo_file(path, m, values, last_report)
    before = path.read_text()
    client = m.client(store=ldpstream.FileMemoStore(path))
    with pytest.raises(OSError, match=f"does not read back \\({what}"):
        client.report("m", 1, 0)
    assert path.read_text() == before
    client.reset("m")
    client.report("m", 1, 0)


def test_a_save_the_disk_refuses_names_why_and_returns_no_report(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    client = lgrr().client(store=ldpstream.FileMemoStore(sub / "memo.json"))
    client.report("m", 1, 0)
    # The directory is replaced by a file: the temporary file cannot be made.
    for f in sub.iterdir():
        f.unlink()
    sub.rmdir()
    sub.write_text("")
    with pytest.raises(OSError, match="cannot save: .*Not a directory"):
        client.report("m", 1, DAY)


@pytest.mark.parametrize(
    "call, error, name",
    [
        (lambda: lgrr().client(max_memoized_values=10**12), ValueError, "max_memoized_values"),
        (lambda: lgrr().client(max_memoized_values=-1), ValueError, "max_memoized_values"),
        (lambda: lgrr().client(max_memoized_values=0), ValueError, "max_memoized_values"),
        (lambda: lgrr().client(max_memoized_values=2.5), TypeError, "max_memoized_values"),
        (lambda: ldpstream.Mechanism.lgrr(epsilon_perm=2.0, epsilon_1=0.5, domain=2**40), ValueError, "domain"),
        (lambda: ldpstream.Mechanism.lgrr(epsilon_perm=0.4, epsilon_1=0.5, domain=3), ValueError, "epsilon_1"),
        (lambda: ldpstream.Mechanism.lgrr(epsilon_perm=2.0, epsilon_1=0.5, domain=3, period="0s"), ValueError,
         "period"),
        (lambda: lgrr().client().report("m", -1, 0), ldpstream.InputError, "value"),
        (lambda: lgrr().client().report("m", 2**40, 0), ldpstream.InputError, "value"),
        (lambda: lgrr().client().report("m", 1, 2**70), ldpstream.InputError, "ts"),
        (lambda: lgrr().client().message("m", 1, -(2**70)), ldpstream.InputError, "ts"),
        (lambda: lgrr().client().period_of(2**64), ldpstream.InputError, "ts"),
    ],
)
def test_absurd_numbers_are_refused_naming_them(call, error, name):
    # Before: pyo3's OverflowError, naming neither the parameter nor its range.
    with pytest.raises(error, match=name):
        call()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes through permissions")
def test_a_read_only_directory_is_an_os_error(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    store = ldpstream.FileMemoStore(ro / "memo.json")
    ro.chmod(0o500)
    try:
        with pytest.raises(OSError, match="cannot save"):
            lgrr().client(store=store).report("m", 1, 0)
        with pytest.raises(OSError, match="lock file"):
            ldpstream.FileMemoStore(ro / "other.json")
    finally:
        ro.chmod(0o700)
