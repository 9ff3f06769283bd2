"""Journals are user files: read commands never change a byte, and refuse what is not a journal (issue 9 item 2)."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tankbench.journal.db import Journal
from tankbench.journal.migrations import SCHEMA_VERSION
from tests.conftest import ROOT, tankbench
from tests.reportdata import LAB_ZFS_JOURNAL, local_journal

READERS = [
    ("show", "--journal"),
    ("results", "--journal"),
    ("report", "--journal"),
    ("advise", "--journal"),
]


def sha256(path: Path | str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def run_reader(command: str, journal: Path | str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    extra = ["--out", str(tmp_path / "rep")] if command == "report" else []
    return tankbench(command, "--journal", str(journal), *extra)


def foreign_sqlite(path: Path) -> Path:
    """Another program's SQLite database, in rollback-journal mode."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    conn.execute("INSERT INTO notes(text) VALUES ('mine')")
    conn.commit()
    conn.close()
    return path


def siblings(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name != "rep")


def test_report_leaves_the_golden_journal_byte_identical(tmp_path: Path) -> None:
    before = sha256(LAB_ZFS_JOURNAL)
    assert LAB_ZFS_JOURNAL.read_bytes()[18:20] == b"\x01\x01", "the fixture is a rollback-mode journal"
    r = tankbench("report", "--journal", str(LAB_ZFS_JOURNAL), "--out", str(tmp_path / "rep"))
    assert r.returncode == 0, r.stderr
    assert sha256(LAB_ZFS_JOURNAL) == before
    assert not any(LAB_ZFS_JOURNAL.with_name(LAB_ZFS_JOURNAL.name + s).exists() for s in ("-wal", "-shm", ".lock"))


@pytest.mark.parametrize("command,option", READERS)
def test_reading_a_real_journal_changes_nothing(command: str, option: str, tmp_path: Path) -> None:
    path = tmp_path / "j" / "labzfs.sqlite"
    path.parent.mkdir()
    shutil.copy(LAB_ZFS_JOURNAL, path)
    before = sha256(path)
    r = run_reader(command, path, tmp_path)
    assert r.returncode == 0, r.stderr
    assert sha256(path) == before
    assert siblings(path) == ["labzfs.sqlite"]


