"""The man page and the shell completions are generated from the parser: every subcommand and option is in them,
and the bash completion completes in a real bash."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import pytest

from tankbench.buildfiles import write_share
from tankbench.cli import build_parser
from tankbench.cli.completion import _subparsers, bash, man_page

ROOT = Path(__file__).resolve().parents[2]


def options(p: argparse.ArgumentParser) -> set[str]:
    return {o for a in p._actions for o in a.option_strings if o not in ("-h", "--help")}


def test_the_man_page_names_every_subcommand_and_option() -> None:
    parser = build_parser()
    page = man_page(parser, "9.9")
    assert page.startswith(".TH TANKBENCH 1") and "tankbench 9.9" in page
    for name, sub in _subparsers(parser).items():
        assert f".SS {name}" in page, name
        for opt in options(sub):
            assert opt.replace("-", "\\-") in page, (name, opt)


def complete(script: str, *words: str) -> list[str]:
    line = " ".join(f'"{w}"' for w in ("tankbench", *words))
    cmd = f'{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words)}; _tankbench; printf "%s\\n" "${{COMPREPLY[@]}}"'
    return subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, check=True).stdout.split()


def test_bash_completes_subcommands_options_and_choices() -> None:
    script = bash(build_parser())
    assert {"plan", "run", "doctor", "lab", "schema"} <= set(complete(script, ""))
    assert complete(script, "la") == ["lab"]
    assert set(complete(script, "lab", "")) == {"build", "down", "list", "ssh", "status", "up"}
    assert "--keep-lab" in complete(script, "run", "x.toml", "--k")
    assert complete(script, "schema", "") == ["campaign", "results"]


def test_the_build_writes_them_and_the_campaign_schema(tmp_path: Path) -> None:
    written = write_share(tmp_path / "share", ROOT / "pyproject.toml")
    names = {p.relative_to(tmp_path).as_posix() for p in written}
    assert names == {
        "share/man/man1/tankbench.1",
        "share/bash-completion/completions/tankbench",
        "share/zsh/site-functions/_tankbench",
        "schemas/campaign.schema.json",
    }
    assert all(p.stat().st_size > 100 for p in written)


def test_the_build_needs_no_run_time_dependency(tmp_path: Path) -> None:
    """pip builds in an environment with setuptools only: without site-packages (python -S) the parser's modules
    import orjson & co. from stand-ins, and the generated files are the same."""
    import sys

    code = "import runpy, sys; sys.argv = ['b', sys.argv[1]]; runpy.run_module('tankbench.buildfiles', run_name='__main__')"
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    res = subprocess.run(
        [sys.executable, "-S", "-c", code, str(tmp_path / "share")], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr[-3000:]
    man = (tmp_path / "share" / "man" / "man1" / "tankbench.1").read_text()
    assert man.split("\n", 1)[1] == man_page(build_parser(), "x").split("\n", 1)[1], "the same page, bar the date line"


def test_the_pages_do_not_depend_on_who_builds_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pip builds the man page once, for every user: no path of the builder's (`lab build --help` said
    /root/.cache/tankbench/lab, or whatever XDG_CACHE_HOME was, for everyone; a full run with XDG_CACHE_HOME set
    failed the test above on it)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    page = man_page(build_parser(), "x")
    assert str(tmp_path) not in page
    assert "${XDG_CACHE_HOME:\\-~/.cache}/tankbench/lab" in page, "the lab build page names the cache as a rule"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert man_page(build_parser(), "x") == page
