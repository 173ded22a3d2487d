#!/usr/bin/env python3
"""Fails when a documentation link points at nothing, or outside the repository.

    scripts/check_doc_links.py [FILE.md ...]

Files (default): README.md, ARCHITECTURE.md, docs/**/*.md, crates/*/README.md,
clients/js/README.md, benches/RESULTS.md and deploy/README.md.

Checked: inline links and images, `[text](target)` and `![alt](target)`, and the targets
of reference definitions, `[label]: target`, outside fenced code blocks and code spans;
a reference use, `[text][label]` or `[label][]`, must have its definition. A target is
- http(s) or mailto: allowed, never fetched;
- any other scheme (`file:`, `ftp:`, ...) or an absolute path: refused, it leaves the
  repository;
- a relative path: resolved against the linking file's folder, it must stay inside the
  repository and name a file or folder the repository holds (tracked, or new and not
  ignored by git); a `#fragment` must match a heading of the target Markdown file
  (GitHub's anchors: lowercase, punctuation dropped, spaces to hyphens, `-1`, `-2`, ...
  for repeats; also `<a name>` / `id` anchors), or be a line anchor (`#L10`, `#L10-L20`)
  on any other file. A bare `#fragment` is a heading of the linking file.

Backticked paths in the text are not checked: only links are. Exit status 1, with one
`file:line: link: why` per bad link, when any is bad.
"""
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DEFAULT_FILES = [
    "README.md",
    "ARCHITECTURE.md",
    "docs/**/*.md",
    "crates/*/README.md",
    "clients/js/README.md",
    "benches/RESULTS.md",
    "deploy/README.md",
]


