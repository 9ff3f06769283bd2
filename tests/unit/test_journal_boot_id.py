"""Who crashed (issue 9 item 3): a host crash counts toward skipping a test, a killed tankbench does not."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from tankbench.journal import Journal, host_crash_count, stale_run_status
from tankbench.journal.migrations import SCHEMA_VERSION
from tankbench.model import Run
from tests.reportdata import LAB_ZFS_JOURNAL, LOCAL_JOURNAL

BOOT_A = "0c6f3a52-6f1e-4a57-9c0c-3c1f4c2f7a11"
BOOT_B = "f2d3b1e0-1111-4c4c-8888-9a9a9a9a9a9a"


def run(status: str) -> Run:
    return Run(
        test_id="t",
        run_no=1,
        warmup=False,
        attempt=1,
        status=status,
        started=0.0,
        ended=1.0,
        host="h",
        fingerprint_id="",
        expected_s=1.0,
    )


def test_stale_run_status() -> None:
    assert stale_run_status(BOOT_A, BOOT_A) == "interrupted"
    assert stale_run_status(BOOT_A, BOOT_B) == "crashed"
    assert stale_run_status("", BOOT_A) == "crashed"  # a row from before boot ids were kept
    assert stale_run_status(BOOT_A, "") == "crashed"  # the host's id is unknown


def test_host_crash_count_ignores_interrupted_runs() -> None:
    runs = [run("interrupted"), run("interrupted"), run("interrupted"), run("done"), run("crashed")]
    assert host_crash_count(runs) == 1
    assert host_crash_count([run("crashed"), run("crashed"), run("failed")]) == 2


def test_two_kills_of_tankbench_do_not_count_a_reboot_does(tmp_path: Path) -> None:
    path = str(tmp_path / "j.sqlite")
    shutil.copy(LOCAL_JOURNAL, path)
    with Journal(path) as j:
        test_id = j.tests()[0].id
        for _ in range(2):  # tankbench killed twice, host up all along
            j.begin_run(test_id, 1, False, 9, 3.0, "local", boot_id=BOOT_A)
            assert j.mark_crashed({"local": BOOT_A})[0][1:] == (test_id, None, "local")
        j.begin_run(test_id, 1, False, 9, 3.0, "local", boot_id=BOOT_A)
        j.mark_crashed({"local": BOOT_B})  # the host rebooted during this one
        runs = j.runs(test_id, with_samples=False)
    new = [r for r in runs if r.attempt == 9]
    assert [r.status for r in new] == ["interrupted", "interrupted", "crashed"]
    assert "host stayed up" in new[0].note and "host went down" in new[2].note
    assert host_crash_count(runs) == 1


def test_rows_of_other_hosts_or_without_boot_id_count_as_crashes(tmp_path: Path) -> None:
    with Journal(str(tmp_path / "j.sqlite")) as j:
        j.conn.execute("INSERT INTO tests VALUES ('t','c',1,'n','tg','file','read seq 4k','{}','','')")
        j.begin_run("t", 1, False, 1, 3.0, "ssh:root@a", boot_id=BOOT_A)
        j.begin_run("t", 2, False, 1, 3.0, "local")
        j.mark_crashed({"local": BOOT_A})
        assert [r.status for r in j.runs("t")] == ["crashed", "crashed"]


def test_old_journals_migrate_and_stay_readable(tmp_path: Path) -> None:
    for golden in (LOCAL_JOURNAL, LAB_ZFS_JOURNAL):
        conn = sqlite3.connect(f"file:{golden}?mode=ro", uri=True)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
        conn.close()
        with Journal.open_readonly(str(golden)) as ro:  # read as it is, without migrating it
            n_runs = len(ro.runs(with_samples=False))
        assert n_runs > 0
        path = tmp_path / golden.name
        shutil.copy(golden, path)
        with Journal(str(path)) as j:
            assert j.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
            assert {r[1] for r in j.conn.execute("PRAGMA table_info(runs)")} >= {"boot_id"}
            assert len(j.runs(with_samples=False)) == n_runs
            assert {r[0] for r in j.conn.execute("SELECT DISTINCT boot_id FROM runs")} == {""}


def test_agent_probe_reports_the_boot_id() -> None:
    from tankbench.hosts.local import LocalHost

    host = LocalHost()
    try:
        res = host.call_agent({"op": "probe"}, timeout=120)
    finally:
        host.close()
    assert res["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert len(res["boot_id"]) == 36
