"""JournalLock: one `run` per journal; refused journals leave no `.lock`; it removes only what it created."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from tankbench.errors import UserError
from tankbench.journal.db import Journal
from tankbench.journal.lock import JournalLock
from tests.reportdata import LAB_ZFS_JOURNAL


def test_lock_on_new_journal_is_created_and_removed(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "j.sqlite"
    with JournalLock(str(path)) as lock:
        assert Path(lock.path).read_text().isdigit()
        with pytest.raises(UserError, match=r"another `tankbench run` is using .*j\.sqlite"):
            with JournalLock(str(path)):
                pass
        Journal(str(path)).close()
    assert sorted(p.name for p in path.parent.iterdir()) == ["j.sqlite"]


def test_lock_can_be_taken_again_after_release(tmp_path: Path) -> None:
    path = str(tmp_path / "j.sqlite")
    for _ in range(2):
        with JournalLock(path):
            pass


@pytest.mark.parametrize("content", [b"", b"my notes\n"])
def test_refused_journal_leaves_no_lock(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "j.sqlite"
    path.write_bytes(content)
    with pytest.raises(UserError, match="not a tankbench journal"):
        with JournalLock(str(path)):
            pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j.sqlite"]
    assert path.read_bytes() == content


def test_newer_journal_leaves_no_lock(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    shutil.copy(LAB_ZFS_JOURNAL, path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 999")
    conn.close()
    with pytest.raises(UserError, match="journal written by a newer tankbench"):
        with JournalLock(str(path)):
            pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j.sqlite"]


def test_existing_lock_file_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    lock = tmp_path / "j.sqlite.lock"
    lock.write_text("12345")  # e.g. left by an older tankbench
    with JournalLock(str(path)):
        pass
    assert lock.read_text() == "12345"
