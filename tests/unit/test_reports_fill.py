"""The "pool full" table (workload = "fill", seed 003) in every report, from the journal of a real lab run; fill
runs are an experiment, never a leaderboard entry."""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path

from tankbench.analysis.analyse import analyse_journal
from tankbench.analysis.detail import with_run_detail
from tankbench.journal.db import Journal
from tankbench.reports.html import render_html
from tankbench.reports.json import analysis_dict
from tankbench.reports.markdown import summary_markdown
from tankbench.reports.write import write_all
from tests.reportdata import lab_fill_journal, local_journal

MIB = 1 << 20


def test_one_row_per_fill_run_with_what_the_guest_saw(tmp_path: Path) -> None:
    a = analyse_journal(lab_fill_journal(tmp_path))
    assert [(f.backing, f.guest_saw, f.pauses, f.resumed, f.intact, f.status) for f in a.fill] == [
        ("zvol", "paused", 1, True, True, "done"),
        ("qcow2", "paused", 1, True, True, "done"),
        ("raw", "paused", 1, True, True, "done"),
    ]
    assert all(f.werror == "enospc" and f.host_error == "No space left on device (stop, 1x)" for f in a.fill)
    assert [f.before_stop_mib for f in a.fill] == [52.0, 52.0, 55.0]  # qemu's bytes when it paused the VM
    assert a.fill[0].saw_text == "paused 1x, resumed"


def test_fill_runs_never_enter_a_leaderboard_or_a_test_case(tmp_path: Path) -> None:
    a = analyse_journal(lab_fill_journal(tmp_path))
    assert a.leaderboards == () and a.dataset.cases() == {}
    assert {t.case for t in a.dataset.tests} == {"pool full"}
    assert all(t.mean("mibs") is None and t.mean("durable_mibs") is None for t in a.dataset.tests)
    assert a.dataset.tests[0].mean("fill_written_mib") == 128.0  # the fill's own figures are there


def test_markdown_html_and_json_show_the_table(tmp_path: Path) -> None:
    journal = lab_fill_journal(tmp_path)
    a = analyse_journal(journal)
    md = summary_markdown(a)
    assert "## Pool full" in md
    assert (
        "| #1 zfs-vm-zvol-fill-128M | zvol | enospc | paused 1x, resumed | No space left on device (stop, 1x) "
        "| 52 MiB | yes | done |"
    ) in md
    with Journal(journal, create=False) as j:
        page = render_html(with_run_detail(a, j))
    assert '<h2 id="pool-full">Pool full</h2>' in page and page.count("paused 1x, resumed") == 3
    rows = analysis_dict(a)["pool_full"]
    assert [(r["backing"], r["guest_saw"], r["intact"]) for r in rows] == [
        ("zvol", "paused", True),
        ("qcow2", "paused", True),
        ("raw", "paused", True),
    ]


def test_every_export_writes_for_a_fill_journal(tmp_path: Path) -> None:
    journal = lab_fill_journal(tmp_path)
    a = analyse_journal(journal)
    with Journal(journal, create=False) as j:
        paths = write_all(with_run_detail(a, j), str(tmp_path / "out"))
    assert {Path(p).name for p in paths} >= {"index.html", "results.xlsx", "summary.md", "results.csv", "results.json"}
    with open(tmp_path / "out" / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3 and {r["fill_pauses"] for r in rows} == {"1.0"} and not any(r.get("mibs") for r in rows)


def test_a_journal_without_fill_runs_has_no_table(tmp_path: Path) -> None:
    a = analyse_journal(local_journal(tmp_path))
    assert a.fill == () and "Pool full" not in summary_markdown(a) and analysis_dict(a)["pool_full"] == []


def test_a_fill_is_never_late_against_the_campaigns_runtime(tmp_path: Path) -> None:
    """A fill is size-based: a run longer than campaign.runtime is no timing issue (the real runs took 25-41 s
    of a 60 s runtime; here one is made to take 300 s)."""
    journal = lab_fill_journal(tmp_path)
    conn = sqlite3.connect(journal)
    conn.execute("UPDATE runs SET wall_s = 300 WHERE id = 1")
    conn.commit()
    conn.close()
    a = analyse_journal(journal)
    assert not any(r.late for t in a.dataset.tests for r in t.runs)
    assert not any(w.code == "timing-issue" for w in a.warnings)
    with Journal(journal, create=False) as j:
        page = render_html(with_run_detail(a, j))
    assert "late by" not in page
