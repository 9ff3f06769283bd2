"""index.html, summary.md, results.csv and results.json on real journals."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from tankbench.analysis.analyse import analyse_journal
from tankbench.analysis.detail import with_run_detail
from tankbench.journal.db import Journal
from tankbench.reports.csv import write_csv
from tankbench.reports.html import render_html
from tankbench.reports.json import analysis_dict
from tankbench.reports.markdown import summary_markdown
from tests.reportdata import imported_journal, local_journal


def _html(journal: str) -> str:
    a = analyse_journal(journal)
    with Journal(journal, create=False) as j:
        return render_html(with_run_detail(a, j))


def test_html_self_contained_with_charts(tmp_path: Path) -> None:
    page = _html(local_journal(tmp_path))
    assert "<script" not in page and not re.search(r"(src|href)=\"https?://", page)
    assert page.count('class="leaderboard"') == 2 and page.count('class="chart"') == 2
    assert 'data-series="load1"' in page and 'data-series="dev_iops"' in page  # real sampler series
    assert 'data-series="dev_avg_io_bytes"' in page
    assert 'id="emulated"' not in page
    assert "hsl(" in page and 'class="ex" title="' in page  # colour scale and how-obtained tooltips
    assert "chip w" in page  # warm-up runs shown, dashed


def test_html_tcg_banner_and_zvol_rows(tmp_path: Path) -> None:
    page = _html(imported_journal(tmp_path))
    assert 'id="emulated"' in page and "emulated machine" in page
    assert page.count('<tr class="zvol">') == 2
    assert "No time series in this journal" in page


def test_markdown(tmp_path: Path) -> None:
    md = summary_markdown(analyse_journal(imported_journal(tmp_path)))
    assert md.startswith("# tankbench report")
    assert "> **Emulated machine:** These runs ran in an emulated machine (host: qemu TCG (emulated))" in md
    assert "### readwrite random 16k" in md and "(zvol)" in md
    assert "Fix:" in md and "## How the numbers are obtained" in md


def test_csv_one_row_per_run(tmp_path: Path) -> None:
    path = local_journal(tmp_path)
    a = analyse_journal(path)
    out = tmp_path / "r.csv"
    write_csv(a, str(out))
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == a.dataset.n_runs == 48
    assert sum(r["warmup"] == "1" for r in rows) == 16
    with Journal(path, create=False) as j:
        ids = {r.row_id for r in j.iter_runs()}
    assert {int(r["run_row_id"]) for r in rows} == ids


def test_json_traces_rows(tmp_path: Path) -> None:
    a = analyse_journal(local_journal(tmp_path))
    d = json.loads(json.dumps(analysis_dict(a), default=str))
    tests = {t["id"]: t for t in d["tests"]}
    for lb in d["leaderboards"]:
        for row in lb["rows"]:
            t = tests[row["test_id"]]
            key = lb["metric"]
            assert row["value"] == t["stats"][key]["mean"]
            measured = [r[key] for r in t["runs"] if r["status"] == "done" and not r["warmup"]]
            assert sorted(measured) == sorted(t["stats"][key]["values"])
        assert lb["reason"]
    assert d["explain"]["ci"].startswith("95 % confidence interval")


def test_both_layers_of_emulation_are_named() -> None:
    from tankbench.analysis.checks import emulation_layers

    lab_guest = {"accelerator": "tcg", "guest_accelerator": "tcg", "guest_nested": True}
    kvm_guest = {"accelerator": "", "guest_accelerator": "kvm", "guest_nested": False}
    assert emulation_layers([lab_guest, kvm_guest, {"accelerator": "tcg"}]) == (
        "host: qemu TCG (emulated); test guest: qemu TCG (emulated) inside it",
        "host: not virtualised; test guest: KVM",
        "host: qemu TCG (emulated)",
    )
