"""What every exporter shares: the sections rendered once (in report order), which blocks an output shows, and a
value's text where a section gave none."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tankbench.analysis.present import fmt
from tankbench.analysis.result import Analysis, SectionSpec
from tankbench.analysis.section import Block, Cell, Column, Part, Section, Table, Text


@dataclass(frozen=True)
class Rendered:
    """A section as declared and as rendered for this analysis."""

    spec: SectionSpec[Any]
    section: Section


def rendered(a: Analysis) -> list[Rendered]:
    """Every section that shows something, in report order (each section's render is called once)."""
    out = []
    for spec in a.sections:
        s = spec.render(a, a.parts.get(spec.name))
        if s is not None:
            out.append(Rendered(spec, s))
    return out


def in_output(r: Rendered, output: str) -> bool:
    """Whether a section appears in an output (its blocks still choose for themselves)."""
    return output in r.spec.outputs


def blocks_for(blocks: Sequence[Block], output: str) -> Iterator[Block]:
    """The blocks an output shows (a Part shows when any block inside it does)."""
    for b in blocks:
        if output not in b.only:
            continue
        if isinstance(b, Part) and not any(True for _ in blocks_for(b.blocks, output)):
            continue
        yield b


def shows(s: Section, output: str) -> bool:
    """Whether any block of a section shows in an output (a section with none has no heading there either)."""
    return any(True for _ in blocks_for(s.blocks, output))


def columns_for(t: Table, output: str) -> list[int]:
    """Indexes of the columns an output shows."""
    return [i for i, c in enumerate(t.columns) if output in c.only]


def shown_rows(t: Table, output: str) -> tuple[Sequence[Sequence[Any]], int]:
    """(the rows an output shows, how many rows the table has in all)."""
    total = t.total if t.total is not None else len(t.rows)
    limit = t.limit.get(output)
    return (t.rows[:limit] if limit is not None else t.rows), total


def value_text(v: Any) -> str:
    """A value without text of its own: numbers with 3 significant digits, nothing as "—"."""
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return fmt(v)
    return str(v)


def cell_text(v: Any) -> Text:
    """What people read in a cell: a Cell's text, else its value's."""
    if isinstance(v, Cell):
        return v.text if v.text is not None else value_text(v.value)
    return value_text(v)


def cell_value(v: Any) -> Any:
    """What a spreadsheet gets: a Cell's value, else the value itself."""
    return v.value if isinstance(v, Cell) else v


def more_text(t: Table, shown: int, total: int) -> str:
    """The line under a table that shows fewer rows than it has ("" when it shows them all)."""
    if total <= shown:
        return ""
    return (t.more or "Showing {shown} of {total} rows.").format(shown=shown, total=total, rest=total - shown)


def heading(c: Column) -> str:
    return c.heading