def make_bad(kind: str, tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "j" / f"{kind}.sqlite"
    path.parent.mkdir()
    if kind == "empty":
        path.write_bytes(b"")
        return path, f"Error: {path}: not a tankbench journal (empty file)\n"
    if kind == "text":
        path.write_text("these are my notes, not a journal\n")
        return path, f"Error: {path}: not a tankbench journal (not an SQLite database)\n"
    if kind == "foreign":
        foreign_sqlite(path)
        return path, f"Error: {path}: not a tankbench journal (an SQLite database without the journal's tables)\n"
    shutil.copy(LAB_ZFS_JOURNAL, path)  # newer: a journal from a tankbench with a later schema
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    conn.close()
    return path, (
        f"Error: {path}: journal written by a newer tankbench (schema version {SCHEMA_VERSION + 5}; "
        f"this tankbench reads up to {SCHEMA_VERSION})\nHint: upgrade tankbench to read or extend this "
        "journal\n"
    )


BAD = ["empty", "text", "foreign", "newer"]


@pytest.mark.parametrize("kind", BAD)
@pytest.mark.parametrize("command,option", READERS)
def test_readers_refuse_non_journals_without_touching_them(
    kind: str, command: str, option: str, tmp_path: Path
) -> None:
    path, error = make_bad(kind, tmp_path)
    before = sha256(path)
    r = run_reader(command, path, tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.startswith(error.splitlines()[0] + "\n"), r.stderr
    assert "Hint: " in r.stderr and "Traceback" not in r.stderr
    assert sha256(path) == before
    assert siblings(path) == [path.name], "no -wal, -shm or .lock left beside it"
    assert not (tmp_path / "rep").exists()


@pytest.mark.parametrize("kind", BAD)
def test_import_refuses_non_journals_without_touching_them(kind: str, tmp_path: Path) -> None:
    path, error = make_bad(kind, tmp_path)
    before = sha256(path)
    fio = ROOT / "tests" / "fixtures" / "fio-3.33-lab" / "fio-randread-zvol-buffered.json"
    r = tankbench("import", "--journal", str(path), str(fio))
    assert r.returncode == 2 and r.stderr.startswith(error.splitlines()[0] + "\n"), r.stderr
    assert sha256(path) == before
    assert siblings(path) == [path.name]


def test_newer_journal_full_message(tmp_path: Path) -> None:
    path, error = make_bad("newer", tmp_path)
    r = tankbench("show", "--journal", str(path))
    assert (r.returncode, r.stderr) == (2, error)


def test_compare_refuses_a_foreign_file_untouched(tmp_path: Path) -> None:
    path = foreign_sqlite(tmp_path / "other.db")
    before = sha256(path)
    r = tankbench("compare", local_journal(tmp_path), str(path))
    assert r.returncode == 2 and r.stderr.startswith(f"Error: {path}: not a tankbench journal"), r.stderr
    assert sha256(path) == before and not (tmp_path / "other.db-wal").exists()


def test_show_reads_a_journal_someone_is_writing(tmp_path: Path) -> None:
    path = local_journal(tmp_path)
    with Journal(path) as writer:  # a `run` in the middle of a write transaction
        writer.conn.execute("BEGIN IMMEDIATE")
        writer.conn.execute("UPDATE tests SET skip_note='being written' WHERE number=1")
        r = tankbench("show", "--journal", path, "--json")
        writer.conn.execute("ROLLBACK")
    assert r.returncode == 0, r.stderr
    assert '"state": "done"' in r.stdout and "being written" not in r.stdout


def test_show_on_read_only_media(tmp_path: Path) -> None:
    """A WAL-mode journal on a read-only mount (no -shm can be created there): SQLite needs immutable=1."""
    src = tmp_path / "src"
    src.mkdir()
    path = src / "local.sqlite"
    shutil.copy(local_journal(tmp_path), path)
    Journal(str(path)).close()  # switches it to WAL, as `run` leaves it
    assert path.read_bytes()[18:20] == b"\x02\x02" and not (src / "local.sqlite-shm").exists()
    before = sha256(path)
    mnt = tmp_path / "ro"
    mnt.mkdir()
    script = (
        f"mount --bind {src} {mnt} && mount -o remount,bind,ro {mnt} && "
        f"exec {sys.executable} -m tankbench show --journal {mnt}/local.sqlite"
    )
    r = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 17 and " done " in r.stdout
    assert sha256(path) == before and sorted(os.listdir(src)) == ["local.sqlite"]


def test_results_csv_to_a_directory(tmp_path: Path) -> None:
    r = tankbench("results", "--journal", local_journal(tmp_path), "--csv", str(tmp_path))
    assert r.returncode == 2
    assert r.stderr == (
        f"Error: --csv {tmp_path}: is a directory\nHint: name a file, e.g. --csv {tmp_path}/results.csv\n"
    )


def test_results_csv_to_an_unwritable_place(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = tankbench("results", "--journal", local_journal(tmp_path), "--csv", str(blocker / "out.csv"))
    assert r.returncode == 2 and r.stderr.startswith(f"Error: --csv {blocker}/out.csv: cannot write"), r.stderr


def test_results_shows_no_figures_for_a_run_that_measured_nothing(tmp_path: Path) -> None:
    """A failed run has no IOPS: `results` shows '-', not '0 IOPS' beside runs that measured."""
    j = tmp_path / "j.sqlite"
    shutil.copy(LAB_ZFS_JOURNAL, j)
    conn = sqlite3.connect(j)
    failed_id = conn.execute("SELECT min(id) FROM runs WHERE warmup = 0").fetchone()[0]
    conn.execute("UPDATE runs SET status = 'failed', metrics = '{}', exit_status = 1 WHERE id = ?", (failed_id,))
    conn.commit()
    conn.close()
    r = tankbench("results", "--journal", str(j))
    assert r.returncode == 0, r.stderr
    rows = {int(line.split()[0]): line for line in r.stdout.splitlines()[1:] if line.strip()}
    failed = rows[failed_id].split()
    # … IOPS MiB/s p99 wall drain limit: a run that measured nothing has no limiter either
    assert "failed" in failed and failed[-6:-3] == ["-", "-", "-"] and failed[-1] == "-", rows[failed_id]
    done = next(line for i, line in rows.items() if i != failed_id and " done " in line).split()
    assert float(done[-6]) > 0 and "-" not in done[-6:-3] and done[-1] != "-"


# -- read-only means read-only (issue 34 item 5): a WAL journal as `run` leaves it, every reader's error path --
def listing(directory: Path) -> dict[str, str]:
    """Every file in a directory with its content's hash (a file created, changed or removed shows)."""
    return {p.name: sha256(p) if p.is_file() else "dir" for p in sorted(directory.iterdir())}


def wal_journal(directory: Path, runs: bool = True) -> Path:
    """A journal in WAL mode at rest, as a finished `run` leaves it (no -wal, no -shm beside it)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / ("local.sqlite" if runs else "empty.sqlite")
    if runs:
        shutil.copy(local_journal(directory.parent), path)
    Journal(str(path)).close()  # a writer's open and close: WAL on, nothing left beside it
    assert path.read_bytes()[18:20] == b"\x02\x02"
    assert not any(os.path.exists(f"{path}{s}") for s in ("-wal", "-shm"))
    return path


def read_only_cases(j: Path, empty: Path, tmp_path: Path) -> list[tuple[list[str], int]]:
    afile = tmp_path / "afile"
    afile.write_text("not a directory\n")
    campaign = ROOT / "tests" / "fixtures" / "bad" / "runtime-zero.toml"
    good = tmp_path / "c.toml"
    good.write_text(campaign.read_text().replace('runtime = "0s"', 'runtime = "1s"').replace("@TMP@", str(tmp_path)))
    return [
        (["report", "--journal", str(empty), "--out", str(tmp_path / "rep")], 2),  # no runs
        (["compare", str(empty), str(j)], 2),  # no runs
        (["report", "--journal", str(j), "--out", str(afile)], 2),  # the output path is a file
        (["compare", str(j), str(j.parent / "missing.sqlite")], 2),  # a missing second journal
        (["results", "--journal", str(j), "--csv", str(afile / "x.csv")], 2),
        (["advise", "--journal", str(empty)], 2),
        (["bundle", str(empty), "-o", str(tmp_path / "b.tankbench.zip")], 2),  # no runs to bundle
        (["results", "--journal", str(empty)], 0),
        (["show", "--journal", str(j), "--json"], 0),
        (["plan", str(good), "--journal", str(j)], 0),
    ]


def test_read_only_commands_leave_the_journals_directory_unchanged(tmp_path: Path) -> None:
    """Issue 34: report/compare on a journal with no runs, to an output path that is a file, or naming a missing
    second journal left -wal/-shm beside it. Every reader, in its error paths and when it succeeds, leaves the
    journal's directory exactly as it was."""
    jdir = tmp_path / "journals"
    j, empty = wal_journal(jdir), wal_journal(jdir, runs=False)
    before = listing(jdir)
    for argv, status in read_only_cases(j, empty, tmp_path):
        r = tankbench(*argv)
        assert r.returncode == status, (argv, r.stdout, r.stderr)
        assert "Traceback" not in r.stderr, r.stderr
        if status == 2:
            assert r.stderr.startswith("Error: ") and "Hint: " in r.stderr, (argv, r.stderr)
        assert listing(jdir) == before, argv


def test_a_journal_a_killed_run_left_is_read_with_its_pending_runs(tmp_path: Path) -> None:
    """A `run` killed with -9 leaves its -wal (runs not yet in the main file) and -shm: readers see those runs and
    leave both files in place."""
    jdir = tmp_path / "journals"
    j = wal_journal(jdir)
    code = (
        "import os, sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
        "c.execute('PRAGMA wal_autocheckpoint=0'); c.execute(\"UPDATE tests SET skip_note='pending' WHERE number=1\"); "
        "os.kill(os.getpid(), 9)"
    )
    subprocess.run([sys.executable, "-c", code, str(j)], check=False, timeout=60)
    assert (jdir / "local.sqlite-wal").exists()
    names = sorted(os.listdir(jdir))
    r = tankbench("show", "--journal", str(j), "--json")
    assert r.returncode == 0, r.stderr
    assert "pending" in r.stdout, "the run in the -wal is read"
    assert sorted(os.listdir(jdir)) == names
