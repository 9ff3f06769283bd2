"""The guest-vs-host tables (seeds 001 and 003) from a real lab journal: backings side by side with the host,
the sync findings, and the same tables in every output."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openpyxl

from tankbench.analysis.analyse import analyse_journal
from tankbench.analysis.checks import Warning
from tankbench.analysis.guest import CheckCount, setup_text
from tankbench.analysis.leaderboard import condemned
from tankbench.reports.json import analysis_dict
from tankbench.reports.markdown import summary_markdown
from tankbench.reports.xlsx import write_xlsx
from tests.reportdata import lab_vmdisk_journal, lab_zfs_journal


def test_one_table_per_workload_with_every_backing_and_the_host(tmp_path: Path) -> None:
    a = analyse_journal(lab_vmdisk_journal(tmp_path))
    assert len(a.guests) == 2  # ioengine sync and libaio: two workloads of one test case
    for g in a.guests:
        assert g.case == "write random 4k" and "ioengine" in g.workload
        sides = [r.side for r in g.rows]
        assert sides == ["guest"] * 4 + ["host"], sides  # guests ranked first, then the host's zvol
        backings = sorted(r.setup.split(",")[0] for r in g.rows if r.side == "guest")
        assert backings == ["qcow2 cluster 64k", "qcow2 cluster 8k", "raw", "zvol"]
        assert g.best_host is not None and g.best_host.target_kind == "zvol"
        values = [r.test.mean(g.metric) for r in g.rows if r.side == "guest"]
        assert values == sorted(values, reverse=True)  # ranked by the case's figure
        for r in g.rows:
            assert r.honoured.n == 1  # every measured run recorded the sync check
            if r.side == "guest":
                assert r.vs_host is not None
                assert abs(r.vs_host.factor - r.test.mean(g.metric) / g.best_host.mean(g.metric)) < 1e-9
            else:
                assert r.vs_host is None


def test_no_guest_tables_without_vm_disk_tests(tmp_path: Path) -> None:
    assert analyse_journal(lab_zfs_journal(tmp_path)).guests == ()


def test_the_tables_in_markdown_json_and_xlsx(tmp_path: Path) -> None:
    a = analyse_journal(lab_vmdisk_journal(tmp_path))
    md = summary_markdown(a)
    guests = md.split("## Guest disks beside the host", 1)[1].split("\n## ", 1)[0]
    assert guests.count("### write random 4k (") == 2
    assert "| sync honoured | acknowledged before durable |" in md
    assert "test guest: qemu TCG (emulated) inside it" in md  # both layers in the banner
    doc = json.loads(json.dumps(analysis_dict(a), default=str))
    rows = [r for t in doc["guest_tables"] for r in t["rows"]]
    assert len(rows) == 10 and all(r["sync_honoured"]["runs"] == 1 for r in rows)
    assert all(r["zil_commits"] is not None and r["zil_commits"] >= 1 for r in rows)
    write_xlsx(a, str(tmp_path / "r.xlsx"))
    ws = openpyxl.load_workbook(tmp_path / "r.xlsx")["guest vs host"]
    cells = list(ws.iter_rows(values_only=True))
    assert str(cells[0][0]).startswith("write random 4k (") and cells[1][10] == "sync honoured"
    assert isinstance(cells[2][4], float) and cells[2][2] == "guest"  # numbers stay numbers in the spreadsheet


def test_check_counts_and_setup_text() -> None:
    assert CheckCount(0, 0).text == "not recorded"
    assert CheckCount(1, 1).text == "yes" and CheckCount(3, 3).text == "yes (3/3)"
    assert CheckCount(0, 2).text == "no" and CheckCount(1, 3).text == "1/3 runs"


def test_setup_text_names_the_backing_then_the_settings(tmp_path: Path) -> None:
    a = analyse_journal(lab_vmdisk_journal(tmp_path))
    texts = {t.name: setup_text(t) for t in a.dataset.tests}
    assert texts["zfs-vm-qcow2-8k-randwrite-4k-sync"].startswith("qcow2 cluster 8k, bus virtio-scsi")
    assert texts["zfs-zvol-randwrite-4k-sync"].startswith("zvol, volblocksize 8k")


def _warnings(path: str, code: str) -> list[Warning]:
    return [w for w in analyse_journal(path).warnings if w.code == code]


def _edit_first_run(path: str, column: str, key: str, edit: Callable[[dict[str, Any]], None]) -> int:
    """Apply `edit` to the JSON `column` (checks or metrics) of the journal's first done run that has `key` in
    it, write it back; the run's row id."""
    db = sqlite3.connect(path)
    try:
        row, text = db.execute(
            f"SELECT id, {column} FROM runs WHERE status = 'done' AND {column} LIKE ? ORDER BY id LIMIT 1",
            (f"%{key}%",),
        ).fetchone()
        values = json.loads(text)
        edit(values)
        with db:
            db.execute(f"UPDATE runs SET {column} = ? WHERE id = ?", (json.dumps(values), row))
        return int(row)
    finally:
        db.close()


