"""Figures keyed on the axes a journal has: each appears when its axes exist.

- seed 001 (tuning-matrix) and fio-plot: IOPS and p99 against iodepth (and numjobs) per test case, one line per
  configuration; a heatmap of test case × iodepth;
- seed 002 (compression-cache): MiB/s per layout (unwritten vs written…) side by side, and MiB/s, ARC MRU and MFU
  hits per repeat;
- seed 004 (recordsize-mix): MiB/s and physical/logical written against recordsize;
- any campaign: a heatmap of storage configuration × test case.
Exporters draw them (HTML: SVG) or tabulate them (Markdown, XLSX, JSON).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tankbench.analysis.cases import Dataset, TestSummary
from tankbench.metrics import METRICS

MAX_SERIES = 8  # lines per figure (the best ones by their mean; all values are in results.csv)
MAX_CASES = 12  # test cases with a figure of each kind


@dataclass(frozen=True)
class Series:
    """One line (or heatmap row): a label and (x label, value) points; None = not measured."""

    label: str
    points: tuple[tuple[str, float | None], ...]


@dataclass(frozen=True)
class Figure:
    """A chart as data: exporters draw it (HTML: SVG) or tabulate it (Markdown, XLSX, JSON)."""

    id: str
    title: str
    kind: str  # "lines", "bars" or "heatmap"
    metric: str  # registry key of the values
    x: str  # name of the x axis
    x_values: tuple[str, ...]
    series: tuple[Series, ...]
    note: str = ""
    test_ids: tuple[str, ...] = ()
    common: str = ""  # settings shared by every series (left out of their labels)
    y_label: str = ""  # what the values are, when not the metric's own label
    by_row: bool = False  # a heatmap coloured per row (else per column)
    #: heatmaps: the test cases (its columns, or for a per-row heatmap its rows) whose cells may be coloured
    #: best-to-worst: those whose leaderboard has a leader significantly ahead (analysis/leaderboard.py); None: all
    shaded: tuple[str, ...] | None = None


def _sort_key(v: str) -> tuple[int, float, str]:
    """Numeric-aware order of axis values: 4k < 64k < 1M, 1 < 4 < 16, then text."""
    s = v.strip().lower()
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    try:
        if s and s[-1] in mult:
            return (0, float(s[:-1]) * mult[s[-1]], s)
        return (0, float(s), s)
    except ValueError:
        return (1, 0.0, s)


def axis_values(tests: Sequence[TestSummary], axis: str) -> tuple[str, ...]:
    """The distinct values of an axis among the tests, in numeric-aware order."""
    vals = {str(t.axes()[axis]) for t in tests if axis in t.axes()}
    return tuple(sorted(vals, key=_sort_key))


def _rest(t: TestSummary, drop: tuple[str, ...]) -> str:
    """A test's configuration without the case keys and the x axis: the label of its line."""
    ax = t.axes()
    bits = [str(ax["target"])] + [f"{k}={v}" for k, v in sorted(ax.items()) if k not in drop + ("target", "kind")]
    return " ".join(bits)


def lines_by(
    case: str,
    tests: Sequence[TestSummary],
    x: str,
    metric: str,
    drop: tuple[str, ...],
    title: str,
    fid: str,
    note: str = "",
) -> Figure | None:
    """One line per configuration (everything but `x` and the case keys) with the metric's mean at each x."""
    xs = axis_values(tests, x)
    if len(xs) < 2:
        return None
    groups: dict[str, dict[str, TestSummary]] = {}
    for t in tests:
        if x in t.axes() and t.mean(metric) is not None:
            groups.setdefault(_rest(t, drop + (x,)), {})[str(t.axes()[x])] = t
    groups = {k: g for k, g in groups.items() if len(g) >= 2}
    if not groups:
        return None
    higher = METRICS[metric].higher_is_better is not False

    def best(g: dict[str, TestSummary]) -> float:
        vals = [t.mean(metric) or 0.0 for t in g.values()]
        return -max(vals) if higher else min(vals)

    # the best MAX_SERIES, shown in label order so a configuration keeps its colour across a case's figures
    chosen = sorted(sorted(groups.items(), key=lambda kv: best(kv[1]))[:MAX_SERIES])
    series = tuple(Series(label, tuple((v, g[v].mean(metric) if v in g else None) for v in xs)) for label, g in chosen)
    ids = tuple(t.id for _, g in chosen for t in g.values())
    shown = f" (best {MAX_SERIES} of {len(groups)} configurations)" if len(groups) > MAX_SERIES else ""
    return Figure(fid, f"{case}: {title}{shown}", "lines", metric, x, xs, series, note, ids)


