"""results.xlsx: the sections' tables as sheets (every run on the raw sheet, a sheet per test case with colour
scales, …) and the other blocks a section puts in the workbook stacked on its sheet. openpyxl writes the workbook
and the header rows (bold, a comment saying how each column is obtained); the other rows are written as XML and
spliced in (openpyxl takes ~20 s for 100,000 runs). Every text is an inline string: never a formula."""

from __future__ import annotations

import os
import re
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import escape

from openpyxl import Workbook
from openpyxl.cell import WriteOnlyCell
from openpyxl.comments import Comment
from openpyxl.formatting.rule import ColorScaleRule
from openpyxl.styles import Font, PatternFill
from openpyxl.utils import get_column_letter

from tankbench.analysis.figures import Figure
from tankbench.analysis.result import Analysis
from tankbench.analysis.section import XLSX, Block, Figures, Items, Para, Part, Table, plain
from tankbench.bulk import gc_paused
from tankbench.reports.render import Rendered, blocks_for, cell_value, columns_for, in_output, rendered

RED, YELLOW, GREEN = "F8696B", "FFEB84", "63BE7B"
ZVOL_FILL = PatternFill("solid", fgColor="FFF1C9")
NUMBER = "#,##0.00"  # figures and stacked tables: two decimals, thousands separated
ILLEGAL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")  # not allowed in XML 1.0 (e.g. from stderr)


def sheet_title(case: str, used: set[str]) -> str:
    """Excel sheet names: <= 31 chars, no []:*?/\\, unique."""
    base = re.sub(r"[\[\]:*?/\\]", "_", case)[:28] or "case"
    name, i = base, 2
    while name.lower() in used:
        name, i = f"{base[:25]}~{i}", i + 1
    used.add(name.lower())
    return name


def colour_scale(ws: Any, ref: str, higher_better: bool) -> None:
    """3-colour scale red (worst) → yellow → green (best) on a range."""
    lo, hi = (RED, GREEN) if higher_better else (GREEN, RED)
    rule = ColorScaleRule(
        start_type="min", start_color=lo, mid_type="percentile", mid_value=50, mid_color=YELLOW,
        end_type="max", end_color=hi,
    )  # fmt: skip
    ws.conditional_formatting.add(ref, rule)


@dataclass(eq=False)
class Sheet:
    """One worksheet being planned: a table of its own (header by openpyxl, frozen), or stacked blocks."""

    title: str
    table: Table | None = None
    stacked: list[Block | str] = field(default_factory=list)  # a str is a bold title row


def plan(sections: Sequence[Rendered]) -> list[Sheet]:
    """The sheets in order: each section's at its sheet_order (else its order), in the order its blocks come."""
    sheets: list[Sheet] = []
    order = sorted(
        (r for r in sections if in_output(r, XLSX)),
        key=lambda r: r.spec.sheet_order if r.spec.sheet_order is not None else r.spec.order,
    )
    for r in order:
        _walk(r.section.blocks, Sheet(r.section.sheet), sheets)
    return [s for s in sheets if s.table is not None or s.stacked]


def _walk(blocks: Sequence[Block], into: Sheet, sheets: list[Sheet]) -> None:
    """A table or part that names a sheet gets its own; other blocks stack on `into` (none when it has no title)."""
    for b in blocks_for(blocks, XLSX):
        if isinstance(b, Table) and b.sheet:
            sheets.append(Sheet(b.sheet, table=b))
        elif isinstance(b, Part) and b.sheet:
            sheets.append(Sheet(b.sheet))
            _walk(b.blocks, sheets[-1], sheets)
        elif isinstance(b, Part):
            if into.title and any(not (isinstance(x, Table) and x.sheet) for x in blocks_for(b.blocks, XLSX)):
                _stack(into, plain(b.title), sheets)
            _walk(b.blocks, into, sheets)
        elif into.title:
            _stack(into, b, sheets)


def _stack(sheet: Sheet, item: Block | str, sheets: list[Sheet]) -> None:
    if not any(s is sheet for s in sheets):
        sheets.append(sheet)
    sheet.stacked.append(item)


class Styles:
    """Style ids of the cell formats the spliced rows use (registered through a cell openpyxl styles)."""

    def __init__(self, ws: Any) -> None:
        def sid(**kw: Any) -> str:
            c = WriteOnlyCell(ws)
            for k, v in kw.items():
                setattr(c, k, v)
            return str(c.style_id)

        self.bold = sid(font=Font(bold=True))
        self.fill = sid(fill=ZVOL_FILL)
        self.number = sid(number_format=NUMBER)


