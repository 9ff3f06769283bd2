"""The real lab journal (OpenZFS 2.3 under TCG): ZFS warnings, zvol/dataset/SLOG/recordsize axes, ARC series."""

from __future__ import annotations

from pathlib import Path

from tankbench.analysis.analyse import analyse_journal
from tankbench.analysis.detail import with_run_detail
from tankbench.journal.db import Journal
from tankbench.reports.html import render_html
from tests.reportdata import lab_zfs_journal


def test_zfs_warnings_from_real_checks(tmp_path: Path) -> None:
    a = analyse_journal(lab_zfs_journal(tmp_path))
    by = {w.code: w for w in a.warnings}
    assert a.emulated and "zfs-not-measured" not in by
    assert {"direct-ignored", "working-set-in-arc", "arc-hits", "runtime-vs-txg"} <= set(by)
    kinds = {t.id: t.target_kind for t in a.dataset.tests}
    assert {kinds[i] for i in by["direct-ignored"].test_ids} == {"zvol"}  # O_DIRECT on a zvol goes through the ARC
    assert all(kinds[i] == "dataset" for i in by["sparse-file"].test_ids)  # block devices have no allocated size
    # issue 10: runs 14 and 24 allocated 41.8M/46.1M of 64M at compressratio 1.63/1.73: compressed, not sparse
    assert 14 not in by["sparse-file"].run_rows and 24 not in by["sparse-file"].run_rows
    assert 15 in by["sparse-file"].run_rows  # 38.7M of 64M at compressratio 1.01 is short
    assert by["compressed-writes"].test_ids  # lz4 compressed fio's buffers 1.47-1.73x: warned, with the fix
    assert "refill_buffers=1" in by["compressed-writes"].fix


def test_zfs_axes_and_cost(tmp_path: Path) -> None:
    a = analyse_journal(lab_zfs_journal(tmp_path))
    axes = {c.axis for c in a.comparisons}
    assert {"SLOG vs none", "recordsize", "sync vs fsync vs fdatasync"} <= axes
    # every zvol test here has an error-level warning of its own (direct-ignored): no comparison may call one best,
    # so "zvol vs dataset" has nothing to compare
    bad = {tid for w in a.warnings if w.severity == "error" for tid in w.test_ids}
    assert all(t.id not in bad for c in a.comparisons for _, t in c.entries) and "zvol vs dataset" not in axes
    lb = next(lb for lb in a.leaderboards if lb.case == "write seq 4k")
    assert lb.rows[0].test.is_baseline and lb.rows[0].test.target_kind == "raw"
    zvol = [r for r in lb.rows if r.test.target_kind == "zvol"]
    assert zvol and all("load1 than first place" in r.cost.text for r in zvol)


def test_html_has_arc_series_and_zvol_rows(tmp_path: Path) -> None:
    path = lab_zfs_journal(tmp_path)
    a = analyse_journal(path)
    with Journal(path, create=False) as j:
        page = render_html(with_run_detail(a, j))
    assert 'data-series="arc_hits_per_s"' in page and 'id="emulated"' in page
    assert page.count('<tr class="zvol">') == 5
