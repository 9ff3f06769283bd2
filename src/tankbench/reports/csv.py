"""results.csv: the table a section gives the CSV (every run, one row each: analysis/sections/runs.py). Text that
a spreadsheet would take for a formula (a cell beginning with =, +, -, @, tab or carriage return) is neutralised
as OWASP describes for CSV injection, with a leading single quote; numbers stay numbers."""

from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence
from typing import Any

from tankbench.analysis.result import Analysis
from tankbench.analysis.section import CSV, Cell, Table
from tankbench.reports.render import Rendered, blocks_for, cell_value, columns_for, in_output, rendered

FORMULA_START = frozenset("=+-@\t\r")


def safe(v: Any) -> Any:
    """A value as the CSV holds it: text that starts like a formula gets a leading ' (OWASP), the rest unchanged."""
    v = cell_value(v)
    return "'" + v if type(v) is str and v and v[0] in FORMULA_START else v


def csv_table(sections: Sequence[Rendered]) -> Table | None:
    """The one table results.csv holds."""
    for r in sections:
        if in_output(r, CSV):
            for b in blocks_for(r.section.blocks, CSV):
                if isinstance(b, Table):
                    return b
    return None


def neutralised(rows: Sequence[Sequence[Any]]) -> Iterator[Sequence[Any]]:
    """The rows with each text that starts like a formula neutralised. The distinct values are collected first (in
    C, by set.update): only the rows holding such a text are copied, none when there is none (100,000s of runs)."""
    distinct: set[Any] = set()
    for row in rows:
        distinct.update(row)
    if any(type(v) is Cell for v in distinct):
        yield from ([safe(v) for v in row] for row in rows)
        return
    bad = {v: "'" + v for v in distinct if type(v) is str and v and v[0] in FORMULA_START}
    if not bad:
        yield from rows
        return
    for row in rows:
        yield row if bad.keys().isdisjoint(row) else [bad.get(v, v) if type(v) is str else v for v in row]


def write_csv(a: Analysis, path: str, sections: Sequence[Rendered] | None = None) -> None:
    t = csv_table(sections if sections is not None else rendered(a))
    with open(path, "w", encoding="utf-8", newline="") as f:
        if t is None:
            return
        w = csv.writer(f)
        cols = columns_for(t, CSV)
        w.writerow([safe(t.columns[i].key) for i in cols])
        rows = t.rows if len(cols) == len(t.columns) else [[r[i] for i in cols] for r in t.rows]
        w.writerows(neutralised(rows))
