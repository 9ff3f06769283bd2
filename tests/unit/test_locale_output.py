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


def test_presets_are_read_as_utf8_whatever_the_locale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """TOML is UTF-8 (QA F3): under an ASCII locale `presets` crashed decoding the files, under Latin-1 it showed
    mojibake; the descriptions must be the files' own text."""
    import json
    import tomllib

    from tankbench.cli.presets import preset_files

    monkeypatch.delenv("PYTHONIOENCODING", raising=False)
    res = tankbench("presets", "--json", cwd=tmp_path, env=ASCII)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    want = {f.name[: -len(".toml")]: tomllib.loads(f.read_bytes().decode("utf-8")) for f in preset_files()}
    got = {r["name"]: r["description"] for r in json.loads(res.stdout)}
    assert got == {n: d["campaign"].get("description", "") for n, d in want.items()}
    assert any(not f.read_bytes().isascii() for f in preset_files())  # the case that crashed
    res = tankbench("presets", cwd=tmp_path, env=ASCII)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
