"""results.xlsx (openpyxl): a raw sheet of every run plus one sheet per test case with colour scales."""

from __future__ import annotations

import math
import os
import re
import zipfile
from typing import Any
from xml.sax.saxutils import escape

from openpyxl import Workbook
from openpyxl.cell import WriteOnlyCell
from openpyxl.comments import Comment
from openpyxl.formatting.rule import ColorScaleRule
from openpyxl.styles import Font, PatternFill
from openpyxl.utils import get_column_letter

from tankbench.analysis.analyse import Analysis
from tankbench.analysis.leaderboard import Leaderboard
from tankbench.bulk import gc_paused
from tankbench.metrics import METRICS
from tankbench.reports.common import EXPLAIN, guest_header, guest_values
from tankbench.reports.csv import axis_columns, rows
from tankbench.reports.csv import header as csv_header

RED, YELLOW, GREEN = "F8696B", "FFEB84", "63BE7B"
ZVOL_FILL = PatternFill("solid", fgColor="FFF1C9")
CASE_HEAD = ("rank", "test_number", "test_name", "test_id", "target_kind", "config")
CASE_TAIL = ("baseline", "winner", "n", "ranked_by", "rank_value", "ci95_low", "ci95_high")
CASE_END = ("vs_fastest_baseline", "vs_first_place", "load_per_mibs", "cost")


def sheet_title(case: str, used: set[str]) -> str:
    """Excel sheet names: <= 31 chars, no []:*?/\\, unique."""
    base = re.sub(r"[\[\]:*?/\\]", "_", case)[:28] or "case"
    name, i = base, 2
    while name.lower() in used:
        name, i = f"{base[:25]}~{i}", i + 1
    used.add(name.lower())
    return name


def colour_scale(ws: Any, col: int, n_rows: int, higher_better: bool) -> None:
    """3-colour scale red (worst) → yellow → green (best) on a column."""
    ref = f"{get_column_letter(col)}2:{get_column_letter(col)}{n_rows + 1}"
    lo, hi = (RED, GREEN) if higher_better else (GREEN, RED)
    ws.conditional_formatting.add(
        ref,
        ColorScaleRule(
            start_type="min",
            start_color=lo,
            mid_type="percentile",
            mid_value=50,
            mid_color=YELLOW,
            end_type="max",
            end_color=hi,
        ),
    )


def header(ws: Any, names: tuple[str, ...], notes: dict[str, str]) -> None:
    """Bold header row, with a comment saying how each noted column is obtained; frozen below it."""
    cells = []
    for name in names:
        c = WriteOnlyCell(ws, name)
        c.font = Font(bold=True)
        if name in notes:
            c.comment = Comment(notes[name], "tankbench")
        cells.append(c)
    ws.freeze_panes = "A2"
    ws.append(cells)


def case_header(a: Analysis) -> tuple[str, ...]:
    """Columns of a test-case sheet: who, every axis, the ranking figure, every measured registry figure."""
    return (*CASE_HEAD, *axis_columns(a), *CASE_TAIL, *(f"{k}_mean" for k in a.dataset.present()), *CASE_END)


def case_sheet(ws: Any, lb: Leaderboard, a: Analysis) -> None:
    """One test case: rank, test, axes, means, CI, ratios, cost; zvol rows filled; colour scales on the numbers."""
    names = case_header(a)
    axes, present = axis_columns(a), a.dataset.present()
    notes = {f"{k}_mean": EXPLAIN[k] for k in present}
    notes.update(
        {
            "rank_value": EXPLAIN[lb.metric] + f" (ranks because: {lb.reason})",
            "ci95_low": EXPLAIN["ci"],
            "vs_first_place": EXPLAIN["vs_first"],
            "vs_fastest_baseline": EXPLAIN["vs_baseline"],
            "load_per_mibs": EXPLAIN["load_per_mibs"],
        }
    )
    header(ws, names, notes)
    for r in lb.rows:
        t = r.test
        s = t.stats.get(lb.metric)
        ax = t.axes()
        row: list[Any] = [
            r.rank,
            t.number,
            t.name,
            t.id,
            t.target_kind,
            t.config,
            *(ax.get(k, "") for k in axes),
            int(t.is_baseline),
            int(r.is_winner),
            len(t.measured),
            lb.metric,
            r.value,
            s.ci_low if s else None,
            s.ci_high if s else None,
            *(t.mean(k) for k in present),
            r.vs_baseline.text if r.vs_baseline else "",
            r.vs_first.text if r.vs_first else "",
            r.cost.load_per_mibs,
            r.cost.text,
        ]
        if t.traits.volume:
            for i in range(len(CASE_HEAD)):
                row[i] = WriteOnlyCell(ws, row[i])
                row[i].fill = ZVOL_FILL
        ws.append(row)
    if not lb.rows or not lb.shade:  # best-to-worst colours only when the leader is significantly ahead
        return
    for i, name in enumerate(names, start=1):
        hb = (
            METRICS[lb.metric].higher_is_better
            if name == "rank_value"
            else METRICS[name[:-5]].higher_is_better
            if name.endswith("_mean") and name[:-5] in METRICS
            else False
            if name == "load_per_mibs"
            else None
        )
        if hb is not None:
            colour_scale(ws, i, len(lb.rows), hb)


