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


def test_a_new_journal_appears_whole_never_half_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`show` from another shell while `run` starts read the new file before its tables were written and said
    'not a tankbench journal' (a CI failure): the schema is written beside it and linked into place."""
    import tankbench.journal.db as db

    path = tmp_path / "j.sqlite"
    seen: list[bool] = []
    real = db.migrate

    def watching(conn: sqlite3.Connection) -> int:
        seen.append(path.exists())  # what a reader in another shell would find while the schema is written
        return real(conn)

    monkeypatch.setattr(db, "migrate", watching)
    Journal(str(path)).close()
    assert seen[0] is False  # the first migration (the new file's schema) ran while the path did not exist yet
    db.check_journal_file(str(path)).close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j.sqlite"]  # nothing left beside it
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_journal_linked_first_by_another_run_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tankbench.journal.db as db

    path = tmp_path / "j.sqlite"
    other = tmp_path / "other.sqlite"
    j = Journal(str(other))
    j.close()
    real = db.migrate

    def racing(conn: sqlite3.Connection) -> int:
        if not path.exists():
            shutil.copy(other, path)  # another run's journal lands first
        return real(conn)

    monkeypatch.setattr(db, "migrate", racing)
    before = path.read_bytes() if path.exists() else None
    Journal(str(path)).close()
    assert before is None and path.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j.sqlite", "other.sqlite"]
