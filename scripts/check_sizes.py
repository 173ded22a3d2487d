#!/usr/bin/env python3
"""Fails when product code has a file over 800 lines or a function over 150 lines.

    scripts/check_sizes.py

Product code: every .rs file under crates/*/src and benches/*.rs, without its test
modules (a file's `#[cfg(test)] mod tests { … }` block, and the engine's `src/tests/`
folder, which holds only tests). A function's length runs from its `fn` line to its
closing brace. Long functions are where bugs hide; long files are several concepts.
"""
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_FILE = 800
MAX_FN = 150

TOKENS = re.compile(r'r#+"(?s:.*?)"#+|br?"(?:\\[\s\S]|[^"\\])*"|r?"(?:\\[\s\S]|[^"\\])*"|//[^\n]*|/\*(?s:.*?)\*/|b?\'(?:\\.|[^\'\\])\'')


def blank(text):
    """Strings, chars and comments replaced by spaces of the same shape (newlines kept),
    so that braces inside them do not count."""
    return TOKENS.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def product(text):
    """The text before the file's test module."""
    m = re.search(r"^#\[cfg\(test\)\]\s*\n\s*(pub(\([^)]*\))?\s+)?mod \w+\s*(\{|;)", text, re.M)
    return text[: m.start()] if m else text


def functions(code):
    """(name, first line, line count) of every fn with a body."""
    out = []
    for m in re.finditer(r"\bfn\s+(\w+)", code):
        i = m.end()
        depth = 0
        # the body's opening brace: the first `{` at paren/angle depth 0, unless a `;` ends
        # a declaration first
        paren = 0
        while i < len(code):
            c = code[i]
            if c in "(<[":
                paren += 1
            elif c in ")>]":
                paren -= 1
            elif c == ";" and paren <= 0:
                break
            elif c == "{" and paren <= 0:
                break
            i += 1
        if i >= len(code) or code[i] != "{":
            continue
        start = i
        while i < len(code):
            if code[i] == "{":
                depth += 1
            elif code[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        first = code.count("\n", 0, m.start()) + 1
        last = code.count("\n", 0, i) + 1
        out.append((m.group(1), first, last - first + 1))
    return out


def main():
    files = sorted(glob.glob(os.path.join(ROOT, "crates", "*", "src", "**", "*.rs"), recursive=True)
                   + glob.glob(os.path.join(ROOT, "benches", "*.rs")))
    bad = 0
    for path in files:
        rel = os.path.relpath(path, ROOT)
        if "/src/tests/" in rel:
            continue
        code = blank(product(open(path).read()))
        lines = code.count("\n") + 1
        if lines > MAX_FILE:
            print(f"{rel}: {lines} lines of product code (at most {MAX_FILE})")
            bad += 1
        for name, first, n in functions(code):
            if n > MAX_FN:
                print(f"{rel}:{first}: fn {name} is {n} lines (at most {MAX_FN})")
                bad += 1
    print(f"{len(files)} files checked, {bad} over the limits")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
