"""A campaign's factors, read off its tests: which axes vary inside each workload, their levels, and the model
matrix (dummy coding) a screening design is chosen on and a fit is made with (issue 29, docs/schedule.md
"Designs").

Pure and general: nothing here names an axis of zvol-issues. A *workload* is what a leaderboard ranks (by default
the test case's axes: `workload`, `rw`, `bs`); a *factor* is every other axis whose value varies among a
workload's tests, plus the target (`kind` when each target has its own kind, else `target`). A factor that does
not apply to a test (recordsize on a zvol) is coded as absent there: its columns are 0, so nested factors need no
special case. Storage factors are the configuration's axes (docs/schedule.md, Configurations: the target and every
axis that is not an fio option — ZFS properties, the SLOG, module parameters, the file's layout, its size); fio
axes that are not workload axes (iodepth, io, sync_mode, …) are factors too, not storage ones.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from tankbench.campaign.vocab import FIO_AXES
from tankbench.model import test_case_for

Matrix = npt.NDArray[np.float64]

#: the axes a workload is made of unless the campaign says otherwise: a test case's (model.test_case_for)
WORKLOAD_AXES = ("workload", "rw", "bs")
#: params that are bookkeeping of a test, never factors (constant in a campaign anyway)
NOT_FACTORS = frozenset({"mode", "copy_size", "fill_room"})


def is_storage(axis: str) -> bool:
    """A configuration axis (schedule/configs.py config_key): not an fio option, or the file's size."""
    return axis not in FIO_AXES or axis == "size"


class TestLike(Protocol):
    """What a factor needs of a test: a campaign's Test and a journal's TestRow both give it."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def number(self) -> int: ...


@dataclass(frozen=True)
class Point:
    """One test as a design sees it: its id, name, target, params and whether it is an [[include]] point."""

    id: str
    number: int
    name: str
    target: str
    kind: str
    params: Mapping[str, Any]
    forced: bool = False

    @property
    def test_case(self) -> str:
        return test_case_for(self.params)


def point(test: Any, forced: bool = False) -> Point:
    """A Point from a campaign Test (target: a Target) or a journal TestRow (target: its name)."""
    target = test.target
    if isinstance(target, str):
        return Point(test.id, test.number, test.name, target, test.target_kind, dict(test.params), forced)
    return Point(test.id, test.number, test.name, target.name, target.kind, dict(test.params), forced)


@dataclass(frozen=True)
class Factor:
    """An axis that varies inside a workload: its levels in matrix order (the first is the reference)."""

    name: str
    levels: tuple[str, ...]
    storage: bool

    def label(self) -> str:
        return self.name


def level_of(p: Point, factor: str, target_factor: str) -> str | None:
    """The factor's level on a test as text; None where the factor does not apply (a zvol's recordsize)."""
    if factor == target_factor:
        return p.kind if factor == "kind" else p.target
    if factor not in p.params:
        return None
    v = p.params[factor]
    return str(v).lower() if isinstance(v, bool) else str(v)


def target_factor(points: Sequence[Point]) -> str:
    """`kind` when every target has a kind of its own (dataset vs zvol), else `target` (two datasets)."""
    pairs = {(p.target, p.kind) for p in points}
    return "kind" if len({k for _, k in pairs}) == len(pairs) else "target"


def workload_key(p: Point, axes: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The workload a test belongs to: its values of the workload axes (copy tests: their command)."""
    return tuple((a, str(p.params[a])) for a in axes if a in p.params)


def workload_name(key: tuple[tuple[str, str], ...], points: Sequence[Point]) -> str:
    """The workload's name: its test case (`write seq 4k`) and any other workload axis (`iodepth=4`); without
    rw and bs among the workload axes, the axes it has (`fio rw=write`, `fio tests`)."""
    axes = dict(key)
    if axes.get("workload", "fio") != "fio" or ("rw" in axes and "bs" in axes):
        extra = [f"{a}={v}" for a, v in key if a not in WORKLOAD_AXES]
        return " ".join([points[0].test_case, *extra])
    parts = [f"{a}={v}" for a, v in key if a != "workload"]
    return " ".join(["fio", *parts]) if parts else "fio tests"


