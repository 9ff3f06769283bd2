"""The progress line on a terminal that reports 0 columns (QA F12)."""

from __future__ import annotations

import os

import pytest

from tankbench.progress import Progress


def test_a_terminal_of_zero_columns_does_not_cut_the_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pty nobody sized (script(1), some CI runners) says 0 columns: msg[: 0 - 1] cut the closing ")"."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    master, slave = os.openpty()  # a new pty: 0 rows, 0 columns
    try:
        assert os.get_terminal_size(slave).columns == 0
        with open(slave, "w", closefd=False) as stream:
            p = Progress(1, stream=stream)
            p.start(1, 1, 1, "file-f-randread-4k", "run 1/1", 5.0)
        out = os.read(master, 4096).decode()
    finally:
        os.close(master)
        os.close(slave)
    assert out.endswith("(run 1/1, ETA 5s)"), repr(out)
