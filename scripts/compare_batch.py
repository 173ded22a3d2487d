#!/usr/bin/env python3
"""Runs `ldpstream batch` of two builds on the same inputs and checks that their JSON
records are byte-identical: the proof that a refactoring changed no result.

    scripts/compare_batch.py OLD_BINARY NEW_BINARY

Configs: every TOML file under examples/, and every TOML block with a [[stream]] table
written into the end-to-end tests (crates/cli/tests/**/*.rs), with format!
placeholders filled in. For each config the OLD binary simulates matching input (the
stream's mechanism and parameters, a `group` column when it groups, event time when a
test windows by time); both binaries then run `batch` over it with the same
--insecure-seed and a fresh ledger each. Exits 1 on any difference, and lists every
config it compared or could not use.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile
import tomllib

NEWLINE = b"\n"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def configs():
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "*.toml"))):
        yield os.path.relpath(path, ROOT), open(path).read()
    for path in sorted(glob.glob(os.path.join(ROOT, "crates", "cli", "tests", "**", "*.rs"), recursive=True)):
        text = open(path).read()
        # The mechanism tables a test file passes into its templates, e.g.
        # "{ kind = \"grr\", epsilon = 1.0, domain = 4 }".
        mechanisms = [unescape(m.group(1)) for m in
                      re.finditer(r'"(\{ kind = \\"[a-z]+\\"(?:\\.|[^"\\])*\})"', text)]
        raw = [m.group(1) for m in re.finditer(r'r#"(.*?)"#', text, re.S)]
        plain = [unescape(m.group(1)) for m in re.finditer(r'(?<![#\w])"((?:\\.|[^"\\])*)"', text)]
        blocks = [b for b in raw + plain if "[[stream]]" in b]
        expanded = []
        for block in blocks:
            if re.search(r"mechanism = \{\w+\}", block) and mechanisms:
                expanded += [re.sub(r"mechanism = \{\w+\}", lambda _: "mechanism = " + m.replace("{", "{{").replace("}", "}}"), block)
                             for m in mechanisms]
            else:
                expanded.append(block)
        for i, block in enumerate(expanded):
            # format! escapes and placeholders: {{ }} are braces, {x} are values.
            block = block.replace("{{", "\x01").replace("}}", "\x02")
            for pattern, value in FILL:
                block = re.sub(pattern, value, block)
            block = re.sub(r"\{[^{}]*\}", "PLACEHOLDER", block)
            block = block.replace("\x01", "{").replace("\x02", "}")
            yield f"{os.path.relpath(path, ROOT)}#{i}", block


# Values for format! placeholders that stand where TOML wants a value, not a string: what
# the tests themselves most often pass there.
FILL = [
    (r"domain = \{[^{}]*\}", "domain = 10"),
    (r'format = "\{[^{}]*\}"', 'format = "json"'),
    (r"group_by = \[\{[^{}]*\}\]", 'group_by = ["group"]'),
    (r"window = \{[^{}]*\}", 'window = \x01 kind = "tumbling", size = "1m" \x02'),
    (r"mechanism = \{[^{}]*\}", 'mechanism = \x01 kind = "grr", epsilon = 1.0, domain = 10 \x02'),
    (r"source = \{[^{}]*\}", 'source = \x01 kind = "parquet", paths = ["unused"] \x02'),
    (r"sink = \[\{[^{}]*\}\]", 'sink = [\x01 kind = "stdout" \x02]'),
]


def unescape(s):
    return re.sub(r'\\(.)', lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s)


def mechanism_args(m):
    kind = m["kind"]
    args = ["--mechanism", kind]
    if "domain" in m:
        args += ["--domain", str(m["domain"])]
    for key, flag in (("epsilon", "--epsilon"), ("rho", "--rho"), ("cohorts", "--cohorts"),
                      ("seed", "--cohort-seed")):
        if key in m:
            args += [flag, str(m[key])]
    if kind == "matrix":
        args += ["--matrix", ";".join(",".join(str(x) for x in row) for row in m["matrix"])]
    return args


def simulate(binary, stream, out):
    m = stream["mechanism"]
    timed = any(isinstance(t.get("window"), dict) and t["window"].get("kind") in ("tumbling", "sliding", "cumulative")
                for t in stream.get("test", []))
    cmd = [binary, "simulate", *mechanism_args(m), "--seed", "11", "--out", out]
    columns = stream.get("columns", {})
    labels = set()
    for t in stream.get("test", []):
        if t.get("kind") == "two_sample":
            labels.update([t["a"], t["b"]])
    if columns.get("group_by") or labels:
        names = sorted(labels) or ["a", "b", "c"]
        cmd += ["--groups", ",".join(f"{g}=40000" for g in names)]
    else:
        cmd += ["--n", "120000"]
    if timed:
        cmd += ["--ts-start", "2026-01-01T00:00:00Z", "--rate", "200"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode == 0, r.stderr.strip().splitlines()[-1:] if r.stderr else []


def batch(binary, config_path, data, out, ledger):
    r = subprocess.run([binary, "batch", "--config", config_path, "--input", data, "--output", out,
                        "--ledger", ledger, "--insecure-seed", "5", "--threads", "2"],
                       capture_output=True, text=True)
    return r.returncode, r.stderr


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    old, new = map(os.path.abspath, sys.argv[1:])
    same = differ = unusable = 0
    with tempfile.TemporaryDirectory() as tmp:
        for n, (name, text) in enumerate(configs()):
            work = os.path.join(tmp, str(n))
            os.makedirs(work)
            try:
                cfg = tomllib.loads(text)
            except tomllib.TOMLDecodeError as e:
                print(f"unusable  {name}: not TOML after filling placeholders ({e})")
                unusable += 1
                continue
            streams = cfg.get("stream", [])
            # One stream per run: each gets input that fits its mechanism.
            for s_i, stream in enumerate(streams):
                one = dict(cfg)
                one["stream"] = [stream]
                cfg_path = os.path.join(work, f"s{s_i}.toml")
                with open(cfg_path, "w") as f:
                    f.write(dump_toml(one))
                data = os.path.join(work, f"s{s_i}.parquet")
                ok, why = simulate(old, stream, data)
                label = f"{name} stream {stream.get('name')!r}"
                if not ok:
                    print(f"unusable  {label}: simulate failed: {why}")
                    unusable += 1
                    continue
                outs = []
                for tag, binary in (("old", old), ("new", new)):
                    out = os.path.join(work, f"s{s_i}.{tag}.jsonl")
                    code, err = batch(binary, cfg_path, data, out, os.path.join(work, f"{tag}{s_i}.ledger.json"))
                    outs.append((code, open(out, "rb").read() if os.path.exists(out) else b"", err))
                (c1, b1, e1), (c2, b2, e2) = outs
                if c1 != 0 and c1 == c2:
                    msg1 = e1.strip().splitlines()[-1:] if e1 else []
                    print(f"both-fail {label}: exit {c1} {msg1}")
                    same += 1
                elif (c1, b1) == (c2, b2):
                    print(f"identical {label}: {b1.count(NEWLINE)} records, {len(b1)} bytes")
                    same += 1
                else:
                    print(f"DIFFERENT {label}: exit {c1} vs {c2}, {len(b1)} vs {len(b2)} bytes\n  old: {e1[-300:]}\n  new: {e2[-300:]}")
                    differ += 1
    print(f"{same} identical, {differ} different, {unusable} unusable")
    sys.exit(1 if differ else 0)


def dump_toml(value):
    """A minimal TOML writer for the shapes configs use (tables, arrays of tables,
    inline tables, scalars, arrays)."""
    lines = []

    def scalar(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(v, list):
            return "[" + ", ".join(scalar(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{key(k)} = {scalar(x)}" for k, x in v.items()) + " }"
        raise TypeError(v)

    def key(k):
        return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else scalar(k)

    def table(prefix, d):
        for k, v in d.items():
            if not (isinstance(v, list) and v and all(isinstance(x, dict) for x in v) and k in ("stream", "test", "sink", "sinks")) and not (isinstance(v, dict) and k in ("serve",)):
                lines.append(f"{k} = {scalar(v)}")
        for k, v in d.items():
            if isinstance(v, dict) and k in ("serve",):
                lines.append(f"\n[{prefix}{k}]")
                table(f"{prefix}{k}.", v)
            elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v) and k in ("stream", "test", "sink", "sinks"):
                for item in v:
                    lines.append(f"\n[[{prefix}{k}]]")
                    table(f"{prefix}{k}.", item)

    table("", value)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
