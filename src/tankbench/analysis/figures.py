"""Figures keyed on the axes a journal has: each appears when its axes exist (seeds 001, 002, 004; fio-plot)."""

from __future__ import annotations

from dataclasses import dataclass

from tankbench.analysis.cases import Dataset


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


def figures(ds: Dataset, metric_of: dict[str, tuple[str, str]]) -> tuple[Figure, ...]:
    """Every figure the journal's axes allow."""
    return ()