def figures_sheet(ws: Any, a: Analysis) -> None:
    """Each figure as a block: title, then its x values as columns and one row per series."""
    for f in a.figures:
        unit = "" if f.metric == "auto" else f" ({METRICS[f.metric].label})"
        title = WriteOnlyCell(ws, f"{f.title}{unit}")
        title.font = Font(bold=True)
        ws.append([title])
        if f.common:
            ws.append([f"all rows: {f.common}"])
        if f.note:
            ws.append([f.note])
        ws.append([f"{f.x} →", *f.x_values])
        for s in f.series:
            ws.append([s.label, *(v for _, v in s.points)])
        ws.append([])


def guests_sheet(ws: Any, a: Analysis) -> None:
    """Each guest-vs-host table (analysis/guest.py) as a block: the case and workload, then its rows."""
    for g in a.guests:
        title = WriteOnlyCell(ws, f"{g.case}" + (f" ({g.workload})" if g.workload else ""))
        title.font = Font(bold=True)
        ws.append([title])
        ws.append(guest_header(g.metric))
        for r in g.rows:
            ws.append(guest_values(r, g.metric))
        ws.append([])


def build_workbook(a: Analysis) -> Workbook:
    """Write-only workbook (fast for 100,000s of runs): raw (one row per run), one sheet per test case, warnings."""
    wb = Workbook(write_only=True)
    raw = wb.create_sheet("raw")
    header(
        raw,
        csv_header(a),
        {
            **{k: EXPLAIN[k] for k in a.dataset.present()},
            "late": "1 when wall − ramp − runtime + drain exceeded the timing threshold",
        },
    )
    # the run rows are spliced into the saved file by write_xlsx (openpyxl takes ~20 s for 100,000 runs)
    used = {"raw", "warnings"}
    for lb in a.leaderboards:
        case_sheet(wb.create_sheet(sheet_title(lb.case, used)), lb, a)
    if a.guests:
        guests_sheet(wb.create_sheet(sheet_title("guest vs host", used)), a)
    if a.figures:
        figures_sheet(wb.create_sheet(sheet_title("figures", used)), a)
    ws = wb.create_sheet("warnings")
    header(ws, ("severity", "code", "message", "fix", "test_ids"), {})
    for w in a.warnings:
        ws.append([w.severity, w.code, w.message, w.fix, " ".join(w.test_ids)])
    return wb


RAW_SHEET = "xl/worksheets/sheet1.xml"  # the first sheet created: raw
ILLEGAL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")  # not allowed in XML 1.0 (e.g. from stderr)


def _cell(ref: str, v: Any) -> str:
    if v is None or v == "":
        return ""
    if isinstance(v, bool):
        return f'<c r="{ref}" t="b"><v>{int(v)}</v></c>'
    if isinstance(v, int | float) and math.isfinite(v):
        return f'<c r="{ref}" t="n"><v>{v!r}</v></c>'
    return f'<c r="{ref}" t="inlineStr"><is><t>{escape(ILLEGAL.sub("", str(v)))}</t></is></c>'


def rows_xml(body: list[list[Any]], first_row: int = 2) -> str:
    """<row> elements of sheetData for the given rows, as openpyxl's write-only mode writes them (inline strings,
    typed numbers, empty cells left out)."""
    ncols = max((len(r) for r in body), default=0)
    letters = [get_column_letter(i + 1) for i in range(ncols)]
    out = []
    text: dict[str, str] = {}  # a string cell's escaped text: test ids, names, cases repeat on every run's row
    for n, row in enumerate(body, start=first_row):
        out.append(f'<row r="{n}">')
        for letter, v in zip(letters, row):
            kind = type(v)  # the common types first, without _cell's checks: 100,000 runs are millions of cells
            if kind is float:
                if v - v == 0:  # finite (inf - inf and nan - nan are nan)
                    out.append(f'<c r="{letter}{n}" t="n"><v>{v!r}</v></c>')
                    continue
            elif kind is int:
                out.append(f'<c r="{letter}{n}" t="n"><v>{v}</v></c>')
                continue
            elif v is None:
                continue
            elif kind is str and v:
                t = text.get(v)
                if t is None:
                    t = text[v] = escape(ILLEGAL.sub("", v))
                out.append(f'<c r="{letter}{n}" t="inlineStr"><is><t>{t}</t></is></c>')
                continue
            out.append(_cell(f"{letter}{n}", v))
        out.append("</row>")
    return "".join(out)


def splice_rows(path: str, sheet: str, xml_rows: str) -> None:
    """Append rows to one worksheet of a saved workbook: rewrite the zip with the rows inserted at the end of
    the sheet's <sheetData> (fast path for the raw sheet; every other part is copied as it is)."""
    tmp = path + ".tmp"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename == sheet:
                text = data.decode("utf-8")
                at = text.index("</sheetData>")
                dst.writestr(
                    info, text[:at] + xml_rows + text[at:], compress_type=zipfile.ZIP_DEFLATED, compresslevel=1
                )
            else:
                dst.writestr(info, data)
    os.replace(tmp, path)


def write_xlsx(a: Analysis, path: str) -> None:
    """results.xlsx: the workbook by openpyxl, then the raw sheet's rows spliced in."""
    build_workbook(a).save(path)
    with gc_paused():  # a list per run
        xml = rows_xml(rows(a))
    splice_rows(path, RAW_SHEET, xml)
