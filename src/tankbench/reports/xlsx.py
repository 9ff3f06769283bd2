"""results.xlsx (openpyxl): a raw sheet of every run plus one sheet per test case with colour scales."""

from __future__ import annotations

import re

from openpyxl import Workbook
from openpyxl.comments import Comment
from openpyxl.formatting.rule import ColorScaleRule
from openpyxl.styles import Font, PatternFill
from openpyxl.utils import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

from tankbench.analysis.analyse import Analysis
from tankbench.analysis.cases import METRICS
from tankbench.analysis.leaderboard import Leaderboard
from tankbench.reports.common import EXPLAIN
from tankbench.reports.csv import HEADER, rows

RED, YELLOW, GREEN = "F8696B", "FFEB84", "63BE7B"
ZVOL_FILL = PatternFill("solid", fgColor="FFF1C9")
CASE_HEADER = ("rank", "test_number", "test_name", "test_id", "target_kind", "config", "baseline", "winner",
               "n", "mibs_mean", "mibs_sd", "iops_mean", "p99_ms_mean", "corrected_mibs_mean", "rank_value",
               "ci95_low", "ci95_high", "vs_fastest_baseline", "vs_first_place", "load1", "load_per_mibs", "cost")
COLOUR_COLUMNS = {"mibs_mean": True, "iops_mean": True, "p99_ms_mean": False, "corrected_mibs_mean": True,
                  "rank_value": None, "load1": False, "load_per_mibs": False}


def sheet_title(case: str, used: set[str]) -> str:
    """Excel sheet names: <= 31 chars, no []:*?/\\, unique."""
    base = re.sub(r"[\[\]:*?/\\]", "_", case)[:28] or "case"
    name, i = base, 2
    while name.lower() in used:
        name, i = f"{base[:25]}~{i}", i + 1
    used.add(name.lower())
    return name


def colour_scale(ws: Worksheet, col: int, n_rows: int, higher_better: bool) -> None:
    """3-colour scale red (worst) → yellow → green (best) on a column."""
    ref = f"{get_column_letter(col)}2:{get_column_letter(col)}{n_rows + 1}"
    lo, hi = (RED, GREEN) if higher_better else (GREEN, RED)
    ws.conditional_formatting.add(ref, ColorScaleRule(start_type="min", start_color=lo, mid_type="percentile",
                                                      mid_value=50, mid_color=YELLOW, end_type="max", end_color=hi))


def case_sheet(ws: Worksheet, lb: Leaderboard) -> None:
    ws.append(list(CASE_HEADER))
    for r in lb.rows:
        t = r.test
        s = t.stats.get(lb.metric)
        mib = t.stats.get("mibs")
        ws.append([r.rank, t.number, t.name, t.id, t.target_kind, t.config, int(t.is_baseline), int(r.is_winner),
                   len(t.measured), t.mean("mibs"), mib.sd if mib else None, t.mean("iops"), t.mean("p99"),
                   t.mean("corrected"), r.value, s.ci_low if s else None, s.ci_high if s else None,
                   r.vs_baseline.text if r.vs_baseline else "", r.vs_first.text if r.vs_first else "",
                   t.load1.mean if t.load1 else None, r.cost.load_per_mibs, r.cost.text])
        if t.target_kind == "zvol":
            for cell in ws[ws.max_row][:6]:
                cell.fill = ZVOL_FILL
    for i, name in enumerate(CASE_HEADER, start=1):
        if name in COLOUR_COLUMNS and lb.rows:
            hb = COLOUR_COLUMNS[name]
            colour_scale(ws, i, len(lb.rows), METRICS[lb.metric].higher_is_better if hb is None else hb)
    _header(ws, {"rank_value": EXPLAIN[lb.metric], "ci95_low": EXPLAIN["ci"], "vs_first_place": EXPLAIN["vs_first"],
                 "vs_fastest_baseline": EXPLAIN["vs_baseline"], "load1": EXPLAIN["load1"],
                 "load_per_mibs": EXPLAIN["load_per_mibs"], "mibs_mean": EXPLAIN["mibs"]})


def _header(ws: Worksheet, notes: dict[str, str]) -> None:
    for cell in ws[1]:
        cell.font = Font(bold=True)
        if cell.value in notes:
            cell.comment = Comment(notes[str(cell.value)], "tankbench")
    ws.freeze_panes = "A2"


def build_workbook(a: Analysis) -> Workbook:
    """Workbook with sheets: raw (one row per run), one per test case, warnings."""
    wb = Workbook()
    raw = wb.active
    assert raw is not None
    raw.title = "raw"
    raw.append(list(HEADER))
    for row in rows(a):
        raw.append(row)
    _header(raw, {"mibs": EXPLAIN["mibs"], "corrected_mibs": EXPLAIN["corrected"], "excess_s": EXPLAIN["excess"]})
    used = {"raw", "warnings"}
    for lb in a.leaderboards:
        case_sheet(wb.create_sheet(sheet_title(lb.case, used)), lb)
    ws = wb.create_sheet("warnings")
    ws.append(["severity", "code", "message", "fix", "test_ids"])
    for w in a.warnings:
        ws.append([w.severity, w.code, w.message, w.fix, " ".join(w.test_ids)])
    _header(ws, {})
    return wb


def write_xlsx(a: Analysis, path: str) -> None:
    build_workbook(a).save(path)
