"""Faults of the machine running tankbench are errors, not tracebacks (issue 34 item 4): the journal's filesystem
fills mid-campaign (a real tmpfs with size=), the run stops with `Error:` naming the cause and what to do, exit 3;
after space is freed the same command resumes with no run lost and none twice."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import journal_rows, tankbench
from tests.integration.test_run_local import write_campaign


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs of our own (root: mount), unmounted afterwards (only ours, by its path)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0755", "tankbench-test-small", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(directory: Path) -> Path:
    """Fill a filesystem to the last byte with one file (ENOSPC ends it)."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        while os.write(fd, b"\xa5" * 512):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


def done_rows(j: Path) -> list[tuple[str, int, int]]:
    conn = sqlite3.connect(j)
    try:
        return conn.execute("SELECT test_id, run_no, warmup FROM runs WHERE status = 'done' ORDER BY id").fetchall()
    finally:
        conn.close()


def test_journal_filesystem_fills_mid_campaign_then_resumes(tmp_path: Path, small_fs: Path) -> None:
    c = write_campaign(tmp_path, runtime="1s", repeats=2, rw='["read", "write"]')
    j = small_fs / "j.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tankbench", "run", str(c), "--journal", str(j), "--no-report"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if len(journal_rows(j, "SELECT 1 FROM runs WHERE status = 'done'")) >= 3:
            break
        time.sleep(0.1)  # polling the journal until three runs are in
    assert proc.poll() is None, "".join(proc.communicate())
    filler = fill(small_fs)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 3, out + err
    assert "Traceback" not in err, err
    last = err.splitlines()[-2:]  # the progress lines come first
    assert last[0].startswith(f"Error: cannot write the journal {j}: the filesystem under it is full"), err
    assert last[1].startswith(f"Hint: free space in {small_fs}") and "the run in flight is marked for a rerun" in err
    kept = done_rows(j)
    assert len(kept) >= 3
    filler.unlink()
    again = tankbench("run", str(c), "--journal", str(j), "--no-report", cwd=tmp_path, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    after = done_rows(j)
    assert after[: len(kept)] == kept, "every run that finished before the disk filled is kept"
    measured = [(t, n) for t, n, w in after if not w]
    assert len(measured) == 8 and len(set(measured)) == 8, "4 tests x 2 repeats: none lost, none twice"
    assert not os.path.exists(f"{j}.lock")


def test_a_read_only_filesystem_under_the_journal_is_an_error(tmp_path: Path) -> None:
    """`run` with its journal on a read-only mount (a private mount namespace): `Error:` with the cause, exit 3."""
    c = write_campaign(tmp_path)
    src = tmp_path / "src"
    src.mkdir()
    mnt = tmp_path / "ro"
    mnt.mkdir()
    script = (
        f"mount --bind {src} {mnt} && mount -o remount,bind,ro {mnt} && "
        f"exec {sys.executable} -m tankbench run {c} --journal {mnt}/j.sqlite"
    )
    r = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert f"Error: cannot create the lock file {mnt}/j.sqlite.lock: Read-only file system" in r.stderr, r.stderr
    assert os.listdir(src) == []


def test_a_full_filesystem_under_the_report_is_an_error(tmp_path: Path, small_fs: Path) -> None:
    from tests.reportdata import lab_zfs_journal

    j = lab_zfs_journal(tmp_path)
    fill(small_fs)
    r = tankbench("report", "--journal", j, "--out", str(small_fs / "rep"))
    assert r.returncode == 3, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.startswith(f"Error: cannot write the report {small_fs}/rep"), r.stderr
    assert "No space left on device (0.0 MiB free on its filesystem)" in r.stderr, r.stderr
    assert "Hint: free space there or make it writable, or write it elsewhere (--out DIR)" in r.stderr
