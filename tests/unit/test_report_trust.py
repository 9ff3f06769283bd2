"""The report bugs of issue 33 item 3, each reproduced on a real journal first: an all-zero time series labelled
"max 1.00", a percentile chart that dropped configurations without a word, excess_s twice in the CSV and XLSX, a
zero-width interval for one run, an XLSX figures sheet promising colours it lacked (and no widths or number
formats), device_models printed as a Python dict."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

from openpyxl import load_workbook

from tankbench.analysis.analyse import analyse_journal
from tankbench.analysis.detail import with_run_detail
from tankbench.journal.db import Journal
from tankbench.reports.write import write_all
from tests.reportdata import LAB_ZFS_JOURNAL, imported_journal, local_journal


def _report(journal: str, out: Path) -> Path:
    with Journal(journal, create=False) as j:
        write_all(with_run_detail(analyse_journal(journal), j), str(out))
    return out


def test_an_all_zero_series_says_max_0_not_1(tmp_path: Path) -> None:
    page = (_report(local_journal(tmp_path), tmp_path / "r") / "index.html").read_text()
    flat = []
    for chart in page.split('<svg class="series"')[1:]:
        points = re.search(r'points="([^"]*)"', chart)
        label = re.search(r'<text x="30" y="10">([^<]*)</text>', chart)
        assert points and label
        if {xy.split(",")[1] for xy in points.group(1).split()} == {"102.0"}:  # a line along the bottom: all 0
            flat.append(label.group(1))
    assert flat, "the local journal's runs sampled iowait, all 0 in some runs"
    assert all(label.endswith("(max 0)") for label in flat), flat


def test_excess_s_is_one_column(tmp_path: Path) -> None:
    out = _report(local_journal(tmp_path), tmp_path / "r")
    head = next(csv.reader((out / "results.csv").open()))
    assert head.count("excess_s") == 1 and len(head) == len(set(head))
    raw = load_workbook(out / "results.xlsx")["raw"]
    names = [c.value for c in raw[1]]
    assert names.count("excess_s") == 1 and len(names) == len(set(names))
    with (out / "results.csv").open() as f:
        row = next(csv.DictReader(f))
    assert float(row["excess_s"]) == float(row["wall_s"]) - float(row["expected_s"])


def test_one_run_has_no_interval(tmp_path: Path) -> None:
    """The imported journal has one run per test: no confidence interval, not one of zero width."""
    out = _report(imported_journal(tmp_path), tmp_path / "r")
    data = json.loads((out / "results.json").read_text())
    stats = [s for t in data["tests"] for s in t["stats"].values() if s and s["n"] == 1]
    assert stats and all(s["ci95"] == [None, None] for s in stats)
    wb = load_workbook(out / "results.xlsx")
    case = next(ws for ws in wb.worksheets if ws.cell(1, 1).value == "rank")  # a test case's sheet
    head = [c.value for c in case[1]]
    lo, hi, n = head.index("ci95_low") + 1, head.index("ci95_high") + 1, head.index("n") + 1
    rows = range(2, case.max_row + 1)
    assert all(case.cell(r, n).value == 1 for r in rows)
    assert all(case.cell(r, lo).value is None and case.cell(r, hi).value is None for r in rows)
    page = (out / "index.html").read_text()
    assert "(n=1)" in page and not re.search(r"± [^<(]*\(n=1\)", page)


def test_figures_sheet_has_the_colours_it_promises_widths_and_number_formats(tmp_path: Path) -> None:
    """A heatmap is coloured best-to-worst only where its test case's leader is significantly ahead (issue 28):
    the local journal's runs are close (heatmaps, no colour); the lab ZFS journal's are not (a colour scale)."""
    out = _report(local_journal(tmp_path), tmp_path / "r")
    ws = load_workbook(out / "results.xlsx")["figures"]
    titles = [r[0].value for r in ws.iter_rows() if r[0].value and "colour per" in str(r[0].value)]
    assert titles, "the local journal has heatmaps (storage configuration × test case, test case × iodepth)"
    assert not [r for cf in ws.conditional_formatting for r in cf.rules], "no leader significantly ahead: no colour"
    assert ws.column_dimensions["A"].width and ws.column_dimensions["A"].width > 20
    numbers = [c for r in ws.iter_rows() for c in r if isinstance(c.value, float)]
    assert numbers and all(c.number_format == "#,##0.00" for c in numbers)
    lab = tmp_path / "lab.sqlite"
    shutil.copy(LAB_ZFS_JOURNAL, lab)
    ws = load_workbook(_report(str(lab), tmp_path / "lab") / "results.xlsx")["figures"]
    rules = [(str(cf.sqref), r) for cf in ws.conditional_formatting for r in cf.rules]
    assert rules and all(r.type == "colorScale" for _, r in rules), rules
    assert all(re.fullmatch(r"([A-Z]+)\d+:\1\d+|B(\d+):[A-Z]+\2", ref) for ref, _ in rules), rules  # a column or a row


def test_device_models_read_as_names_not_a_python_dict(tmp_path: Path) -> None:
    out = _report(local_journal(tmp_path), tmp_path / "r")
    page = (out / "index.html").read_text()
    assert "{&#x27;vda&#x27;" not in page and "{'vda'" not in page
    assert "<td>device_models</td><td>vda: (no model)</td>" in page


def test_an_empty_value_in_a_fingerprint_mapping_is_a_dash_except_a_device_model() -> None:
    """Every report of a pool tankbench created showed `parent: (no model)`: the empty-model text was used for any
    empty value of any mapping (found in the lab with raidz2, dRAID and mirrors)."""
    from tankbench.analysis.sections.fingerprint import show_key

    assert show_key("pool_layout", {"layout": "raidz2(4)", "parent": ""}) == "layout: raidz2(4), parent: —"
    assert show_key("device_models", {"vda": "", "vdb": "QEMU HARDDISK"}) == "vda: (no model), vdb: QEMU HARDDISK"
