#!/usr/bin/env python3
"""Fails when the modules of a crate import each other in a circle, or when a crate
depends on one it must not (the layering of ARCHITECTURE.md).

    scripts/check_module_cycles.py [CRATE_SRC_DIR ...]   (default: every crates/*/src)

Crates: each workspace crate may depend only on the workspace crates below it,
config <- engine <- connectors <- jobs <- serve <- cli, and the Python extension
(crates/python) on jobs, engine, config and connectors only. The Python extension's
normal dependency tree (`cargo tree -p ldpstream-python -e normal`) must hold none of
the service's heavy crates (rdkafka, openssl, tokio, axum, hyper, prometheus), nor the
parquet crate and its codecs; the jobs', the engine's and config's none of the former. Skipped with a warning when cargo is not on PATH.

A module is a source file (`a/mod.rs` is module `a`). Module A depends on module B when A
names a path into B: `crate::b::…`, `super::b…` or `super::Item` (its parent), or
`self::b::…` and `b::…` for its own child modules. Declaring a child (`mod b;`) and
re-exporting from it (`pub use b::…`) in a parent are not dependencies: they are how a
folder is laid out, not a use. Test modules (`#[cfg(test)] mod tests`, also `pub(super)`
ones shared by sibling tests) are skipped. This
is the check `cargo modules dependencies --acyclic` makes, without compiling
rust-analyzer to run it.
"""
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def modules(src):
    out = {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, src)[:-3].split(os.sep)
            if rel == ["main"]:
                rel = ["(binary)"]
            elif rel[-1] in ("mod", "lib"):
                rel = rel[:-1]
            out[tuple(rel)] = path
    return out


TOKENS = re.compile(r'r#+"(?s:.*?)"#+|"(?:\\.|[^"\\])*"|//[^\n]*|/\*(?s:.*?)\*/|\'(?:\\.|[^\'\\])\'')


def strip(text):
    """The code without tests, comments and string or char literals (scanned left to
    right, so `//` inside a string and quotes inside a comment are both harmless)."""
    text = re.split(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod tests", text)[0]
    return TOKENS.sub(lambda m: '""' if m.group(0)[:1] in "r\"'" else "", text)


def resolve(mods, base):
    """The longest existing module that is a prefix of `base`."""
    for n in range(len(base), -1, -1):
        if tuple(base[:n]) in mods:
            return tuple(base[:n])
    return None


def edges(mods, name, text):
    deps = set()
    children = {m[-1] for m in mods if len(m) == len(name) + 1 and m[:len(name)] == name}
    body = "\n".join(l for l in text.split("\n")
                     if not re.match(r"\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*;", l)
                     and not re.match(r"\s*pub(\([^)]*\))?\s+use\s+(self::)?\w+::", l))
    for m in re.finditer(r"\b(crate|super|self)((?:::\w+)+)", body):
        head, rest = m.group(1), m.group(2).split("::")[1:]
        if head == "crate":
            base = rest
        elif head == "self":
            base = list(name) + rest
        else:
            parent = list(name[:-1])
            ups = 0
            while rest and rest[0] == "super":
                rest = rest[1:]
                ups += 1
            base = parent[:len(parent) - ups] + rest
        target = resolve(mods, base)
        if target is not None and target != name and target != name[:len(target)]:
            deps.add(target)
        elif target is not None and target == name[:len(target)] and target != name:
            deps.add(target)  # a use of the parent's own items
    for child in children:
        if re.search(rf"(?<![\w:]){child}::", body):
            deps.add(name + (child,))
    return deps


def cycles(graph):
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


# Which workspace crates each crate may depend on (normal dependencies).
ALLOWED = {
    "ldpstream-config": set(),
    "ldpstream-engine": {"ldpstream-config"},
    "ldpstream-connectors": {"ldpstream-config", "ldpstream-engine"},
    "ldpstream-jobs": {"ldpstream-config", "ldpstream-engine", "ldpstream-connectors"},
    "ldpstream-serve": {"ldpstream-config", "ldpstream-engine", "ldpstream-connectors", "ldpstream-jobs"},
    "ldpstream": {"ldpstream-config", "ldpstream-engine", "ldpstream-connectors", "ldpstream-jobs",
                  "ldpstream-serve"},
    "ldpstream-python": {"ldpstream-config", "ldpstream-engine", "ldpstream-connectors", "ldpstream-jobs"},
}
# Crates that must not reach these, in their whole normal dependency tree.
HEAVY = ("rdkafka", "rdkafka-sys", "openssl", "openssl-sys", "tokio", "axum", "hyper", "prometheus")
LIGHT = ("ldpstream-python", "ldpstream-jobs", "ldpstream-engine", "ldpstream-config")
# The Python extension opens no file either: no Parquet reader or its codecs.
HEAVY_FOR = {"ldpstream-python": ("parquet", "zstd-sys")}


def crate_checks():
    import shutil
    import subprocess
    if shutil.which("cargo") is None:
        print("WARNING: cargo not found; crate dependency checks SKIPPED")
        return 0
    bad = 0
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"],
        cwd=ROOT, check=True, capture_output=True, text=True).stdout)
    names = {p["name"] for p in meta["packages"]}
    for p in meta["packages"]:
        if p["name"] not in ALLOWED:
            continue
        deps = {d["name"] for d in p["dependencies"] if d["kind"] is None and d["name"] in names}
        for d in sorted(deps - ALLOWED[p["name"]]):
            print(f"{p['name']}: depends on {d}, which is not below it (ARCHITECTURE.md)")
            bad += 1
    for crate in LIGHT:
        tree = subprocess.run(
            ["cargo", "tree", "-p", crate, "-e", "normal", "--prefix", "none", "--format", "{p}"],
            cwd=ROOT, check=True, capture_output=True, text=True).stdout
        banned = set(HEAVY) | set(HEAVY_FOR.get(crate, ()))
        reached = sorted({line.split()[0] for line in tree.splitlines() if line.strip()} & banned)
        for h in reached:
            print(f"{crate}: its dependency tree holds {h} (cargo tree -p {crate} -e normal -i {h})")
            bad += 1
        print(f"{crate}: none of {', '.join(sorted(banned))} in its tree"
              if not reached else f"{crate}: reaches {', '.join(reached)}")
    return bad


def main():
    srcs = sys.argv[1:] or sorted(
        os.path.join(ROOT, "crates", d, "src") for d in os.listdir(os.path.join(ROOT, "crates")))
    bad = 0 if sys.argv[1:] else crate_checks()
    for src in srcs:
        mods = modules(src)
        graph = {m: edges(mods, m, strip(open(p).read())) for m, p in mods.items()}
        found = cycles(graph)
        crate = os.path.relpath(src, ROOT)
        for comp in found:
            names = sorted("::".join(c) or "(root)" for c in comp)
            print(f"{crate}: cycle among {', '.join(names)}")
            bad += 1
        print(f"{crate}: {len(mods)} modules, {sum(len(v) for v in graph.values())} dependencies, {len(found)} cycles")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
