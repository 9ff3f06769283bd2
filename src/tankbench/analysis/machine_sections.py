"""What `compare` shows of machines side by side, as generic report blocks (analysis/section.py): the exporters
draw them as they draw any report section (compare.html, compare.md). Claims first (what a reader of a seed wants
to know), then the machines' fingerprints with their differences marked, the shared tests with each machine's
ratio to the first and the versions that differ next to every ratio, a chart per test case, and what not every
machine ran."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tankbench import __version__, build_commit
from tankbench.analysis.machines import MachineComparison, MachineRow, fmt_ratio
from tankbench.analysis.present import fmt, metric_label
from tankbench.analysis.section import Cell, Column, Figures, Items, Para, Section, Span, Table

RATIO_TIP = (
    "mean on this machine / mean on the first machine; 95 % interval of the ratio of means on the log scale "
    "(delta method, Welch–Satterthwaite df; Kalibera and Jones 2013); not significant when it holds 1"
)


def verdict_of(v: Any) -> str:
    """holds / does not hold / undecided, from a claim's verdict ("" when the campaign does not state it)."""
    return str(getattr(v, "verdict", "") or "")


def verdict_text(v: Any, label: str) -> str:
    """`holds on A 5.1× [4.2–6.3]`: a machine's verdict on a claim, as issue 31 words it."""
    if v is None:
        return f"not stated on {label}"
    interval = getattr(v, "interval_text", None)
    shown = interval() if callable(interval) else ""
    return f"{verdict_of(v) or v} on {label}" + (f" {shown}" if shown else "")


def _style(v: Any) -> str:
    word = verdict_of(v)
    return {"holds": "holds", "does not hold": "fails", "undecided": "undecided"}.get(word, "")


def head(mc: MachineComparison) -> Section:
    ms = mc.machines
    text = (
        f"{len(ms)} machines: " + ", ".join(f"{m.label} ({m.source})" for m in ms) + f". {len(mc.shared)} tests ran "
        f"on every machine, {len(mc.partial)} on some only. Ratios are each machine's mean over the first "
        f"machine's ({ms[0].label}) with their 95 % interval; an interval that holds 1 is not significant."
    )
    blocks: list[Any] = [Para(text)]
    if mc.version_notes:
        blocks.append(
            Para(
                (Span("Versions differ", "b"), Span(" (said next to every ratio): " + "; ".join(mc.version_notes))),
                "note",
            )
        )
    return Section("head", f"tankbench compare: {' vs '.join(m.label for m in ms)}", tuple(blocks), level=1)


def claims(mc: MachineComparison) -> Section | None:
    if not mc.claims and not mc.unmatched_claims:
        return None
    ms = mc.machines
    cols = (Column("claim"), *(Column(m.label) for m in ms))
    rows = [
        (
            Cell(c.name, (Span(c.name, "b"), Span(" — " + c.text, "small"))),
            *(Cell(verdict_of(v), verdict_text(v, m.label), style=_style(v)) for m, v in zip(ms, c.verdicts)),
        )
        for c in mc.claims
    ]
    blocks: list[Any] = [Table(cols, rows, wide=False)]
    if mc.unmatched_claims:
        blocks.append(Items(tuple(f"not matched: {u}" for u in mc.unmatched_claims)))
    return Section("claims", "Claims", tuple(blocks))


def machines(mc: MachineComparison) -> Section:
    cols = (Column("key"), *(Column(m.label) for m in mc.machines))
    rows = [(f.key + (" ≠" if f.differs else ""), *(v or "—" for v in f.values)) for f in mc.fingerprint]
    styles = ["diff" if f.differs else "" for f in mc.fingerprint]
    return Section(
        "machines",
        "Machines",
        (Para("Rows marked ≠ (highlighted) differ between machines.", "small"), Table(cols, rows, row_styles=styles)),
    )


def _ratio(c: Any) -> Cell:
    if c is None:
        return Cell(None, "not run")
    text = fmt_ratio(c) + (" (not significant)" if c.significant is False else "")
    if c.versions:
        text += " — " + "; ".join(c.versions)
    return Cell(c.ratio, text, tip=RATIO_TIP)


def tests_table(mc: MachineComparison, rows: Sequence[MachineRow]) -> Table:
    ms = mc.machines
    cols = (
        Column("#", num=True),
        Column("test"),
        Column("figure"),
        *(Column(m.label, num=True) for m in ms),
        *(Column(f"{m.label} / {ms[0].label}", num=True, tip=RATIO_TIP) for m in ms[1:]),
    )
    body = [
        (
            r.number,
            r.name,
            metric_label(r.metric),
            *(Cell(c.mean, fmt(c.mean)) if c else Cell(None, "not run") for c in r.cells),
            *(_ratio(c) for c in r.cells[1:]),
        )
        for r in rows
    ]
    return Table(cols, body)


def shared(mc: MachineComparison) -> Section:
    blocks: list[Any] = [tests_table(mc, mc.shared)]
    if mc.figures:
        blocks.append(Para("Each test case, every machine (a bar per machine):", "small"))
        blocks.append(Figures(mc.figures))
    return Section("shared", "Tests on every machine", tuple(blocks))


def partial(mc: MachineComparison) -> Section | None:
    if not mc.partial:
        return None
    return Section("partial", "Tests not on every machine", (tests_table(mc, mc.partial),))


def footer() -> Section:
    return Section(
        "about", "About", (Para(f"Written by tankbench {__version__} (commit {build_commit()[:12]}).", "small"),)
    )


def comparison_sections(mc: MachineComparison) -> tuple[Section, ...]:
    """The comparison, section by section, in the order a reader wants it."""
    parts = (head(mc), claims(mc), machines(mc), shared(mc), partial(mc), footer())
    return tuple(s for s in parts if s is not None)