def test_a_disk_qemu_set_up_otherwise_is_an_error_naming_the_run(tmp_path: Path) -> None:
    path = lab_vmdisk_journal(tmp_path)
    assert not _warnings(path, "qemu-settings-mismatch")

    def mismatch(c: dict[str, Any]) -> None:
        c["guest.settings_match"] = False
        c["guest.settings_mismatch"] = ["disk_cache none: qemu's cache mode is writeback"]

    row = _edit_first_run(path, "checks", "guest.qemu", mismatch)
    (w,) = _warnings(path, "qemu-settings-mismatch")
    assert w.severity == "error" and w.run_rows == (row,) and len(w.test_ids) == 1


def test_the_final_fsync_is_not_taken_for_a_runtime_that_differs(tmp_path: Path) -> None:
    """fio counts end_fsync in its runtime (3 s of I/O + 1–2 s of fsync here): only an I/O phase of another
    length than the campaign's runtime is a mismatch."""
    path = lab_vmdisk_journal(tmp_path)
    assert not _warnings(path, "fio-runtime-mismatch")

    def no_fsync_figure(m: dict[str, Any]) -> None:
        assert m["fio.runtime_s"] - m["sync.end_fsync_s"] < m["fio.runtime_s"] - 0.9  # a real fsync tail
        del m["sync.end_fsync_s"]

    row = _edit_first_run(path, "metrics", "sync.end_fsync_s", no_fsync_figure)
    (w,) = _warnings(path, "fio-runtime-mismatch")
    assert w.run_rows == (row,)


def test_a_run_whose_drain_did_not_finish_is_warned_of(tmp_path: Path) -> None:
    # the agent records drain.incomplete when `zpool sync` failed or ran past drain_max, or a job file could not
    # be written back: its drain time and durable MiB/s understate the writes' cost
    path = lab_zfs_journal(tmp_path)
    assert not _warnings(path, "drain-incomplete")

    def failed(c: dict[str, Any]) -> None:
        c["drain.incomplete"] = "zpool sync tank exited 1: cannot open 'tank': no such pool"

    row = _edit_first_run(path, "checks", "drain.dirty_end_bytes", failed)
    (w,) = _warnings(path, "drain-incomplete")
    assert w.severity == "warning" and w.run_rows == (row,) and "drain.incomplete" in w.message


def test_a_run_that_measured_another_configuration_condemns_its_test(tmp_path: Path) -> None:
    """The runner marks a run `valid = false` with its reasons (a property that did not take, a SLOG state against
    the axis, a scrub); the report ranked such runs as usual and said nothing (found in the lab: special_small_blocks
    compared as "16k" with 16384). Now an error-level warning names the run and its reasons, so the test is never
    recommended."""
    path = lab_vmdisk_journal(tmp_path)
    assert not _warnings(path, "invalid-runs")

    def invalid(c: dict[str, Any]) -> None:
        c["valid"] = False
        c["validity.reasons"] = ["properties did not take: expected {'special_small_blocks': '16k'}"]

    row = _edit_first_run(path, "checks", "guest.qemu", invalid)
    (w,) = _warnings(path, "invalid-runs")
    assert w.severity == "error" and w.run_rows == (row,) and len(w.test_ids) == 1
    assert "properties did not take: expected {'special_small_blocks': '16k'}" in w.message, w.message
    assert w.test_ids[0] in condemned(analyse_journal(path).warnings)
