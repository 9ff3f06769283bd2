"""Tests that crashed their host (issue 18 item 5): seed 000's 201 kernel crashes were themselves a finding.
One row per test with a `crashed` run, for the report's section and `advise`'s warning."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tankbench.analysis.cases import Dataset


@dataclass(frozen=True)
class CrashRow:
    """A test whose runs took the host down: its configuration, how often, and what the journal noted."""

    test_id: str
    test_number: int
    test_name: str
    config: str
    crashes: int
    attempts: int  # every run row of the test (crashed ones included)
    finished: int  # runs that ended by themselves (done, failed, timeout)
    skipped: bool
    notes: tuple[str, ...]  # what the crashed rows say (the host's error; a kernel log when one was kept)
    guest_crashes: int = 0  # of `crashes`, those where the test guest died and its host stayed up (crash.layer)

    @property
    def what(self) -> str:
        """What the crashes took down: 'the host', 'the test guest' or both, with counts when both."""
        return crashed_what(self.crashes, self.guest_crashes)

    def as_dict(self) -> dict[str, Any]:
        return {
            "test_id": self.test_id,
            "test_number": self.test_number,
            "test_name": self.test_name,
            "config": self.config,
            "crashes": self.crashes,
            "attempts": self.attempts,
            "finished": self.finished,
            "skipped": self.skipped,
            "notes": list(self.notes),
            "guest_crashes": self.guest_crashes,
        }


def crashed_what(crashes: int, guest_crashes: int) -> str:
    """'the host N time(s)', 'the test guest N time(s)' or both, for `crashes` of which `guest_crashes` were the
    test guest's (its host stayed up)."""
    host = crashes - guest_crashes
    if not guest_crashes:
        return f"the host {crashes} time(s)"
    if not host:
        return f"the test guest {crashes} time(s)"
    return f"the host {host} time(s) and the test guest {guest_crashes} time(s)"


def crash_rows(ds: Dataset) -> tuple[CrashRow, ...]:
    """Every test with at least one `crashed` run, most crashes first."""
    out = []
    for t in ds.tests:
        crashed = [r for r in t.runs if r.status == "crashed"]
        if not crashed:
            continue
        out.append(
            CrashRow(
                t.id,
                t.number,
                t.name,
                t.storage_config,
                len(crashed),
                len(t.runs),
                sum(1 for r in t.runs if r.status in ("done", "failed", "timeout")),
                bool(t.skip_note),
                tuple(dict.fromkeys(r.note for r in crashed if r.note)),
                sum(1 for r in crashed if r.extra.get("crash.layer") == "guest"),
            )
        )
    return tuple(sorted(out, key=lambda c: (-c.crashes, c.test_number)))


def crash_advice(rows: tuple[CrashRow, ...]) -> list[tuple[str, tuple[str, ...]]]:
    """`advise`'s warnings: (sentence, test ids) per configuration that crashed its host."""
    by_config: dict[str, list[CrashRow]] = {}
    for c in rows:
        by_config.setdefault(c.config, []).append(c)
    out = []
    for config, cs in by_config.items():
        what = crashed_what(sum(c.crashes for c in cs), sum(c.guest_crashes for c in cs))
        out.append(
            (
                f"Avoid {config}: its runs crashed {what} "
                f"({', '.join(f'{c.test_number:04d} {c.test_name}' for c in cs)}); see the report's "
                "section of tests that crashed the host or its test guest.",
                tuple(c.test_id for c in cs),
            )
        )
    return out