def repo_paths():
    """Every file of the repository (tracked, or untracked and not ignored), and every
    folder above one, as paths relative to the root; None outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT, capture_output=True, check=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        return None
    paths = set()
    for p in out.split("\0"):
        if not p or not os.path.lexists(os.path.join(ROOT, p)):
            continue  # deleted in the working tree
        paths.add(p)
        d = os.path.dirname(p)
        while d:
            paths.add(d)
            d = os.path.dirname(d)
    return paths


REPO = repo_paths()


def exists(rel):
    if rel in ("", "."):
        return True
    if REPO is not None:
        return rel in REPO
    return os.path.exists(os.path.join(ROOT, rel))


FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
# [text](target "title") and ![alt](target); text may hold one level of brackets.
INLINE = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[([^\]]+)\]:\s*(<[^>]*>|\S+)")
REF_USE = re.compile(r"(?<![\]\\])\[((?:[^\[\]]|\[[^\[\]]*\])+)\]\[([^\[\]]*)\]")


def strip_code_spans(line):
    return CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)


def prose_lines(text):
    """(line number, line) outside fenced code blocks, with code spans and HTML comments
    blanked (their length kept)."""
    text = HTML_COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    fence = None
    prev_blank, in_indented = True, False
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and not line.strip()[len(m.group(1)):].strip():
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        # An indented code block (four spaces after a blank line, or after another such
        # line) is code too; an indented list item or table row is not.
        indented = line.startswith("    ") and line.strip() \
            and not re.match(r"^\s*([-*+]|\d+[.)]|\|)\s", line)
        if indented and (prev_blank or in_indented):
            in_indented = True
            continue
        in_indented = False
        prev_blank = not line.strip()
        yield n, strip_code_spans(line)


def slug(heading, seen):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"(?<!\w)_+|_+(?!\w)", "", text)  # _emphasis_, not snake_case
    s = text.strip().lower()
    s = "".join(c for c in s if c.isalnum() or c in " -_")
    s = s.replace(" ", "-")
    n = seen.get(s, 0)
    seen[s] = n + 1
    return s if n == 0 else f"{s}-{n}"


ANCHOR_CACHE = {}


def anchors(path):
    if path in ANCHOR_CACHE:
        return ANCHOR_CACHE[path]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    found, seen = set(), {}
    lines = text.split("\n")
    fence = None
    for i, line in enumerate(lines):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        h = re.match(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
        if h:
            found.add(slug(h.group(1), seen))
        elif i + 1 < len(lines) and line.strip() and re.match(r"^ {0,3}(=+|-+)\s*$", lines[i + 1]) \
                and not line.lstrip().startswith(("-", "*", "|", ">")):
            found.add(slug(line, seen))
    for m in re.finditer(r"<a\s+(?:name|id)=\"([^\"]+)\"|\sid=\"([^\"]+)\"", text):
        found.add(m.group(1) or m.group(2))
    ANCHOR_CACHE[path] = found
    return found


def check_target(src, target):
    """Why `target`, linked from file `src` (relative to the root), is bad; None if fine."""
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1]
    if not target:
        return "empty link"
    scheme = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*):", target)
    if scheme:
        if scheme.group(1).lower() in ("http", "https", "mailto"):
            return None
        return f"a {scheme.group(1)}: link leaves the repository"
    path, _, fragment = target.partition("#")
    path = re.sub(r"%20", " ", path.split("?")[0])
    if path.startswith("/") or path.startswith("\\") or re.match(r"^[A-Za-z]:[\\/]", path):
        return "an absolute path leaves the repository"
    if path:
        joined = os.path.normpath(os.path.join(os.path.dirname(src), path))
        if joined == ".." or joined.startswith(".." + os.sep) or os.path.isabs(joined):
            return "leaves the repository"
        rel = "" if joined == "." else joined
        if not exists(rel):
            return f"{rel or '.'} is not in the repository"
    else:
        rel = src
    if fragment:
        full = os.path.join(ROOT, rel)
        if rel.lower().endswith((".md", ".markdown")) and os.path.isfile(full):
            if fragment not in anchors(full) and fragment.lower() not in anchors(full):
                return f"no heading #{fragment} in {rel}"
        elif not re.fullmatch(r"L\d+(-L\d+)?", fragment):
            return f"#{fragment} is neither a heading nor a line of {rel or '.'}"
    return None


def check_file(src):
    """The bad links of one file, as (line, link, why)."""
    with open(os.path.join(ROOT, src), encoding="utf-8") as f:
        text = f.read()
    bad = []
    lines = list(prose_lines(text))
    # A definition cannot interrupt a paragraph: it follows a blank line, a heading or
    # another definition.
    defs, prev = {}, ""
    for n, line in lines:
        m = REF_DEF.match(line)
        if m and (not prev.strip() or prev.lstrip().startswith("#") or REF_DEF.match(prev)):
            defs[n] = m
        prev = line
    defined = {m.group(1).strip().lower() for m in defs.values()}
    for n, m in defs.items():
        why = check_target(src, m.group(2))
        if why:
            bad.append((n, m.group(0).strip(), why))
    for n, line in lines:
        if n in defs:
            continue
        for m in INLINE.finditer(line):
            why = check_target(src, m.group(2))
            if why:
                bad.append((n, m.group(0), why))
        rest = INLINE.sub(lambda m: " " * len(m.group(0)), line)
        for m in REF_USE.finditer(rest):
            label = (m.group(2) or m.group(1)).strip().lower()
            if label not in defined:
                bad.append((n, m.group(0), f"no definition of the reference [{label}]"))
    return sorted(bad)


def main(argv):
    if argv:
        files = [os.path.relpath(os.path.abspath(a), ROOT) for a in argv]
    else:
        files = []
        for pattern in DEFAULT_FILES:
            files.extend(sorted(os.path.relpath(p, ROOT) for p in
                                glob.glob(os.path.join(ROOT, pattern), recursive=True)))
        files = sorted(set(files), key=files.index)
    problems = 0
    for src in files:
        if not os.path.isfile(os.path.join(ROOT, src)):
            print(f"{src}: no such file")
            problems += 1
            continue
        for line, link, why in check_file(src):
            print(f"{src}:{line}: {link}: {why}")
            problems += 1
    if problems:
        print(f"{problems} bad link(s) in {len(files)} file(s)")
        return 1
    print(f"doc links: {len(files)} files, every link resolves inside the repository")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