def _cases(ds: Dataset) -> list[tuple[str, list[TestSummary]]]:
    return list(ds.cases().items())[:MAX_CASES]


def depth_figures(ds: Dataset, metric_of: dict[str, tuple[str, str]]) -> list[Figure]:
    """Seed 001 / fio-plot: IOPS and p99 latency against iodepth and numjobs, per test case."""
    out: list[Figure] = []
    keys = ds.settings.case_keys
    for x in ("iodepth", "numjobs"):
        if x in keys:
            continue
        for case, tests in _cases(ds):
            for metric, what in (("iops", "IOPS"), ("p99_ms", "p99 latency (ms)")):
                f = lines_by(case, tests, x, metric, keys, f"{what} against {x}", f"{x}-{metric}-{case}")
                if f:
                    out.append(f)
    return out


def layout_figures(ds: Dataset, metric_of: dict[str, tuple[str, str]]) -> list[Figure]:
    """Seed 002: reads per layout side by side (unwritten vs written…), and MiB/s, MRU and MFU hits per repeat."""
    out: list[Figure] = []
    keys = ds.settings.case_keys
    note = (
        "Reads of an unwritten (sparse) or zero-filled file measure how fast ZFS returns holes or compressed "
        "zeros from memory, not the disks (seed 002): only the written random layout measures the pool."
    )
    for axis in ("layout", "cache"):
        if axis in keys or len(axis_values(ds.tests, axis)) < 2:
            continue
        for case, tests in _cases(ds):
            metric = metric_of[case][0]
            f = lines_by(
                case,
                tests,
                axis,
                metric,
                keys,
                f"{METRICS[metric].label} per {axis}",
                f"{axis}-{case}",
                note if axis == "layout" and "read" in case else "",
            )
            if f:
                out.append(Figure(f.id, f.title, "bars", f.metric, f.x, f.x_values, f.series, f.note, f.test_ids))
    if any(len(axis_values(ds.tests, a)) >= 2 for a in ("layout", "cache")):
        out += repeat_figures(ds, metric_of)
    return out


def repeat_figures(ds: Dataset, metric_of: dict[str, tuple[str, str]]) -> list[Figure]:
    """MiB/s, ARC MRU hits and MFU hits of every repeat (seed 002's table), one line per test of a read case."""
    out: list[Figure] = []
    for case, tests in _cases(ds):
        if "read" not in case:
            continue
        runs = {t.id: [r for r in t.measured] for t in tests if len(t.measured) >= 2}
        if not runs:
            continue
        n = max(len(rs) for rs in runs.values())
        xs = tuple(str(i) for i in range(1, n + 1))
        by = {t.id: t for t in tests}
        for metric in (metric_of[case][0], "arc_mru_hits", "arc_mfu_hits"):
            series = tuple(
                Series(
                    f"#{by[tid].number} {_rest(by[tid], ds.settings.case_keys)}",
                    tuple((x, rs[i].values.get(metric) if i < len(rs) else None) for i, x in enumerate(xs)),
                )
                for tid, rs in list(runs.items())[:MAX_SERIES]
            )
            if any(v is not None for s in series for _, v in s.points):
                out.append(
                    Figure(
                        f"repeat-{metric}-{case}",
                        f"{case}: {METRICS[metric].label} per repeat",
                        "lines",
                        metric,
                        "repeat",
                        xs,
                        series,
                        "",
                        tuple(runs),
                    )
                )
    return out


def recordsize_figures(ds: Dataset, metric_of: dict[str, tuple[str, str]]) -> list[Figure]:
    """Seed 004: MiB/s and physical/logical written against recordsize (or volblocksize), per test case."""
    out: list[Figure] = []
    keys = ds.settings.case_keys
    for x in ("recordsize", "volblocksize"):
        if x in keys or len(axis_values(ds.tests, x)) < 2:
            continue
        for case, tests in _cases(ds):
            metric = metric_of[case][0]
            for m, what in ((metric, METRICS[metric].label), ("physical_per_logical", "physical/logical written")):
                f = lines_by(case, tests, x, m, keys, f"{what} against {x}", f"{x}-{m}-{case}")
                if f:
                    out.append(f)
    return out


