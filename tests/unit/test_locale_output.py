"""Under a locale whose encoding cannot show …, —, – or × (LC_ALL=C without Python's UTF-8 coercion, or Latin-1),
no command crashes on printing them (QA F2): they come out as backslash escapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import tankbench

ASCII = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}


@pytest.mark.parametrize("args", [("plan", "quickstart"), ("run", "--help"), ("presets", "show", "zvol-issues")])
def test_ascii_locale_prints_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...]
):
    monkeypatch.delenv("PYTHONIOENCODING", raising=False)
    res = tankbench(*args, cwd=tmp_path, env=ASCII)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    assert res.stdout.isascii() and "\\u20" in res.stdout, res.stdout[:500]  # …, —, – as escapes


def test_an_error_still_reaches_stderr_under_an_ascii_locale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("PYTHONIOENCODING", raising=False)
    res = tankbench("plan", str(tmp_path / "nope….toml"), cwd=tmp_path, env=ASCII)
    assert res.returncode == 2 and res.stderr.startswith("Error: campaign file not found: "), res.stderr
