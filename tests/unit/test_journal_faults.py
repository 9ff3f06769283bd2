"""The journal's writes under faults of the machine (issue 34 item 4): real SQLite errors become one LocalError
with the cause and what to do (exit 3), never "cannot rollback - no transaction is active" chained to the first."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest

from tankbench.errors import LocalError
from tankbench.journal.db import Journal
from tankbench.journal.faults import is_fault, journal_fault, output_fault


def test_a_full_journal_is_an_error_with_its_cause_and_nothing_half_written(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    j = Journal(str(path))
    pages = j.conn.execute("PRAGMA page_count").fetchone()[0]
    j.conn.execute(f"PRAGMA max_page_count = {pages + 1}")  # SQLite's own "database or disk is full"
    with pytest.raises(LocalError) as e:
        for n in range(200):
            j.add_campaign(f"c{n}", "x" * 2000, "/c.toml", "y" * 4000)
    assert e.value.exit_status == 3
    assert e.value.message.startswith(f"cannot write the journal {path}: the filesystem under it is full")
    assert "database or disk is full" in e.value.message and " free on its filesystem)" in e.value.message
    assert "the run in flight is marked for a rerun" in e.value.hint
    assert isinstance(e.value.__cause__, sqlite3.OperationalError)
    assert e.value.__cause__.__context__ is None, "no second error (a ROLLBACK of a rolled-back transaction)"
    assert not j.conn.in_transaction
    kept = j.conn.execute("SELECT count(*) FROM campaigns").fetchone()[0]
    assert 0 < kept < 200
    j.close()
    assert len(Journal.open_readonly(str(path)).campaigns()) == kept, "what was committed stays"


def test_a_journal_locked_by_another_process_names_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    j = Journal(str(path))
    j.conn.execute("PRAGMA busy_timeout = 0")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(LocalError) as e:
            j.add_campaign("c", "n", "/c.toml", "")
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert e.value.message == f"cannot write the journal {path}: another process holds it locked (database is locked)"
    assert e.value.hint.startswith(f"find it with `fuser -v {path}`")
    j.add_campaign("c", "n", "/c.toml", "")  # the lock gone, the same journal takes the write
    j.close()


def test_a_read_only_journal_says_so(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    Journal(str(path)).close()
    j = Journal.open_readonly(str(path))
    with pytest.raises(LocalError) as e:
        j.add_campaign("c", "n", "/c.toml", "")
    assert "the file or its directory is not writable (attempt to write a readonly database" in e.value.message
    j.close()


def test_only_faults_of_the_machine_are_faults() -> None:
    assert is_fault(OSError(errno.ENOSPC, "No space left on device"))
    assert is_fault(OSError(errno.EROFS, "Read-only file system"))
    assert not is_fault(OSError(errno.ENOENT, "No such file or directory"))
    assert not is_fault(sqlite3.IntegrityError("UNIQUE constraint failed"))
    assert not is_fault(ValueError("x"))


def test_output_fault_names_the_file_the_cause_and_the_fix(tmp_path: Path) -> None:
    e = output_fault(
        str(tmp_path / "r" / "index.html"), OSError(errno.ENOSPC, "No space left on device"), "the report", "free space"
    )
    assert e.message.startswith(f"cannot write the report {tmp_path}/r/index.html: No space left on device (")
    assert e.hint == f"free space (in {tmp_path})" and e.exit_status == 3
    busy = journal_fault("/x/j.sqlite", sqlite3.OperationalError("database is locked"))
    assert "another process holds it locked" in busy.message
