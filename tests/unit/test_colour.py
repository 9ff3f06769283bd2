"""Statuses are coloured on a terminal only, as NO_COLOR, FORCE_COLOR and TERM=dumb say (the README's promise)."""

from __future__ import annotations

import io
import os

import pytest

from tankbench import colour


@pytest.fixture
def tty():  # type: ignore[no-untyped-def]
    """A real terminal (a pty's slave side), as a text stream."""
    master, slave = os.openpty()
    stream = open(slave, "w", encoding="utf-8")  # noqa: SIM115 - closed below
    yield stream
    stream.close()
    os.close(master)


@pytest.mark.parametrize(
    ("env", "on_tty", "on_pipe"),
    [
        ({}, True, False),
        ({"NO_COLOR": "1"}, False, False),
        ({"NO_COLOR": ""}, True, False),  # no-color.org: only a non-empty value counts
        ({"FORCE_COLOR": "1"}, True, True),
        ({"FORCE_COLOR": "0"}, True, False),
        ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, False, False),  # NO_COLOR wins
        ({"TERM": "dumb"}, False, False),
        ({"TERM": "dumb", "FORCE_COLOR": "1"}, True, True),
    ],
)
def test_colour_follows_the_conventions(monkeypatch, tty, env, on_tty, on_pipe) -> None:  # type: ignore[no-untyped-def]
    for k in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("TERM", "xterm")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert ("\033[31m" in colour.status("failed", tty)) is on_tty
    assert ("\033[31m" in colour.status("failed", io.StringIO())) is on_pipe


def test_the_text_is_kept_and_an_unknown_status_is_plain(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert colour.status("done", io.StringIO(), "done      ") == "\033[32mdone      \033[0m"
    assert colour.status("whatever", io.StringIO()) == "whatever"
