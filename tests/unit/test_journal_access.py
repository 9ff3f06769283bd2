"""A journal in a directory this user may not enter is not "no journal" (QA F6): os.path.exists() says False on
EACCES, which sent the user to `tankbench run` for a journal that is there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tankbench.errors import UserError
from tankbench.journal.db import Journal, check_journal_file
from tests.conftest import FIXTURES


def _denied(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    real = os.stat

    def stat(p: Any, *a: Any, **kw: Any) -> os.stat_result:
        if os.fspath(p) == str(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real(p, *a, **kw)

    monkeypatch.setattr(os, "stat", stat)


def test_check_journal_file_tells_permission_denied_from_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    j = tmp_path / "j.sqlite"
    shutil.copy(FIXTURES / "journal-local-file.sqlite", j)
    _denied(monkeypatch, j)
    with pytest.raises(UserError) as e:
        check_journal_file(str(j))
    assert e.value.message == f"cannot read journal {j}: Permission denied"
    assert "permissions of the file and of its directory" in e.value.hint
    with pytest.raises(UserError, match="cannot read journal .*: Permission denied"):
        Journal(str(j))
    with pytest.raises(UserError, match="no journal at"):
        check_journal_file(str(tmp_path / "missing.sqlite"))


def test_show_on_a_journal_in_a_directory_this_user_cannot_enter(tmp_path: Path):
    d = tmp_path / "locked"
    d.mkdir()
    j = d / "journal.sqlite"
    shutil.copy(FIXTURES / "journal-local-file.sqlite", j)
    d.chmod(0)
    argv = [sys.executable, "-m", "tankbench", "show", "--journal", str(j)]
    if os.geteuid() == 0:  # root enters mode-000 directories: drop the two capabilities that let it (util-linux)
        argv = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", *argv]
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    finally:
        d.chmod(0o700)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.startswith(f"Error: cannot read journal {j}: Permission denied\n"), res.stderr
    assert "Hint: check the permissions of the file and of its directory" in res.stderr
