"""Analysis of real journals: leaderboards, ratios, warnings and advice trace back to journal rows."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tankbench.analysis.analyse import analyse_journal
from tankbench.errors import UserError
from tankbench.metrics import MIB
from tests.reportdata import imported_journal, local_journal


def _raw_means(path: str) -> dict[str, float]:
    """MiB/s per test straight from SQLite: mean of total.bw_bytes over done, non-warm-up runs."""
    con = sqlite3.connect(path)
    rows = con.execute(
        "SELECT test_id, json_extract(metrics, '$.\"total.bw_bytes\"') FROM runs WHERE status='done' AND warmup=0"
    ).fetchall()
    by: dict[str, list[float]] = {}
    for tid, bw in rows:
        by.setdefault(tid, []).append(bw / MIB)
    return {k: sum(v) / len(v) for k, v in by.items()}


def test_leaderboards_trace_to_journal_rows(tmp_path: Path) -> None:
    path = local_journal(tmp_path)
    a = analyse_journal(path, "mibs")
    raw = _raw_means(path)
    assert {lb.case for lb in a.leaderboards} == {"read random 4k", "write seq 4k"}
    for lb in a.leaderboards:
        values = [r.value for r in lb.rows]
        assert values == sorted(values, reverse=True)
        for r in lb.rows:
            assert r.value == pytest.approx(raw[r.test.id])
            assert len(r.test.measured) == 2 and any(run.warmup for run in r.test.runs)  # warm-up shown, not ranked
        # the badge: first place only, and only when it is significantly ahead of the runner-up (Holm)
        assert [r.is_winner for r in lb.rows] == [lb.separated] + [False] * (len(lb.rows) - 1)
        assert lb.separated == bool(lb.rows[1].vs_first and lb.rows[1].vs_first.significant)
        assert lb.best_baseline is not None and lb.best_baseline.target == "scratch-a"


def test_ratios_vs_first_and_baseline(tmp_path: Path) -> None:
    a = analyse_journal(local_journal(tmp_path), "mibs")
    lb = a.leaderboards[0]
    second = lb.rows[1]
    assert second.vs_first is not None
    assert second.vs_first.factor == pytest.approx(second.value / lb.rows[0].value)
    assert "Welch p" not in second.vs_first.text and f"× [{second.vs_first.low:.2f}–" in second.vs_first.text
    assert second.vs_first.low <= second.vs_first.factor <= second.vs_first.high  # the ratio with its 95 % interval
    for r in lb.rows:
        if r.vs_first and "faster" in r.vs_first.text:
            assert r.vs_first.significant  # no "faster" claim without a significant (Holm-corrected) test


def test_rank_by_p99_is_ascending_and_durable_uses_wall_ramp_drain(tmp_path: Path) -> None:
    path = local_journal(tmp_path)
    p99 = analyse_journal(path, "p99")
    vals = [r.value for r in p99.leaderboards[0].rows]
    assert vals == sorted(vals)
    corr = analyse_journal(path, "corrected")
    t = corr.leaderboards[0].rows[0].test
    run = t.measured[0]
    con = sqlite3.connect(path)
    io, wall, drain = con.execute(
        "SELECT json_extract(metrics, '$.\"total.io_bytes\"'), wall_s, drain_s FROM runs WHERE id=?", (run.row_id,)
    ).fetchone()
    assert run.values["durable_mibs"] == pytest.approx(io / (wall - t.ramp + (drain or 0)) / MIB)
    assert corr.rank_by == "durable_mibs" and all(lb.metric == "durable_mibs" for lb in corr.leaderboards)


def test_local_journal_warnings(tmp_path: Path) -> None:
    a = analyse_journal(local_journal(tmp_path))
    codes = {w.code for w in a.warnings}
    assert "timing-issue" in codes and "emulated" not in codes
    timing = next(w for w in a.warnings if w.code == "timing-issue")
    assert timing.fix and timing.run_rows
    assert all(w.fix for w in a.warnings)


def test_imported_lab_journal_warnings(tmp_path: Path) -> None:
    a = analyse_journal(imported_journal(tmp_path))
    codes = {w.code for w in a.warnings}
    assert {"emulated", "compressible-buffers", "single-run", "wall-unknown", "zfs-not-measured"} <= codes
    assert a.emulated
    comp = next(w for w in a.warnings if w.code == "compressible-buffers")
    assert len(comp.test_ids) == 1  # only the job with buffer_compress_percentage=50
    zvol = [t for t in a.dataset.tests if t.target_kind == "zvol"]
    assert len(zvol) == 2


def test_goals_and_mix_from_campaign(tmp_path: Path) -> None:
    a = analyse_journal(local_journal(tmp_path))
    assert a.goals and a.goals[0].goal.name == "enough random reads"
    assert all(v >= 1000 for _, v, _ in a.goals[0].passing)
    assert a.mix is not None and a.mix.entries[0].expected is not None
    top = a.mix.entries[0]
    parts = [(w, v) for _, w, v, _ in top.parts]
    assert top.expected == pytest.approx(1 / sum(w / v for w, v in parts if v))
    expected = [e.expected for e in a.mix.entries if e.expected is not None]
    assert expected == sorted(expected, reverse=True)


def test_axis_comparisons_and_recommendations(tmp_path: Path) -> None:
    a = analyse_journal(local_journal(tmp_path))
    axes = {c.axis for c in a.comparisons}
    assert {"direct vs buffered", "iodepth"} <= axes
    texts = [r.text for r in a.recommendations]
    assert any(t.startswith("read random 4k:") for t in texts)
    assert all(r.basis or r.kind == "method" for r in a.recommendations)
    ids = {t.id for t in a.dataset.tests}
    assert all(set(r.basis) <= ids for r in a.recommendations)


def test_bad_input(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="unknown --rank-by"):
        analyse_journal(local_journal(tmp_path), "fastest")
    with pytest.raises(UserError, match="no journal at"):
        analyse_journal(str(tmp_path / "missing.sqlite"))
