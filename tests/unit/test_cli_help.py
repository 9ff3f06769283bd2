"""Every command and subcommand has --help with real text (a command without help fails this test)."""

from __future__ import annotations

import argparse

import pytest

from tankbench.cli import build_parser
from tests.conftest import tankbench


def all_parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    out = []
    todo = [("tankbench", build_parser())]
    while todo:
        name, parser = todo.pop()
        out.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo += [(f"{name} {sub}", p) for sub, p in action.choices.items()]
    return out


PARSERS = all_parsers()


def test_the_commands_are_all_there():
    names = {n for n, _ in PARSERS}
    for cmd in (
        "plan",
        "run",
        "show",
        "results",
        "report",
        "compare",
        "advise",
        "import",
        "presets",
        "clean",
        "lab",
        "lab build",
        "lab up",
        "lab status",
        "lab ssh",
        "lab down",
    ):
        assert f"tankbench {cmd}" in names


@pytest.mark.parametrize("name,parser", PARSERS, ids=[n for n, _ in PARSERS])
def test_help_has_text(name: str, parser: argparse.ArgumentParser):
    assert (parser.description or "").strip(), f"`{name}` has no description"
    for action in parser._actions:
        if action.option_strings and action.dest != "help":
            assert (action.help or "").strip(), f"`{name} {action.option_strings[0]}` has no help"


def test_help_runs_as_a_subprocess():
    res = tankbench("run", "--help")
    assert res.returncode == 0 and "marked crashed and retried; a test that crashed its host" in " ".join(
        res.stdout.split()
    )
