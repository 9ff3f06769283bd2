"""Machines side by side (`tankbench compare A B …`, issue 31): the tests they share and those they do not, each
shared test's figure per machine with its ratio to the first machine (95 % interval), one figure per test case
with every machine, the fingerprints side by side, and each claim's verdict per machine. Pure: datasets in,
values out; the exporters (reports/machines.py) draw it."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tankbench.analysis.cases import Dataset, TestSummary
from tankbench.analysis.figures import Figure, Series
from tankbench.analysis.leaderboard import case_metric
from tankbench.analysis.stats import ratio_test
from tankbench.metrics import METRICS

#: the versions a comparison names next to every ratio when they differ between two machines
VERSION_KEYS = (("kernel", "kernel"), ("zfs_version", "OpenZFS"), ("fio_version", "fio"))
#: fingerprint keys shown side by side (in this order), then every other key any machine has
FINGERPRINT_ORDER = (
    "hostname",
    "host",
    "kernel",
    "zfs_version",
    "fio_version",
    "os",
    "cpu_model",
    "cpu_count",
    "mem_bytes",
    "accelerator",
    "pool_layout",
    "device_models",
)


@dataclass(frozen=True)
class Machine:
    """One input: a label for its column, where it came from, and its dataset."""

    label: str
    source: str
    dataset: Dataset

    def fingerprint_values(self, key: str) -> str:
        """Every value this machine's runs recorded for a fingerprint key, joined (several hosts, or changes)."""
        vals = sorted({_text(fp.data[key]) for fp in self.dataset.fingerprints.values() if key in fp.data})
        return ", ".join(vals) if vals else ""

    @property
    def hostnames(self) -> tuple[str, ...]:
        return tuple(sorted({str(fp.data.get("hostname", "")) for fp in self.dataset.fingerprints.values()} - {""}))


def _text(v: Any) -> str:
    if isinstance(v, Mapping):
        return ", ".join(f"{k}={_text(x)}" for k, x in sorted(v.items())) or "—"
    if isinstance(v, (list, tuple)):
        return ", ".join(_text(x) for x in v)
    return str(v)


@dataclass(frozen=True)
class Cell:
    """One test on one machine: its mean and runs, and its ratio to the reference machine with the interval."""

    mean: float | None
    n: int
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    significant: bool | None = None
    why: str = ""  # why no interval (one run, nothing measured …)
    versions: tuple[str, ...] = ()  # "fio fio-3.33 vs fio-3.36": what differs from the reference machine


@dataclass(frozen=True)
class MachineRow:
    """A test every machine ran (or some: `cells` holds None for the others)."""

    key: str  # test id, or the test's name where the ids differ
    number: int
    name: str
    case: str
    metric: str
    cells: tuple[Cell | None, ...]


@dataclass(frozen=True)
class FingerprintRow:
    key: str
    values: tuple[str, ...]

    @property
    def differs(self) -> bool:
        return len(set(self.values)) > 1


@dataclass(frozen=True)
class ClaimRow:
    """One claim across machines: its text, and each machine's verdict (None where its campaign lacks it)."""

    name: str
    text: str
    verdicts: tuple[Any, ...]


@dataclass(frozen=True)
class MachineComparison:
    metric: str
    machines: tuple[Machine, ...]
    shared: tuple[MachineRow, ...]
    partial: tuple[MachineRow, ...]
    fingerprint: tuple[FingerprintRow, ...]
    figures: tuple[Figure, ...]
    claims: tuple[ClaimRow, ...]
    unmatched_claims: tuple[str, ...]

    @property
    def version_notes(self) -> tuple[str, ...]:
        """Per machine after the first: which of kernel, OpenZFS and fio differ from the first machine."""
        return tuple(
            f"{m.label}: " + "; ".join(version_diff(self.machines[0], m))
            for m in self.machines[1:]
            if version_diff(self.machines[0], m)
        )


def version_diff(ref: Machine, m: Machine) -> tuple[str, ...]:
    """`fio fio-3.33 vs fio-3.36` for each of kernel, OpenZFS, fio whose values differ between two machines."""
    out = []
    for key, label in VERSION_KEYS:
        a, b = ref.fingerprint_values(key), m.fingerprint_values(key)
        if a != b:
            out.append(f"{label} {a or '?'} vs {b or '?'}")
    return tuple(out)