def matrix_heatmaps(ds: Dataset, metric_of: dict[str, tuple[str, str]]) -> list[Figure]:
    """Two-axis matrices: storage configuration × test case (every campaign with both), and test case × iodepth
    (seed 001's table); each cell is the best mean of the case's ranking figure."""
    cases = ds.cases()
    figures = (_config_case_heatmap(cases, metric_of), _case_iodepth_heatmap(ds, cases, metric_of))
    return [f for f in figures if f is not None]


def _config_case_heatmap(cases: dict[str, list[TestSummary]], metric_of: dict[str, tuple[str, str]]) -> Figure | None:
    """Storage configuration × test case, when there are two of each (the first 40 configurations)."""
    cells: dict[tuple[str, str], list[float]] = {}
    for case, tests in cases.items():
        k = metric_of[case][0]
        for t in tests:
            v = t.mean(k)
            if v is not None:
                cells.setdefault((t.storage_config, case), []).append(v)
    configs = sorted({c for c, _ in cells})
    if len(configs) < 2 or len(cases) < 2:
        return None
    rows = [
        Series(c, tuple((case, _best(cells.get((c, case), []), metric_of[case][0])) for case in cases))
        for c in configs[:40]
    ]
    more = f"; first 40 of {len(configs)} configurations" if len(configs) > 40 else ""
    return Figure(
        "heatmap-config-case",
        f"Storage configuration × test case (best test of each cell; colour per column, red = worst … green = best{more})",
        "heatmap",
        "auto",
        "test case",
        tuple(cases),
        tuple(rows),
    )


def _case_iodepth_heatmap(
    ds: Dataset, cases: dict[str, list[TestSummary]], metric_of: dict[str, tuple[str, str]]
) -> Figure | None:
    """Test case × iodepth (seed 001's table), when iodepth has two values and is not part of the test case."""
    depths = axis_values(ds.tests, "iodepth")
    if len(depths) < 2 or "iodepth" in ds.settings.case_keys:
        return None
    rows = []
    for case, tests in cases.items():
        k = metric_of[case][0]
        cells = tuple(
            (d, _best([m for t in tests if str(t.axes().get("iodepth")) == d and (m := t.mean(k)) is not None], k))
            for d in depths
        )
        rows.append(Series(case, cells))
    return Figure(
        "heatmap-case-iodepth",
        "Test case × iodepth (best test of each cell by the case's ranking figure; colour per row)",
        "heatmap",
        "auto",
        "iodepth",
        depths,
        tuple(rows),
        by_row=True,
    )


def _best(vals: list[float], key: str) -> float | None:
    if not vals:
        return None
    return max(vals) if METRICS[key].higher_is_better is not False else min(vals)


FIGURES: tuple[Callable[[Dataset, dict[str, tuple[str, str]]], list[Figure]], ...] = (
    matrix_heatmaps,
    depth_figures,
    layout_figures,
    recordsize_figures,
)


def tidy(f: Figure) -> Figure:
    """Move the label words every series shares (e.g. compression=lz4) into `common`, so labels show what differs."""
    if len(f.series) < 2:
        return f
    words = [s.label.split() for s in f.series]
    shared = [w for w in words[0] if all(w in ws for ws in words[1:])]
    if not shared:
        return f
    series = tuple(
        Series(" ".join(w for w in ws if w not in shared) or "(same)", s.points) for ws, s in zip(words, f.series)
    )
    return dataclasses.replace(f, series=series, common=" ".join(shared))


def shade_heatmaps(figs: tuple[Figure, ...], separated: set[str]) -> tuple[Figure, ...]:
    """Heatmaps colour only the test cases whose leader is significantly ahead (`separated`); other figures as
    they are."""
    return tuple(
        dataclasses.replace(f, shaded=tuple(c for c in _cases_of(f) if c in separated)) if f.kind == "heatmap" else f
        for f in figs
    )


def _cases_of(f: Figure) -> tuple[str, ...]:
    return tuple(s.label for s in f.series) if f.id == "heatmap-case-iodepth" else f.x_values


def figures(ds: Dataset, metric_of: dict[str, tuple[str, str]]) -> tuple[Figure, ...]:
    """Every figure the journal's axes allow, in a stable order."""
    out: list[Figure] = []
    for make in FIGURES:
        out += make(ds, metric_of)
    return tuple(tidy(f) for f in out)
