"""The README's "## Python" section runs verbatim: every fenced python block, in order,
in one namespace, as a reader would paste them."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks() -> list:
    text = README.read_text()
    start = text.index("\n## Python\n")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end != -1 else None]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_the_readme_python_examples_run(capsys):
    blocks = python_blocks()
    assert blocks, "the README's Python section has no python block"
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)
    printed = capsys.readouterr().out.split()
    assert printed[-1] == "10000", printed