def _match(machines: Sequence[Machine]) -> list[tuple[str, list[TestSummary | None]]]:
    """Tests across machines, by test id (the same canonical test), else by test name; in the first machine's
    order, then each later machine's tests that the earlier ones lack."""
    order: list[str] = []
    found: dict[str, list[TestSummary | None]] = {}
    for i, m in enumerate(machines):
        names = {t.name: t for t in m.dataset.tests}
        ids = m.dataset.by_id()
        for key in order:  # earlier machines' tests: this machine's by id, else by name
            if found[key][i] is None:
                prev = next(t for t in found[key] if t is not None)
                found[key][i] = ids.get(prev.id) or names.get(prev.name)
        taken = {col[i].id for col in found.values() if col[i] is not None}  # type: ignore[union-attr]
        for t in m.dataset.tests:
            if t.id not in taken and not t.is_fill:
                order.append(t.id)
                found[t.id] = [None] * len(machines)
                found[t.id][i] = t
    return [(k, found[k]) for k in order]


def _case_metrics(
    matched: Sequence[Sequence[TestSummary | None]], machines: Sequence[Machine], key: str
) -> dict[str, str]:
    """The figure each test case is compared by: `key`, or with auto durable MiB/s when any machine's runs of the
    case finished late (the report's leaderboard rule), fio's MiB/s otherwise — one figure per case, so its chart
    and its rows agree."""
    cases: dict[str, list[list[TestSummary]]] = {}
    for tests in matched:
        case = next(t for t in tests if t is not None).case
        col = cases.setdefault(case, [[] for _ in machines])
        for i, t in enumerate(tests):
            if t is not None:
                col[i].append(t)
    out = {}
    for case, cols in cases.items():
        picks = {case_metric(ts, key, m.dataset.settings)[0] for ts, m in zip(cols, machines) if ts}
        out[case] = picks.pop() if len(picks) == 1 else "durable_mibs"
    return out


def _cell(t: TestSummary | None, ref: TestSummary | None, metric: str, versions: tuple[str, ...]) -> Cell | None:
    if t is None:
        return None
    vals, mean = t.values(metric), t.mean(metric)
    if ref is None or t is ref:
        return Cell(mean, len(vals))
    rvals = ref.values(metric)
    if not vals or not rvals or not mean or not ref.mean(metric):
        return Cell(mean, len(vals), why="not measured on both", versions=versions)
    if mean < 0 or (ref.mean(metric) or 0.0) < 0:  # a hand-edited import: no ratio of a negative figure
        return Cell(mean, len(vals), why="a negative figure: no ratio", versions=versions)
    r, lo, hi, test = ratio_test(vals, rvals)
    if not test.possible:
        return Cell(mean, len(vals), r, why="one run: no interval", versions=versions)
    return Cell(mean, len(vals), r, lo, hi, test.significant(), versions=versions)


def _figures(rows: Sequence[MachineRow], machines: Sequence[Machine]) -> tuple[Figure, ...]:
    """One grouped bar chart per test case: a group per shared test, a bar per machine."""
    by_case: dict[tuple[str, str], list[MachineRow]] = {}
    for r in rows:
        by_case.setdefault((r.case, r.metric), []).append(r)
    out = []
    for (case, metric), rs in by_case.items():
        series = tuple(
            Series(m.label, tuple((f"#{r.number}", c.mean if c else None) for r in rs for c in [r.cells[i]]))
            for i, m in enumerate(machines)
        )
        out.append(
            Figure(
                id=f"machines-{case}",
                title=f"{case}: every machine",
                kind="bars",
                metric=metric,
                x="test",
                x_values=tuple(f"#{r.number}" for r in rs),
                series=series,
                note="; ".join(f"#{r.number} {r.name}" for r in rs),
            )
        )
    return tuple(out)


def _fingerprint(machines: Sequence[Machine]) -> tuple[FingerprintRow, ...]:
    keys = {k for m in machines for fp in m.dataset.fingerprints.values() for k in fp.data}
    order = [k for k in FINGERPRINT_ORDER if k in keys] + sorted(keys - set(FINGERPRINT_ORDER))
    return tuple(FingerprintRow(k, tuple(m.fingerprint_values(k) for m in machines)) for k in order)


#: judges every claim of one dataset: (claim key, claim name, claim text, verdict) per claim
ClaimJudge = Callable[[Dataset], Sequence[tuple[str, str, str, Any]]]