def group_workloads(points: Iterable[Point], axes: Sequence[str]) -> dict[tuple[tuple[str, str], ...], list[Point]]:
    """Tests by workload, in first-appearance order."""
    out: dict[tuple[tuple[str, str], ...], list[Point]] = {}
    for p in points:
        out.setdefault(workload_key(p, axes), []).append(p)
    return out


def factors_of(points: Sequence[Point], axes: Sequence[str], tfac: str) -> list[Factor]:
    """The factors of one workload's tests: the target, then every param that varies, in first-seen order."""
    names = [tfac] + list(dict.fromkeys(k for p in points for k in p.params))
    out = []
    for name in names:
        if name in axes or name in NOT_FACTORS:
            continue
        levels = tuple(dict.fromkeys(lv for p in points if (lv := level_of(p, name, tfac)) is not None))
        if len(levels) > 1:
            out.append(Factor(name, levels, name == tfac or is_storage(name)))
    return out


@dataclass(frozen=True)
class Column:
    """One column of the model matrix: a factor's level against its reference level, or a product of two."""

    factor: str
    level: str
    other: str = ""
    other_level: str = ""

    @property
    def interaction(self) -> bool:
        return bool(self.other)

    def label(self) -> str:
        main = f"{self.factor}={self.level}"
        return f"{main} × {self.other}={self.other_level}" if self.other else main


@dataclass
class Coding:
    """Dummy coding of a workload's factors: a row per test, absent factors coded 0; `main` are the main-effect
    columns (after those the matrix cannot tell apart were dropped: `dropped`), `pairs` the two-factor
    interaction column groups."""

    factors: list[Factor]
    tfac: str
    main: list[Column] = field(default_factory=list)
    dropped: list[Column] = field(default_factory=list)

    def matrix(self, points: Sequence[Point], cols: Sequence[Column], intercept: bool = True) -> Matrix:
        """The model matrix of these tests for these columns (a first column of ones with `intercept`)."""
        names = {c.factor for c in cols} | {c.other for c in cols if c.other}
        lv = {f: np.array([level_of(p, f, self.tfac) or "" for p in points], dtype=object) for f in names}
        out = np.zeros((len(points), len(cols) + intercept), dtype=np.float64)
        if intercept:
            out[:, 0] = 1.0
        for j, c in enumerate(cols, start=int(intercept)):
            hit = lv[c.factor] == c.level
            if c.other:
                hit = hit & (lv[c.other] == c.other_level)
            out[:, j] = hit
        return out

    def pair_columns(self, a: Factor, b: Factor) -> list[Column]:
        """The interaction columns of two factors (non-reference levels of each)."""
        return [Column(a.name, la, b.name, lb) for la in a.levels[1:] for lb in b.levels[1:]]

    def pairs(self) -> list[tuple[Factor, Factor]]:
        return list(itertools.combinations(self.factors, 2))


def coding(points: Sequence[Point], factors: list[Factor], tfac: str) -> Coding:
    """The main-effect coding of these tests; columns the candidate tests cannot separate (a level that only
    occurs with another factor's level) are dropped and listed, so the model stays estimable."""
    c = Coding(factors, tfac)
    kept: list[Column] = []
    rank = 1
    for f in factors:
        for level in f.levels[1:]:
            col = Column(f.name, level)
            r = int(np.linalg.matrix_rank(c.matrix(points, kept + [col])))
            if r > rank:
                kept.append(col)
                rank = r
            else:
                c.dropped.append(col)
    c.main = kept
    return c


def applies(points: Sequence[Point], factor: str, tfac: str) -> list[Point]:
    """The tests a factor applies to."""
    return [p for p in points if level_of(p, factor, tfac) is not None]


def is_parent(points: Sequence[Point], factor: Factor, factors: Sequence[Factor], tfac: str) -> bool:
    """Whether other factors' applicability depends on this one's level (the target: a zvol has no recordsize):
    its effect is then read from each level's own tests, not by changing the level of the same tests."""
    seen: dict[str, set[tuple[str, ...]]] = {}
    for p in points:
        lv = level_of(p, factor.name, tfac)
        if lv is None:
            continue
        present = tuple(f.name for f in factors if f.name != factor.name and level_of(p, f.name, tfac) is not None)
        seen.setdefault(lv, set()).add(present)
    shapes = list(seen.values())
    return any(s != shapes[0] for s in shapes[1:])
