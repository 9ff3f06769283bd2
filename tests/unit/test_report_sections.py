"""Report sections (issue 30 item 4): each section module declares its data once, the analysis computes it into the
Analysis, and every exporter renders sections it does not know by name."""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from openpyxl import load_workbook

from tankbench.analysis.analyse import analyse_dataset, analyse_journal, load
from tankbench.analysis.cases import TestSummary
from tankbench.analysis.figures import MAX_SERIES
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import Cell, Column, Items, Para, Part, Section, Span, Table
from tankbench.analysis.sections import registry
from tankbench.analysis.sections.figures import percentile_figures
from tankbench.journal.db import Journal
from tankbench.reports.html import render_html
from tankbench.reports.json import analysis_dict
from tankbench.reports.markdown import summary_markdown
from tankbench.reports.write import write_all
from tests.reportdata import lab_fill_journal, lab_vmdisk_journal, lab_zfs_journal, local_journal


def slowest(ctx: Context) -> tuple[tuple[TestSummary, float], ...]:
    """A section the exporters have never heard of: each test's slowest measured run."""
    out = []
    for t in ctx.ds.tests:
        walls = [r.wall_s for r in t.measured if r.wall_s is not None]
        if walls:
            out.append((t, max(walls)))
    return tuple(out)


def show_slowest(a: Analysis, rows: tuple[tuple[TestSummary, float], ...]) -> Section:
    table = Table(
        (Column("test"), Column("slowest_s", "slowest run (s)", tip="max wall_s of the measured runs", num=True)),
        [(f"#{t.number} {t.name}", Cell(w, f"{w:.2f} s")) for t, w in rows],
        sheet="slowest",
        freeze=True,
    )
    intro = Para((Span("The slowest run of each test, by "), Span("wall_s", "code"), Span(".")))
    return Section("slowest", "Slowest runs", (intro, Part("per test", (table, Items(("=1+2 stays text",))))))


SLOWEST = SectionSpec(
    "slowest", 35, slowest, show_slowest, lambda a, rows: {"slowest": {t.id: w for t, w in rows}}, sheet_order=5
)


def with_section(a: Analysis, spec: SectionSpec[Any]) -> Analysis:
    data = spec.compute(Context(a, None, a.options))
    return replace(
        a, sections=tuple(sorted((*a.sections, spec), key=lambda s: s.order)), parts={**a.parts, spec.name: data}
    )


def test_a_section_no_exporter_knows_appears_in_every_output(tmp_path: Path) -> None:
    a = with_section(analyse_journal(local_journal(tmp_path)), SLOWEST)
    page = render_html(a)
    assert '<h2 id="slowest">Slowest runs</h2>' in page and "<code>wall_s</code>" in page
    assert page.index('id="slowest"') < page.index('id="goals"'), "in its order, between recommendations and goals"
    assert 'title="max wall_s of the measured runs">slowest run (s)</span></th>' in page
    md = summary_markdown(a)
    assert "## Slowest runs" in md and "### per test" in md and "| test | slowest run (s) |" in md
    assert "- =1+2 stays text" in md
    assert analysis_dict(a)["slowest"] and len(analysis_dict(a)["slowest"]) == 16
    write_all(a, str(tmp_path / "r"))
    wb = load_workbook(tmp_path / "r" / "results.xlsx")
    assert wb.sheetnames[:2] == ["about", "raw"] and "slowest" in wb.sheetnames
    ws = wb["slowest"]
    assert [c.value for c in ws[1]] == ["test", "slowest_s"] and ws.freeze_panes == "A2"
    assert ws.cell(1, 2).comment is not None and isinstance(ws.cell(2, 2).value, float)
    assert json.loads((tmp_path / "r" / "results.json").read_text())["slowest"]


def test_the_registry_lists_every_section_once_in_order() -> None:
    specs = registry()
    names = [s.name for s in specs]
    assert len(names) == len(set(names))
    assert [s.order for s in specs] == sorted(s.order for s in specs)
    assert {"head", "about", "warnings", "leaderboards", "runs", "hosts", "client_runs", "method"} <= set(names)
    assert names[0] == "head" and names[-1] == "method"


@pytest.mark.parametrize("make", [local_journal, lab_zfs_journal, lab_vmdisk_journal, lab_fill_journal])
def test_every_section_renders_on_every_fixture_journal(tmp_path: Path, make: Any) -> None:
    """Each section's data is computed once into the Analysis (with the journal for single runs), and the five
    outputs carry every section that has something to show."""
    path = make(tmp_path)
    with Journal.open_readonly(path) as j:
        a = analyse_dataset(load(j), journal=j)
    assert set(a.parts) == {s.name for s in registry()}
    paths = write_all(a, str(tmp_path / "r"))
    assert [Path(p).name for p in paths[:5]] == [
        "index.html",
        "results.xlsx",
        "summary.md",
        "results.csv",
        "results.json",
    ]
    page = Path(paths[0]).read_text()
    for spec in a.sections:
        shown = spec.render(a, a.parts[spec.name])
        if (
            shown is not None
            and shown.level == 2
            and "html" in spec.outputs
            and any("html" in b.only for b in shown.blocks)
        ):
            assert f'<h2 id="{shown.id}">' in page, spec.name
    with open(paths[3], newline="") as f:
        assert sum(1 for _ in csv.reader(f)) == 1 + a.dataset.n_runs


def test_the_client_and_fleet_reports_are_sections_whose_data_is_in_the_analysis(tmp_path: Path) -> None:
    from tests.reportdata import fleet_each_journal

    path = fleet_each_journal(tmp_path)
    with Journal.open_readonly(path) as j:
        a = analyse_dataset(load(j), journal=j)
    hosts = a.get("hosts")
    assert hosts.names == ("local", "ssh:root@10.0.0.9") and len(hosts.reports) == 2
    assert all(r.get("hosts") is None for r in hosts.reports), "a host's own report compares no hosts"
    assert a.dataset.n_runs == 96 and [r.dataset.n_runs for r in hosts.reports] == [48, 48]
    paths = write_all(a, str(tmp_path / "r"))
    names = sorted(str(Path(p).relative_to(tmp_path / "r")) for p in paths)
    assert "hosts.md" in names and "local/index.html" in names and "ssh-root-10.0.0.9/results.xlsx" in names
    assert json.loads((tmp_path / "r" / "results.json").read_text())["hosts"][1]["report"] == (
        "ssh-root-10.0.0.9/results.json"
    )


def test_a_percentile_chart_says_which_lines_it_leaves_out(tmp_path: Path) -> None:
    """Issue 33: the percentile chart of a test case dropped configurations past 8 lines without a word."""
    a = analyse_journal(local_journal(tmp_path))
    case = [t for t in a.dataset.tests if t.case == "read random 4k"]
    pct: Mapping[str, Mapping[str, list[float]]] = {
        t.id: {"read": [1.0, 2, 3, 4, 5, 6, 7], "write": [2.0, 3, 4, 5, 6, 7, 8]} for t in case
    }
    (fig,) = percentile_figures(a, pct)
    lines = 2 * len(case)
    assert lines > MAX_SERIES and len(fig.series) == MAX_SERIES
    assert fig.note.startswith(f"{lines - MAX_SERIES} more line(s) not drawn: ")
    drawn = {s.label for s in fig.series}
    left = fig.note.split(": ", 1)[1].split(", ")
    assert len(left) == lines - MAX_SERIES and not drawn & set(left)
    assert set(fig.test_ids) == {t.id for t in case}
