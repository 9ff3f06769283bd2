"""Machines side by side (issue 31): shared and unshared tests, ratios with intervals, versions said next to every
ratio, fingerprints with differences, claims per machine; and `compare` on journals and bundles of different
machines (it used to refuse them)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tankbench.analysis.analyse import load
from tankbench.analysis.machine_sections import comparison_sections
from tankbench.analysis.machines import Machine, compare_machines, fmt_ratio, labels_for
from tankbench.cli import main
from tankbench.journal.db import Journal
from tankbench.reports.machines import render_html, render_markdown
from tests.conftest import FIXTURES

LAB = FIXTURES / "journal-lab-zfs.sqlite"


def other_machine(tmp: Path, name: str, factor: float, fio: str = "", drop: tuple[int, ...] = ()) -> Path:
    """The lab journal as if another machine ran it: another host name, every byte count × factor, maybe
    another fio, maybe without some tests."""
    p = tmp / f"{name}.sqlite"
    with sqlite3.connect(LAB) as src, sqlite3.connect(p) as dst:
        src.backup(dst)
        fp = json.loads(dst.execute("SELECT data FROM fingerprints").fetchone()[0])
        fp["hostname"] = name
        if fio:
            fp["fio_version"] = fio
        dst.execute("UPDATE fingerprints SET data = ?", (json.dumps(fp),))
        for key in (
            "total.io_bytes",
            "total.bw_bytes",
            "write.bw_bytes",
            "read.bw_bytes",
            "write.io_bytes",
            "read.io_bytes",
        ):
            path = f'$."{key}"'
            dst.execute(
                f"UPDATE runs SET metrics = json_set(metrics, '{path}', json_extract(metrics, '{path}') * ?) "
                f"WHERE json_extract(metrics, '{path}') IS NOT NULL",
                (factor,),
            )
        if dst.execute("SELECT count(*) FROM sqlite_master WHERE name = 'run_inputs'").fetchone()[0]:
            dst.execute("DELETE FROM run_inputs")
        for n in drop:
            tid = dst.execute("SELECT id FROM tests WHERE number = ?", (n,)).fetchone()[0]
            dst.execute("DELETE FROM runs WHERE test_id = ?", (tid,))
            dst.execute("DELETE FROM tests WHERE id = ?", (tid,))
    return p


def machine(path: Path, label: str) -> Machine:
    with Journal.open_readonly(str(path)) as j:
        return Machine(label, str(path), load(j))


def test_shared_tests_ratios_intervals_and_versions(tmp_path: Path) -> None:
    a = machine(LAB, "a")
    b = machine(other_machine(tmp_path, "hostb", 2.0, fio="fio-3.36"), "b")
    c = machine(other_machine(tmp_path, "hostc", 1.0, drop=(1, 2)), "c")
    mc = compare_machines([a, b, c])
    assert len(mc.shared) == 16 and {r.number for r in mc.partial} == {1, 2}
    for r in mc.shared:
        ref, cb, cc = r.cells
        assert ref is not None and cb is not None and cc is not None
        assert cb.ratio == pytest.approx(2.0, rel=1e-6)  # every byte doubled: the ratio of means is 2
        assert cb.versions == ("fio fio-3.33 vs fio-3.36",)  # said next to every ratio of b
        assert cc.versions == () and cc.ratio == pytest.approx(1.0)
        if cb.low is not None and cb.high is not None:  # two runs each: an interval around 2
            assert cb.low <= 2.0 <= cb.high
            assert fmt_ratio(cb).startswith("2× [")
    assert [r.cells[2] for r in mc.partial] == [None, None]  # c did not run #1 and #2
    diff = {f.key: f.values for f in mc.fingerprint if f.differs}
    assert diff["hostname"] == ("tankbench-lab", "hostb", "hostc") and diff["fio_version"][1] == "fio-3.36"
    assert mc.version_notes == ("b: fio fio-3.33 vs fio-3.36",)
    assert len(mc.figures) == 2 and all(len(f.series) == 3 for f in mc.figures)


def test_renderers_say_versions_mark_differences_and_draw_every_machine(tmp_path: Path) -> None:
    a = machine(LAB, "mine")
    b = machine(other_machine(tmp_path, "theirs", 0.5, fio="fio-3.36"), "theirs")
    mc = compare_machines([a, b])
    sections = comparison_sections(mc)
    md = render_markdown(sections)
    assert "| fio_version ≠ | fio-3.33 | fio-3.36 |" in md
    assert md.count("— fio fio-3.33 vs fio-3.36") == len(mc.shared)  # next to every ratio
    html = render_html(sections)
    assert html.count('<tr class="diff"><td>fio_version ≠</td>') == 1
    assert html.count("<svg") == len(mc.figures) == 2
    assert html.count("— fio fio-3.33 vs fio-3.36") == len(mc.shared)


def test_claims_are_matched_by_name_and_unmatched_ones_said(tmp_path: Path) -> None:
    a, b = machine(LAB, "a"), machine(other_machine(tmp_path, "b", 1.0), "b")
    table = {
        "a": [("k1", "slog helps", "iops >= 3x", "holds"), ("k2", "zvols slower", "<= 0.5x", "holds")],
        "b": [("k1", "slog helps", "iops >= 3x", "does not hold"), ("k9", "zvols slower", "<= 0.8x", "holds")],
    }
    seen: list[str] = []

    def judge(ds: object) -> list[tuple[str, str, str, object]]:
        seen.append("a" if not seen else "b")
        return table[seen[-1]]  # type: ignore[return-value]

    mc = compare_machines([a, b], judge=judge)
    assert [(c.name, c.verdicts) for c in mc.claims] == [("slog helps", ("holds", "does not hold"))]
    assert mc.unmatched_claims == ("'zvols slower' is stated differently: a: <= 0.5x; b: <= 0.8x (not compared)",)


def test_labels_are_file_stems_made_unique() -> None:
    assert labels_for(["x/a.tankbench.zip", "y/a.sqlite", "b.zip"]) == ("a", "a-2", "b")


def test_compare_cli_on_machines_writes_html_and_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Different machines (host names differ) are compared though their fingerprints differ; journals of one
    machine with other fingerprints are still refused (test_report_cli)."""
    b = other_machine(tmp_path, "hostb", 2.0, fio="fio-3.36")
    out = tmp_path / "cmp"
    assert main(["compare", str(LAB), str(b), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Versions differ: hostb: fio fio-3.33 vs fio-3.36" in text
    assert f"wrote {out / 'compare.html'}" in text and (out / "compare.md").exists()
    assert main(["compare", str(LAB), str(b), "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["forced"] and len(doc["machines"]["shared"]) == 18
    assert doc["machines"]["shared"][0]["cells"][1]["versions_differ"] == ["fio fio-3.33 vs fio-3.36"]
