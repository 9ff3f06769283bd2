"""`report --group-by` and `--where`: regroup test cases and filter tests without touching the journal."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass

from tankbench.analysis.cases import Dataset, TestSummary, case_name
from tankbench.errors import UserError

WHERE_RE = re.compile(r"\s*([A-Za-z_][\w.]*)\s*(!=|=)\s*(.*?)\s*$")


@dataclass(frozen=True)
class Where:
    """One filter: axis KEY equal (or not equal) to one of VALUES."""

    key: str
    negate: bool
    values: tuple[str, ...]

    def keeps(self, t: TestSummary) -> bool:
        v = t.axes().get(self.key)
        hit = v is not None and _norm(v) in self.values
        return hit != self.negate

    @property
    def text(self) -> str:
        return f"{self.key}{'!=' if self.negate else '='}{','.join(self.values)}"


def _norm(v: object) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def parse_where(text: str) -> Where:
    """`sync!=disabled`, `rw=read,randread`, `slog=true` -> Where; UserError on anything else."""
    m = WHERE_RE.fullmatch(text)
    if not m or not m.group(3):
        raise UserError(
            f"bad --where {text!r}",
            "write KEY=VALUE or KEY!=VALUE (several values: KEY=a,b), e.g. --where sync!=disabled",
        )
    values = tuple(
        v.strip().lower() if v.strip().lower() in ("true", "false") else v.strip() for v in m.group(3).split(",")
    )
    return Where(m.group(1), m.group(2) == "!=", values)


def parse_group_by(text: str) -> tuple[str, ...]:
    """`rw,bs,iodepth` -> ("rw", "bs", "iodepth")."""
    keys = tuple(k.strip() for k in text.split(",") if k.strip())
    if not keys:
        raise UserError(f"bad --group-by {text!r}", "name axes separated by commas, e.g. --group-by rw,bs,iodepth")
    return keys


def _axis_values(ds: Dataset) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for t in ds.tests:
        for k, v in t.axes().items():
            out.setdefault(k, set()).add(_norm(v))
    return out


def _check(ds: Dataset, w: Where) -> None:
    known = _axis_values(ds)
    if w.key not in known:
        raise UserError(
            f"--where {w.text}: no test in {ds.path} has the axis {w.key!r}",
            f"axes in this journal: {', '.join(sorted(known))}",
        )
    unknown = [v for v in w.values if v not in known[w.key]]
    if unknown:
        raise UserError(
            f"--where {w.text}: no test has {w.key}={unknown[0]}",
            f"values of {w.key} in this journal: {', '.join(sorted(known[w.key]))}",
        )


def select(ds: Dataset, group_by: Sequence[str] | None = None, where: Sequence[Where] = ()) -> Dataset:
    """The dataset regrouped by `group_by` (params keys; default the campaign's [report] test_case) and with
    only the tests every `where` keeps. The journal is only read."""
    for w in where:
        _check(ds, w)
    settings = ds.settings
    if group_by:
        known = _axis_values(ds)
        bad = [k for k in group_by if k not in known]
        if bad:
            raise UserError(
                f"--group-by {','.join(group_by)}: no test has the axis {bad[0]!r}",
                f"axes in this journal: {', '.join(sorted(known))}",
            )
        settings = dataclasses.replace(settings, case_keys=tuple(group_by))
    tests = [t for t in ds.tests if all(w.keeps(t) for w in where)]
    if not tests:
        raise UserError(f"--where {' '.join(w.text for w in where)} keeps no test", "loosen the filter")
    if group_by:
        tests = [dataclasses.replace(t, case=case_name(t.axes(), settings.case_keys)) for t in tests]
    return dataclasses.replace(ds, tests=tuple(tests), settings=settings)