def _text(v: str, memo: dict[str, str]) -> str:
    t = memo.get(v)
    if t is None:
        t = memo[v] = escape(ILLEGAL.sub("", v))
    return t


def rows_xml(body: Sequence[Sequence[Any]], first_row: int = 2, style: Sequence[str] = ()) -> Iterator[str]:
    """<row> elements of sheetData: inline strings (never a formula), typed numbers, empty cells left out; `style`
    gives a cell style id per column ("" for none) and applies to numbers and texts alike."""
    ncols = max((len(r) for r in body), default=0)
    letters = [get_column_letter(i + 1) for i in range(ncols)]
    styled = [f' s="{s}"' if s else "" for s in style] + [""] * (ncols - len(style))
    memo: dict[str, str] = {}  # a string cell's escaped text: test ids, names, cases repeat on every run's row
    for n, row in enumerate(body, start=first_row):
        out = [f'<row r="{n}">']
        for letter, s, v in zip(letters, styled, row):
            kind = type(v)  # the common types first: 100,000 runs are millions of cells
            if kind is float:
                if v - v == 0:  # finite (inf - inf and nan - nan are nan)
                    out.append(f'<c r="{letter}{n}"{s} t="n"><v>{v!r}</v></c>')
            elif kind is int:
                out.append(f'<c r="{letter}{n}"{s} t="n"><v>{v}</v></c>')
            elif kind is str:
                if v:
                    out.append(f'<c r="{letter}{n}"{s} t="inlineStr"><is><t>{_text(v, memo)}</t></is></c>')
            elif kind is bool:
                out.append(f'<c r="{letter}{n}"{s} t="b"><v>{int(v)}</v></c>')
            elif v is not None:  # anything else as its text
                out.append(f'<c r="{letter}{n}"{s} t="inlineStr"><is><t>{_text(str(v), memo)}</t></is></c>')
        out.append("</row>")
        yield "".join(out)


def _widths(rows: Sequence[Sequence[Any]], head: Sequence[str]) -> list[float]:
    """Column widths from the header and the first 200 rows, 8 to 60 characters."""
    w = [len(h) for h in head]
    for row in rows[:200]:
        for i, v in enumerate(row[: len(w)]):
            v = cell_value(v)
            n = len(v) if isinstance(v, str) else 10 if isinstance(v, float) else len(str(v)) if v is not None else 0
            w[i] = max(w[i], n)
    return [min(60.0, max(8.0, n + 2.0)) for n in w]


def _values(t: Table, cols: list[int]) -> Sequence[Sequence[Any]]:
    every = len(cols) == len(t.columns)
    if every and not any(type(v) not in (str, int, float, bool, type(None)) for v in (t.rows[0] if t.rows else ())):
        return t.rows  # plain values (every run): written as they are
    return [[cell_value(r[i]) for i in cols] for r in t.rows]


def table_sheet(ws: Any, t: Table, styles: Styles) -> list[str]:
    """A table on a sheet of its own: the header by openpyxl (bold, comments, frozen), the rows as XML."""
    cols = columns_for(t, XLSX)
    head = []
    for i in cols:
        c = WriteOnlyCell(ws, t.columns[i].key)
        c.data_type = "s"  # a column named like a formula stays a name
        c.font = Font(bold=True)
        if t.columns[i].tip:
            c.comment = Comment(t.columns[i].tip, "tankbench")
        head.append(c)
    if t.freeze:
        ws.freeze_panes = "A2"
    values = _values(t, cols)
    for n, w in enumerate(_widths(values, [t.columns[i].key for i in cols]), start=1):
        ws.column_dimensions[get_column_letter(n)].width = w
    ws.append(head)
    for n, i in enumerate(cols, start=1):
        if t.columns[i].scale is not None and values:
            letter = get_column_letter(n)
            colour_scale(ws, f"{letter}2:{letter}{len(values) + 1}", bool(t.columns[i].scale))
    if not t.fill_style:
        return list(rows_xml(values))
    plain_style, filled = [""] * len(cols), [styles.fill] * t.fill_columns
    out: list[str] = []
    for n, row in enumerate(values):
        fill = n < len(t.row_styles) and t.fill_style in t.row_styles[n].split()
        out += rows_xml([row], n + 2, filled if fill else plain_style)
    return out


