"""A validity warning: what the report says when some numbers are not to be trusted, and how to fix it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tankbench.analysis.cases import TestSummary


@dataclass(frozen=True)
class Warning:
    """A reason to distrust some numbers, the rows it concerns (tests.id, runs.id) and how to fix it."""

    code: str
    severity: str  # "error" (numbers wrong), "warning" (numbers doubtful), "info" (cannot check)
    message: str
    fix: str
    test_ids: tuple[str, ...] = ()
    run_rows: tuple[int, ...] = ()


def _warning(
    code: str, sev: str, tests: list[TestSummary], msg: str, fix: str, rows: Iterable[int] = ()
) -> Iterator[Warning]:
    """One warning naming the tests (and run rows) a check holds for; none when it holds for none."""
    if tests:
        names = ", ".join(f"#{t.number}" for t in tests[:12]) + (" …" if len(tests) > 12 else "")
        yield Warning(code, sev, f"{msg} (tests {names})", fix, tuple(t.id for t in tests), tuple(rows))
