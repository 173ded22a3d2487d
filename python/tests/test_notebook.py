"""examples/ldpstream_tour.ipynb runs top to bottom in a fresh kernel (nbclient), so the
notebook cannot rot: its own asserts check the tests' decisions, and it must write both
figures (estimates against the null, the sequential p-value over looks)."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="pip install -r python/requirements-spark.txt")
nbclient = pytest.importorskip("nbclient", reason="pip install -r python/requirements-spark.txt")
pytest.importorskip("matplotlib", reason="pip install -r python/requirements-spark.txt")

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "ldpstream_tour.ipynb"


def test_the_tour_notebook_runs_and_draws_its_figures(tmp_path, monkeypatch):
    from ipykernel.kernelspec import install

    monkeypatch.setenv("LDPSTREAM_TOUR_OUT", str(tmp_path))
    # The kernel runs this interpreter, whose site-packages has ldpstream: a "python3"
    # kernel spec naming it, first on JUPYTER_PATH (ahead of any the machine has).
    install(prefix=str(tmp_path / "jupyter"), kernel_name="python3")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter" / "share" / "jupyter"))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    errors = [
        o
        for cell in notebook.cells
        if cell.cell_type == "code"
        for o in cell.get("outputs", [])
        if o.get("output_type") == "error"
    ]
    assert not errors, errors
    for figure in ("estimates.png", "sequential.png"):
        png = tmp_path / figure
        assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", figure
    printed = "".join(
        o.get("text", "")
        for cell in notebook.cells
        for o in cell.get("outputs", [])
        if o.get("output_type") == "stream"
    )
    assert "LocalExpGOF" in printed and "LocalExpIND" in printed, printed
