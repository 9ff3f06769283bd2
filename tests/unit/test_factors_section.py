"""The report's factor section (issue 29) in every output of a screening + refine journal: the ranked factors as a
table and a chart (HTML bars with whiskers, a text bar column in Markdown and XLSX), what the refine did, the tests
not run and why, predicted cells marked as predicted; results.json carries the same."""

from __future__ import annotations

import json
from pathlib import Path

import openpyxl

from tankbench.analysis.analyse import analyse_dataset, load
from tankbench.analysis.detail import with_run_detail
from tankbench.journal.db import Journal
from tankbench.reports.write import write_all
from tests.unit.test_design import _journal_with_screening


def test_the_factor_section_in_every_output(tmp_path: Path) -> None:
    path = str(tmp_path / "j.sqlite")
    _journal_with_screening(path, refine=True)
    out = tmp_path / "report"
    with Journal.open_readonly(path) as j:
        write_all(with_run_detail(analyse_dataset(load(j), "auto"), j), str(out))
    md = (out / "summary.md").read_text()
    assert "## Which factors matter" in md and "### write seq 4k" in md
    assert "| write seq 4k | 1 | kind | yes | dataset | zvol |" in md
    assert "████████████████████ |" in md  # the chart column: the largest effect's bar
    assert "Refine measured" in md and "in full (6 tests), fixed" in md
    assert "not in the screening design; refine fixed" in md
    html = (out / "index.html").read_text()
    assert 'aria-label="write seq 4k: factors by effect bar chart"' in html
    wb = openpyxl.load_workbook(out / "results.xlsx")
    sheet = wb["Factors"]
    header = [c.value for c in next(sheet.iter_rows(min_row=1, max_row=sheet.max_row)) if c.value]
    rows = [[c.value for c in r] for r in sheet.iter_rows()]
    assert any("kind" in r and "dataset" in r for r in rows), header
    doc = json.loads((out / "results.json").read_text())
    w = next(x for x in doc["factors"]["workloads"] if x["name"] == "write seq 4k")
    assert doc["factors"]["steps"] == ["screening", "refine"]
    assert w["winner"]["measured"] is True and "sync-disabled" in w["winner"]["name"]
    assert {e["factor"] for e in w["effects"][:3]} == {"kind", "recordsize", "sync"}
    assert all(p["measured"] is False and p["low"] <= p["mib_s"] <= p["high"] for p in w["predicted"])
    assert len(w["skipped"]) == w["candidates"] - w["measured"]