def stacked_sheet(ws: Any, items: Sequence[Block | str], styles: Styles) -> list[str]:
    """Blocks one under another: a bold title row, a table's bold header and rows, a figure as a block."""
    out: list[str] = []
    at = 1
    for item in items:
        if isinstance(item, str):
            out += rows_xml([[item]], at, [styles.bold])
            at += 1
        elif isinstance(item, Table):
            cols = columns_for(item, XLSX)
            out += rows_xml([[item.columns[i].heading for i in cols]], at, [styles.bold] * len(cols))
            values = _values(item, cols)
            out += rows_xml(values, at + 1, [styles.number] * len(cols))
            at += len(values) + 2
        elif isinstance(item, Para | Items):
            lines = [
                line for t in (item.items if isinstance(item, Items) else (item.text,)) for line in plain(t).split("\n")
            ]
            out += rows_xml([[line] for line in lines], at)
            at += len(lines) + 1
        elif isinstance(item, Figures):
            for f in item.figures:
                lines, at = figure_rows(ws, f, at, item.higher, styles)
                out += lines
    for n, w in enumerate([14.0] + [12.0] * 40, start=1):
        ws.column_dimensions[get_column_letter(n)].width = w if n > 1 else 48.0
    return out


def figure_rows(ws: Any, f: Figure, at: int, higher: Any, styles: Styles) -> tuple[list[str], int]:
    """A figure as a block from row `at`: title, shared settings, note, its x values as columns and one row per
    series; a heatmap coloured per column (or per row) as its title says. Returns the rows and the next row."""
    unit = f.y_label or ("" if f.metric == "auto" else f.metric)
    out = list(rows_xml([[f"{f.title}" + (f" ({unit})" if unit else "")]], at, [styles.bold]))
    at += 1
    for line in (f"all rows: {f.common}" if f.common else "", f.note):
        if line:
            out += rows_xml([[line]], at)
            at += 1
    out += rows_xml([[f"{f.x} →", *f.x_values]], at, [styles.bold] * (1 + len(f.x_values)))
    first = at + 1
    series = [[s.label, *(v for _, v in s.points)] for s in f.series]
    out += rows_xml(series, first, ["", *[styles.number] * len(f.x_values)])
    last = first + len(series) - 1
    if f.kind == "heatmap" and series:
        if f.by_row:
            for n, s in enumerate(f.series):
                colour_scale(ws, f"B{first + n}:{get_column_letter(1 + len(f.x_values))}{first + n}",
                             higher.get(s.label, True))  # fmt: skip
        else:
            for i, x in enumerate(f.x_values):
                letter = get_column_letter(2 + i)
                colour_scale(ws, f"{letter}{first}:{letter}{last}", higher.get(x, True))
    return out, last + 2


def splice_rows(path: str, rows: dict[str, list[str]]) -> None:
    """Append rows to worksheets of a saved workbook: rewrite the zip with each sheet's rows inserted at the end
    of its <sheetData> (every other part is copied as it is)."""
    tmp = path + ".tmp"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            xml = rows.get(info.filename)
            if xml:
                text = re.sub(r"<sheetData\s*/>", "<sheetData></sheetData>", data.decode("utf-8"), count=1)
                at = text.index("</sheetData>")
                body = text[:at] + "".join(xml) + text[at:]
                dst.writestr(info, body, compress_type=zipfile.ZIP_DEFLATED, compresslevel=1)
            else:
                dst.writestr(info, data)
    os.replace(tmp, path)


def write_xlsx(a: Analysis, path: str, sections: Sequence[Rendered] | None = None) -> None:
    """results.xlsx: the workbook by openpyxl, then each sheet's rows spliced in."""
    wb = Workbook(write_only=True)
    used: set[str] = set()
    spliced: dict[str, list[str]] = {}
    styles: Styles | None = None
    with gc_paused():  # a string per row
        for n, sheet in enumerate(plan(sections if sections is not None else rendered(a)), start=1):
            ws = wb.create_sheet(sheet_title(sheet.title, used))
            styles = styles or Styles(ws)
            rows = table_sheet(ws, sheet.table, styles) if sheet.table else stacked_sheet(ws, sheet.stacked, styles)
            spliced[f"xl/worksheets/sheet{n}.xml"] = rows
    if not used:
        wb.create_sheet("report")  # a workbook has at least one sheet
    wb.save(path)
    splice_rows(path, spliced)