def _claims(machines: Sequence[Machine], judge: ClaimJudge | None) -> tuple[tuple[ClaimRow, ...], tuple[str, ...]]:
    """Claims matched by name across machines: one row per name whose claim is the same everywhere it is stated;
    a name stated differently (a later preset changed it) or only by some machines is said, not matched."""
    if judge is None:
        return (), ()
    per = [{name: (key, text, v) for key, name, text, v in judge(m.dataset)} for m in machines]
    names: list[str] = []
    for p in per:
        names += [n for n in p if n not in names]
    rows, unmatched = [], []
    for n in names:
        have = [i for i, p in enumerate(per) if n in p]
        keys = {per[i][n][0] for i in have}
        if len(keys) > 1:
            unmatched.append(
                f"{n!r} is stated differently: "
                + "; ".join(f"{machines[i].label}: {per[i][n][1]}" for i in have)
                + " (not compared)"
            )
            continue
        if len(have) < len(machines):
            lack = ", ".join(machines[i].label for i in range(len(machines)) if i not in have)
            unmatched.append(f"{n!r} is not in the campaign of {lack}")
        rows.append(ClaimRow(n, per[have[0]][n][1], tuple(p[n][2] if n in p else None for p in per)))
    return tuple(rows), tuple(unmatched)


def compare_machines(
    machines: Sequence[Machine], metric: str = "auto", judge: ClaimJudge | None = None
) -> MachineComparison:
    """Every test of every machine, against the first machine; claims judged per machine by `judge`."""
    if metric != "auto" and metric not in METRICS:
        raise ValueError(metric)
    versions = [version_diff(machines[0], m) for m in machines]
    shared: list[MachineRow] = []
    partial: list[MachineRow] = []
    matched = _match(machines)
    metrics = _case_metrics([tests for _, tests in matched], machines, metric)
    for key, tests in matched:
        first = next(t for t in tests if t is not None)
        k = metrics[first.case]
        ref = tests[0]
        cells = tuple(_cell(t, ref, k, versions[i]) for i, t in enumerate(tests))
        row = MachineRow(key, first.number, first.name, first.case, k, cells)
        (shared if all(t is not None for t in tests) else partial).append(row)
    claims, unmatched = _claims(machines, judge)
    return MachineComparison(
        metric=metric,
        machines=tuple(machines),
        shared=tuple(shared),
        partial=tuple(partial),
        fingerprint=_fingerprint(machines),
        figures=_figures(shared, machines),
        claims=claims,
        unmatched_claims=unmatched,
    )


def fmt_ratio(c: Cell) -> str:
    """`1.52× [1.40–1.65]`, or the ratio and why it has no interval."""
    if c.ratio is None:
        return c.why or "—"
    if c.low is None or c.high is None:
        return f"{c.ratio:.3g}× ({c.why})"
    high = "∞" if math.isinf(c.high) else f"{c.high:.3g}"
    return f"{c.ratio:.3g}× [{c.low:.3g}–{high}]"


def labels_for(sources: Sequence[str]) -> tuple[str, ...]:
    """Column labels from the inputs' file names (`a.tankbench.zip` → `a`), made unique with a number."""
    out: list[str] = []
    for s in sources:
        base = os.path.basename(s)
        for suffix in (".tankbench.zip", ".zip", ".sqlite", ".db"):
            if base.endswith(suffix):
                base = base[: -len(suffix)]
                break
        label, n = base or "journal", 2
        while label in out:
            label, n = f"{base}-{n}", n + 1
        out.append(label)
    return tuple(out)


def _cell_dict(c: Cell | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {
        "mean": c.mean,
        "n": c.n,
        "ratio": c.ratio,
        "low": c.low,
        "high": None if c.high is None or math.isinf(c.high) else c.high,
        "significant": c.significant,
        "why": c.why,
        "versions_differ": list(c.versions),
    }


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    to_dict = getattr(v, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return dataclasses.asdict(v)
    return str(v)


def _row_dict(r: MachineRow) -> dict[str, Any]:
    return {
        "key": r.key,
        "number": r.number,
        "name": r.name,
        "case": r.case,
        "metric": r.metric,
        "cells": [_cell_dict(c) for c in r.cells],
    }


def machines_dict(mc: MachineComparison) -> dict[str, Any]:
    """The comparison as JSON-ready values (compare --json's `machines`)."""
    return {
        "metric": mc.metric,
        "machines": [
            {
                "label": m.label,
                "source": m.source,
                "hostnames": list(m.hostnames),
                "versions": {k: m.fingerprint_values(k) for k, _ in VERSION_KEYS},
            }
            for m in mc.machines
        ],  # fmt: skip
        "shared": [_row_dict(r) for r in mc.shared],
        "partial": [_row_dict(r) for r in mc.partial],
        "fingerprint": [{"key": f.key, "values": list(f.values), "differs": f.differs} for f in mc.fingerprint],
        "claims": [{"name": c.name, "text": c.text, "verdicts": [_jsonable(v) for v in c.verdicts]} for c in mc.claims],
        "unmatched_claims": list(mc.unmatched_claims),
    }
