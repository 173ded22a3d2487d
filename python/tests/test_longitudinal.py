"""The longitudinal clients (lgrr, losue, lsue; docs/clients.md): Mechanism.lgrr/losue/lsue,
their client() over the in-memory, file and Python-object memo stores, the period rule,
the cap, refusals, fork safety, and the golden longitudinal cases of
conformance/golden.json replayed word for word (conformance/README.md, "Longitudinal")."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import ldpstream
from client_samples import mechanism

GOLDEN = json.loads((Path(__file__).resolve().parents[2] / "conformance" / "golden.json").read_text())
replay = getattr(ldpstream._ldpstream, "_conformance_longitudinal", None)
needs_replay = pytest.mark.skipif(
    replay is None, reason="built without the test-only conformance-replay feature (pip install ./python)"
)
DAY = 86_400_000
NEW_YEAR = 1_767_225_600_000


def lgrr(**kw):
    return ldpstream.Mechanism.lgrr(epsilon_perm=2.0, epsilon_1=0.5, domain=8, **kw)


def test_constructors_check_the_parameters_as_the_config_does():
    m = lgrr()
    assert m.kind == "lgrr" and m.domain == 8
    assert m.config["epsilon_perm"] == 2.0 and m.config["epsilon_1"] == 0.5
    assert ldpstream.Mechanism.losue(epsilon_perm=2.0, epsilon_1=0.5, domain=8).kind == "losue"
    assert ldpstream.Mechanism.lsue(epsilon_perm=2.0, epsilon_1=0.5, domain=8, period="1h").kind == "lsue"
    with pytest.raises(ValueError, match="epsilon_1"):
        ldpstream.Mechanism.lgrr(epsilon_perm=1.0, epsilon_1=1.0, domain=8)
    with pytest.raises(ValueError, match="period"):
        ldpstream.Mechanism.lgrr(epsilon_perm=2.0, epsilon_1=1.0, domain=8, period="1ms")
    with pytest.raises(ValueError, match="epsilon_perm"):
        ldpstream.Mechanism.lgrr(epsilon_perm=float("nan"), epsilon_1=1.0, domain=8)
    # The fingerprint covers epsilon_perm and the period too.
    assert lgrr().fingerprint != ldpstream.Mechanism.lgrr(epsilon_perm=3.0, epsilon_1=0.5, domain=8).fingerprint
    assert lgrr().fingerprint != lgrr(period="2d").fingerprint


def test_randomize_and_messages_are_refused_and_client_needs_a_longitudinal_kind():
    with pytest.raises(ValueError, match="client"):
        lgrr().randomize([1, 2])
    with pytest.raises(ValueError, match="client"):
        lgrr().messages([1, 2], ts=0)
    with pytest.raises(ValueError, match="keeps no memo"):
        ldpstream.Mechanism.grr(epsilon=1.0, domain=4).client()


def test_one_report_per_period_and_the_refusals():
    client = lgrr().client()
    assert client.options == (16, "refuse")
    r = client.report("m", 3, NEW_YEAR)
    assert isinstance(r, int) and 0 <= r < 8
    with pytest.raises(ValueError, match="^same_period"):
        client.report("m", 3, NEW_YEAR + DAY - 1)
    with pytest.raises(ValueError, match="^clock_went_back"):
        client.report("m", 3, NEW_YEAR - 1)
    client.report("m", 3, NEW_YEAR + DAY)
    client.report("other", 3, NEW_YEAR)  # another metric has its own period
    assert client.period_of(NEW_YEAR) == NEW_YEAR // DAY
    with pytest.raises(ValueError):
        client.report("m", 8, NEW_YEAR + 2 * DAY)
    with pytest.raises(ValueError, match="same_period"):
        lgrr().client(same_period="sometimes")
    with pytest.raises(ValueError, match="max_memoized_values"):
        lgrr().client(max_memoized_values=0)


def test_repeat_returns_the_first_reports_bytes():
    client = ldpstream.Mechanism.losue(epsilon_perm=2.0, epsilon_1=0.5, domain=12).client(same_period="repeat")
    first = client.report("m", 4, NEW_YEAR)
    assert isinstance(first, bytes) and len(first) == 2
    assert client.report("m", 4, NEW_YEAR + 5) == first


def test_past_the_cap_the_metric_stops():
    client = lgrr().client(max_memoized_values=2)
    client.report("m", 0, 0)
    client.report("m", 1, DAY)
    client.report("m", 0, 2 * DAY)
    with pytest.raises(ValueError, match="^memo_full"):
        client.report("m", 2, 3 * DAY)
    with pytest.raises(ValueError, match="^stopped"):
        client.report("m", 0, 4 * DAY)


def test_the_memo_holds_across_reports_and_is_canonical_json():
    store = ldpstream.MemoryMemoStore()
    client = ldpstream.Mechanism.lsue(epsilon_perm=4.0, epsilon_1=1.0, domain=16).client(store=store)
    client.report("m", 5, NEW_YEAR)
    memo = json.loads(store.load("m"))
    assert list(memo) == ["version", "kind", "fingerprint", "period_ms", "values", "last_period",
                          "last_report", "stopped", "reports"]
    assert memo["kind"] == "lsue" and memo["reports"] == 1 and [v for v, _ in memo["values"]] == [5]
    first_memo = memo["values"][0][1]
    client.report("m", 5, NEW_YEAR + DAY)
    memo = json.loads(store.load("m"))
    assert memo["values"] == [[5, first_memo]] and memo["reports"] == 2
    assert store.load("absent") is None


def test_the_file_store_survives_a_restart_and_is_locked(tmp_path):
    path = tmp_path / "memo.json"
    m = lgrr()
    store = ldpstream.FileMemoStore(path)
    client = m.client(store=store)
    client.report("m", 3, NEW_YEAR)
    saved = json.loads(path.read_text())
    assert saved["version"] == 1 and list(saved["metrics"]) == ["m"]
    with pytest.raises(ValueError, match="open in another client"):
        ldpstream.FileMemoStore(path)  # one client at a time
    del client, store
    again = m.client(store=ldpstream.FileMemoStore(path))
    with pytest.raises(ValueError, match="^same_period"):
        again.report("m", 3, NEW_YEAR + 1)  # the period rule survived the restart
    again.report("m", 3, NEW_YEAR + DAY)
    assert json.loads(path.read_text())["metrics"]["m"]["values"] == saved["metrics"]["m"]["values"]


def test_a_file_that_does_not_read_back_is_an_error(tmp_path):
    path = tmp_path / "memo.json"
    path.write_text("{not json")
    with pytest.raises(ValueError):
        ldpstream.FileMemoStore(path)


def test_another_mechanisms_memo_is_refused_until_reset():
    store = ldpstream.MemoryMemoStore()
    lgrr().client(store=store).report("m", 1, NEW_YEAR)
    m = ldpstream.Mechanism.lgrr(epsilon_perm=3.0, epsilon_1=0.5, domain=8)
    other = m.client(store=store)
    with pytest.raises(ValueError, match="^memo_mismatch"):
        other.report("m", 1, NEW_YEAR + DAY)
    other.reset("m")
    other.report("m", 1, NEW_YEAR + DAY)
    assert json.loads(store.load("m"))["fingerprint"] == m.fingerprint


class DictStore:
    def __init__(self):
        self.saved = {}

    def load(self, metric):
        return self.saved.get(metric)

    def save(self, metric, text):
        self.saved[metric] = text


class FailingStore(DictStore):
    def save(self, metric, text):
        raise RuntimeError("disk full")


def test_a_python_object_is_a_store_and_a_failed_save_returns_no_report():
    store = DictStore()
    client = lgrr().client(store=store)
    client.report("m", 2, NEW_YEAR)
    assert json.loads(store.saved["m"])["reports"] == 1
    failing = lgrr().client(store=FailingStore())
    with pytest.raises(OSError, match="disk full"):
        failing.report("m", 2, NEW_YEAR)
    with pytest.raises(ValueError, match="store"):
        lgrr().client(store=42)


def test_message_is_stamped_with_the_fingerprint():
    m = lgrr()
    client = m.client()
    message = json.loads(client.message("m", 2, NEW_YEAR, groups={"country": "fr"}))
    assert message["ts"] == NEW_YEAR and message["country"] == "fr"
    assert message["fingerprint"] == m.fingerprint and 0 <= message["report"] < 8
    binary = client.message("m", 2, NEW_YEAR + DAY, format="binary")
    assert binary[0] == 2 and binary[1:5] == bytes.fromhex(m.fingerprint)[::-1]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_does_not_repeat_its_parents_draws():
    # lsue at d = 64: two independent memos of one value agree with probability ~1e-10.
    m = ldpstream.Mechanism.lsue(epsilon_perm=1.0, epsilon_1=0.5, domain=64)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        os.write(write, m.client().report("m", 0, NEW_YEAR))
        os._exit(0)
    os.close(write)
    child = os.read(read, 64)
    os.waitpid(pid, 0)
    assert len(child) == 8 and child != m.client().report("m", 0, NEW_YEAR)


def test_the_docs_example_runs(tmp_path, capsys):
    # docs/python.md, "Devices that report every period", with the store in tmp_path.
    m = ldpstream.Mechanism.lgrr(epsilon_perm=2.0, epsilon_1=0.5, domain=8, period="1d")
    client = m.client(store=ldpstream.FileMemoStore(tmp_path / "ldp-memo.json"))
    client.message("app_language", 3, ts=NEW_YEAR, format="json")
    client.message("app_language", 3, ts=NEW_YEAR + DAY, format="json")
    with pytest.raises(ValueError, match="^same_period"):
        client.report("app_language", 3, ts=NEW_YEAR + DAY)


def test_the_golden_file_has_the_longitudinal_cases():
    kinds = {c["mechanism"]["kind"] for c in GOLDEN.get("longitudinal", [])}
    assert kinds == {"lgrr", "losue", "lsue"}


@needs_replay
@pytest.mark.parametrize("case", GOLDEN.get("longitudinal", []), ids=lambda c: c["name"])
def test_golden_longitudinal_case(case):
    m = mechanism(case["mechanism"])
    assert m.fingerprint == case["fingerprint"]
    options = case["options"]
    groups = [tuple(g) for g in case["groups"]] if case["groups"] else None
    for i, step in enumerate(case["steps"]):
        before = json.dumps(step["memo_before"]) if step["memo_before"] is not None else None
        out = replay(m, step["metric"], step["value"], step["ts"], step["words"], before,
                     options["max_memoized_values"], options["same_period"], groups)
        where = f"{case['name']} step {i}"
        assert out["consumed"] == len(step["words"]), where
        assert out["refusal"] == step["refusal"], where
        after = json.loads(out["memo_after"]) if out["memo_after"] is not None else None
        assert after == step["memo_after"], where
        if step["refusal"] is None:
            report = out["report"]
            assert (report.hex() if isinstance(report, bytes) else report) == step["report"]["report"], where
            assert out["json"].decode() == step["json"], where
            assert out["binary"].hex() == step["binary"], where
