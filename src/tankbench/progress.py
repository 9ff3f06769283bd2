"""Progress with ETA on stderr: a rewriting line on a terminal, plain lines otherwise (no bar, no colour)."""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

from tankbench.units import fmt_duration


class Progress:
    """Reports test i/N, the current test, and the campaign's ETA from the pace so far."""

    def __init__(self, total_runs: int, stream: TextIO = sys.stderr, quiet: bool = False) -> None:
        self.total = total_runs
        self.done = 0
        self.stream = stream
        self.quiet = quiet
        self.tty = stream.isatty() and os.environ.get("TERM") != "dumb"
        self.t0 = time.monotonic()
        self._run_seconds = 0.0  # time inside runs only: a one-off layout must not inflate the ETA
        self._started = 0.0

    def eta(self, expected_per_run: float) -> float:
        """Seconds left: measured pace once runs finished, the expected duration before that."""
        left = self.total - self.done
        if self.done:
            return left * self._run_seconds / self.done
        return left * expected_per_run

    def start(self, index: int, n_tests: int, number: int, name: str, label: str, expected: float) -> None:
        self._started = time.monotonic()
        if self.quiet:
            return
        msg = (f"[{index}/{n_tests}] {number:04d} {name} {label}  "
               f"(run {self.done + 1}/{self.total}, ETA {fmt_duration(self.eta(expected))})")
        if self.tty:
            width = os.get_terminal_size(self.stream.fileno()).columns if self.stream.isatty() else 120
            self.stream.write("\r\033[K" + msg[: width - 1])
        else:
            self.stream.write(msg + "\n")
        self.stream.flush()

    def finish(self, status: str, detail: str) -> None:
        self.done += 1
        self._run_seconds += time.monotonic() - self._started
        if self.quiet:
            return
        if self.tty:
            self.stream.write("\r\033[K")
        self.stream.write(f"    {status}: {detail}\n")
        self.stream.flush()

    def note(self, text: str) -> None:
        if self.quiet:
            return
        if self.tty:
            self.stream.write("\r\033[K")
        self.stream.write(text + "\n")
        self.stream.flush()
