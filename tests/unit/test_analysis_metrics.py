"""One definition per number: the registry (tankbench.metrics), its docs, and every output using it."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import pytest

from tankbench.analysis.analyse import analyse_journal
from tankbench.analysis.present import beside
from tankbench.analysis.sections.runs import header
from tankbench.cli.results import result_rows
from tankbench.journal.db import Journal
from tankbench.metrics import (
    METRICS,
    MIB,
    REGISTRY,
    SUPERSEDED,
    Times,
    copy_metrics,
    derive,
    metrics_markdown,
    raw_keys,
    resolve,
    run_values,
)
from tankbench.reports.csv import write_csv
from tankbench.reports.html import render_html
from tankbench.reports.json import analysis_dict
from tankbench.reports.markdown import summary_markdown
from tests.reportdata import lab_zfs_journal

ROOT = Path(__file__).resolve().parents[2]


def _runs(path: str) -> list[tuple[dict[str, float], float, float, float, float]]:
    """(metrics, wall_s, expected_s, drain_s, ramp) of every done run, straight from SQLite."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    out = []
    for m, wall, exp, drain, canon in con.execute(
        "SELECT r.metrics, r.wall_s, r.expected_s, r.drain_s, t.canonical FROM runs r JOIN tests t "
        "ON t.id = r.test_id WHERE r.status = 'done'"
    ):
        out.append((json.loads(m), wall, exp, drain, float(json.loads(canon).get("ramp", 0.0))))
    con.close()
    return out


def test_docs_metrics_md_is_generated_from_the_registry() -> None:
    assert (ROOT / "docs" / "metrics.md").read_text() == metrics_markdown(), (
        "regenerate: python -m tankbench.metrics > docs/metrics.md"
    )
    for m in REGISTRY:
        assert f"| `{m.key}` |" in metrics_markdown() and m.formula and m.source and m.unit is not None


def test_keys_are_unique_and_aliases_resolve() -> None:
    assert len(METRICS) == len(REGISTRY)
    assert resolve("corrected") == resolve("durable") == "durable_mibs" and resolve("p99") == "p99_ms"
    assert resolve("speed") is None
    assert "total.io_bytes" in raw_keys(("durable_mibs",)) and "total.bw_bytes" not in raw_keys(("durable_mibs",))


def test_durable_is_io_over_wall_minus_ramp_plus_drain_on_real_runs(tmp_path: Path) -> None:
    """The runner stored io/wall as 'corrected'; the registry's durable figure is io/(wall − ramp + drain)."""
    runs = _runs(lab_zfs_journal(tmp_path))
    assert len(runs) == 36
    for m, wall, exp, drain, ramp in runs:
        v = run_values(m, Times(wall, exp, ramp, drain))
        assert v["durable_mibs"] == pytest.approx(m["total.io_bytes"] / (wall - ramp + drain) / MIB)
        assert v["mibs"] == pytest.approx(m["total.bw_bytes"] / MIB)
        assert v["durable_mibs"] != pytest.approx(m["timing.corrected_bw_bytes"] / MIB)  # the old io/wall
        stored = derive(m, wall_s=wall, expected_s=exp, ramp_s=ramp, drain_s=drain, is_copy=False)
        assert stored["timing.durable_bw_bytes"] / MIB == pytest.approx(v["durable_mibs"])
        assert stored["timing.excess_s"] == pytest.approx(wall - exp, abs=1e-4) == pytest.approx(v["excess_s"])
        if "zfs.physical_bytes_written" in m and m.get("zfs.logical_bytes_written"):
            assert v["physical_per_logical"] == pytest.approx(
                m["zfs.physical_bytes_written"] / m["zfs.logical_bytes_written"]
            )
            assert v["arc_mfu_hits"] == m["arc.mfu_hits"] and v["compressratio"] == m["zfs.compressratio"]


def test_copy_runs_have_copy_keys_and_no_fio_figures() -> None:
    m = copy_metrics(64 << 20, 2.0, 6.0)
    assert not any(k.startswith(("total.", "write.", "read.", "timing.")) for k in m)
    v = run_values(m, Times(2.0, 0.0, 0.0, 6.0))
    assert v["durable_mibs"] == pytest.approx(64 / 8.0) and v["copy_mibs"] == pytest.approx(32.0)
    assert v["mibs"] is None and v["iops"] is None and v["excess_s"] is None  # a copy has no expected time
    old = dict(m, **{"total.bw_bytes": 32.0 * MIB, "total.io_bytes": float(64 << 20)})  # an older journal's copy run
    assert run_values(old, Times(2.0, 0.0, 0.0, 6.0))["mibs"] is None
    assert derive(m, wall_s=2.0, expected_s=0.0, ramp_s=0.0, drain_s=6.0, is_copy=True) == {}


def test_default_leaderboard_ranks_late_cases_by_durable_and_shows_fio_beside(tmp_path: Path) -> None:
    """Issue 9: a buffered zvol write that finished late must not be crowned by fio's MiB/s."""
    path = lab_zfs_journal(tmp_path)
    by_fio = analyse_journal(path, "mibs")
    auto = analyse_journal(path)
    assert auto.rank_by == "auto"
    lb = next(b for b in auto.leaderboards if b.case == "write seq 4k")
    fio_lb = next(b for b in by_fio.leaderboards if b.case == "write seq 4k")
    assert lb.metric == "durable_mibs" and "finished late" in lb.reason and fio_lb.metric == "mibs"
    assert "mibs" in beside(lb) and "durable_mibs" in beside(fio_lb)
    zvol = "zfs-zvol-write-4k-async"
    fio_rank = next(r.rank for r in fio_lb.rows if r.test.name == zvol)
    auto_row = next(r for r in lb.rows if r.test.name == zvol)
    assert auto_row.rank >= fio_rank
    assert auto_row.value == pytest.approx(auto_row.test.mean("durable_mibs"))
    assert auto_row.test.mean("durable_mibs") < 0.3 * auto_row.test.mean("mibs")  # 16 s wall for 3 s runtime
    page = render_html(auto)
    assert 'data-metric="durable_mibs"' in page and "Ranked by <b>durable MiB/s</b>" in page
    assert '<th><span class="ex"' in page and ">fio MiB/s</span></th>" in page
    md = summary_markdown(auto)
    assert "Ranked by **durable MiB/s**: 17 of 28 measured runs finished late" in md
    assert analysis_dict(auto)["leaderboards"][0]["reason"]


def test_every_output_uses_registry_names(tmp_path: Path) -> None:
    path = lab_zfs_journal(tmp_path)
    a = analyse_journal(path)
    out = tmp_path / "r.csv"
    write_csv(a, str(out))
    rows = list(csv.DictReader(out.open()))
    cols = header(a)
    assert {
        "mibs",
        "durable_mibs",
        "iops",
        "p99_ms",
        "compressratio",
        "physical_per_logical",
        "arc_mru_hits",
        "arc_mfu_hits",
        "recordsize",
        "volblocksize",
        "sync",
        "logbias",
        "slog",
        "compression",
        "encryption",
    } <= set(cols)
    assert "corrected_mibs" not in cols and "copy_mibs" not in cols  # no copy runs here: no empty copy column
    with Journal(path, create=False) as j:
        res = result_rows(j)
    assert not any(k in SUPERSEDED for r in res for k in r)
    by_row = {int(r["run_row_id"]): r for r in rows}
    for r in res:
        assert float(by_row[r["run_id"]]["durable_mibs"]) == pytest.approx(r["durable_mibs"])
