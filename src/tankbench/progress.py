"""Progress with ETA on stderr: a rewriting line on a terminal; otherwise (a log file, a pipe) plain lines, each
stamped with the UTC time it was written (no bar, nothing rewritten; colour as tankbench.colour says)."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable
from typing import TextIO

from tankbench import colour
from tankbench.schedule.estimate import Estimate
from tankbench.units import fmt_duration


def fmt_estimate(e: Estimate) -> str:
    """ "12m" when the range is tight, else "10m–1h2m (likely 20m)"."""
    days = f" ≈ {e.likely / 86400:.1f} days" if e.likely >= 2 * 86400 else ""
    if e.high - e.low <= max(60.0, 0.1 * e.likely):
        return fmt_duration(e.likely) + days
    return f"{fmt_duration(e.low)}–{fmt_duration(e.high)} (likely {fmt_duration(e.likely)}{days})"


def _columns(stream: TextIO) -> int:
    """The terminal's width for the progress line; a pty without a size says 0 columns (script(1), some CI
    runners), which cut the line to msg[:-1]: then COLUMNS or 120, as shutil.get_terminal_size has it."""
    try:
        width = os.get_terminal_size(stream.fileno()).columns if stream.isatty() else 120
    except (OSError, ValueError):
        width = 0
    return width if width > 0 else shutil.get_terminal_size((120, 24)).columns or 120


class Progress:
    """Reports test i/N, the current test, and the campaign's ETA.

    With `estimate` set (the runner's Estimator over the schedule's remaining work) the ETA is a range that
    counts provisioning, layout, drain and cooldown, learned as the campaign goes; without it, the pace of
    finished runs (or the expected fio time before any finished)."""

    def __init__(self, total_runs: int, stream: TextIO = sys.stderr, quiet: bool = False) -> None:
        self.total = total_runs
        self.done = 0
        self.stream = stream
        self.quiet = quiet
        self.tty = stream.isatty() and os.environ.get("TERM") != "dumb"
        self.t0 = time.monotonic()
        self._run_seconds = 0.0  # time inside runs only: a one-off layout must not inflate the ETA
        self._started = 0.0
        self.estimate: Callable[[], Estimate] | None = None
        self.runs_left: Callable[[], tuple[int, int]] | None = None  # (at least, at most) runs still to do

    def eta(self, expected_per_run: float) -> float:
        """Seconds left: measured pace once runs finished, the expected duration before that."""
        if self.estimate is not None:
            return self.estimate().likely
        left = self.total - self.done
        if self.done:
            return left * self._run_seconds / self.done
        return left * expected_per_run

    def eta_text(self, expected_per_run: float) -> str:
        """The ETA as shown: a range when the schedule is adaptive."""
        if self.estimate is not None:
            return fmt_estimate(self.estimate())
        return fmt_duration(self.eta(expected_per_run))

    def start(self, index: int, n_tests: int, number: int, name: str, label: str, expected: float) -> None:
        self._started = time.monotonic()
        if self.quiet:
            return
        total = str(self.total)
        if self.runs_left is not None:
            low, high = (self.done + max(1, n) for n in self.runs_left())  # the run starting now counts
            total = str(low) if low == high else f"{low}–{high}"
        msg = (
            f"[{index}/{n_tests}] {number:04d} {name} {label}  "
            f"(run {self.done + 1}/{total}, ETA {self.eta_text(expected)})"
        )
        if self.tty:
            self.stream.write("\r\033[K" + msg[: _columns(self.stream) - 1])
        else:
            self.stream.write(self._stamped(msg))
        self.stream.flush()

    def _stamped(self, text: str) -> str:
        """`text` as lines for a log file: each line starts with the UTC time, e.g. 2026-11-24T16:35:02Z."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        return "".join(f"{stamp} {line}\n" for line in text.splitlines() or [""])

    def finish(self, status: str, detail: str) -> None:
        self.done += 1
        self._run_seconds += time.monotonic() - self._started
        if self.quiet:
            return
        line = f"    {colour.status(status, self.stream)}: {detail}"
        self.stream.write("\r\033[K" + line + "\n" if self.tty else self._stamped(line))
        self.stream.flush()

    def note(self, text: str) -> None:
        if self.quiet:
            return
        self.stream.write("\r\033[K" + text + "\n" if self.tty else self._stamped(text))
        self.stream.flush()
