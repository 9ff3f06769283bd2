"""results.xlsx: reopen with openpyxl; raw sheet, one sheet per test case, colour scales, zvol fill."""

from __future__ import annotations

from pathlib import Path

from openpyxl import load_workbook
from openpyxl.formatting.rule import ColorScale

from tankbench.analysis.analyse import analyse_journal
from tankbench.reports.xlsx import sheet_title, write_xlsx
from tests.reportdata import imported_journal, local_journal


def _write(tmp_path: Path, journal: str) -> tuple[object, object]:
    a = analyse_journal(journal)
    out = tmp_path / "results.xlsx"
    write_xlsx(a, str(out))
    return a, load_workbook(out)


def test_sheets_and_colour_scales(tmp_path: Path) -> None:
    a, wb = _write(tmp_path, local_journal(tmp_path))
    assert wb.sheetnames == ["about", "raw", "read random 4k", "write seq 4k", "figures", "warnings"]
    figs = [[c.value for c in row] for row in wb["figures"].iter_rows()]
    assert ["iodepth →", "1", "4"] in figs  # IOPS and p99 against iodepth (seed 001), tabulated
    raw = wb["raw"]
    assert raw.max_row == 1 + a.dataset.n_runs  # warm-ups included, flagged
    header = [c.value for c in raw[1]]
    assert header[:3] == ["run_row_id", "test_id", "test_number"] and "warmup" in header
    ws = wb["read random 4k"]
    assert ws.max_row == 1 + 8
    rules = [r for cf in ws.conditional_formatting for r in cf.rules]
    assert rules and all(r.type == "colorScale" and isinstance(r.colorScale, ColorScale) for r in rules)
    colours = {tuple(c.rgb for c in r.colorScale.color) for r in rules}
    assert ("00F8696B", "00FFEB84", "0063BE7B") in colours  # higher is better: red → green
    assert ("0063BE7B", "00FFEB84", "00F8696B") in colours  # p99, load: lower is better
    hdr = [c.value for c in ws[1]]
    assert ws.cell(2, hdr.index("winner") + 1).value == 1
    assert ws.cell(1, hdr.index("rank_value") + 1).comment is not None  # how the number is obtained


def test_zvol_rows_filled(tmp_path: Path) -> None:
    a, wb = _write(tmp_path, imported_journal(tmp_path))
    ws = wb["readwrite random 16k"]
    kinds = {ws.cell(r, 5).value: ws.cell(r, 1).fill.fgColor.rgb for r in range(2, ws.max_row + 1)}
    assert kinds["zvol"] == "00FFF1C9" and kinds["file"] != "00FFF1C9"
    warn = wb["warnings"]
    assert any(warn.cell(r, 2).value == "emulated" for r in range(2, warn.max_row + 1))


def test_sheet_titles_are_valid_and_unique() -> None:
    used: set[str] = {"raw"}
    a = sheet_title("read random 4k iodepth=16 numjobs=4 [x]", used)
    b = sheet_title("read random 4k iodepth=16 numjobs=4 [y]", used)
    assert len(a) <= 31 and len(b) <= 31 and a != b and "[" not in a


def test_raw_sheet_fast_path_matches_csv_rows(tmp_path: Path) -> None:
    """The raw rows are spliced into the saved workbook as XML: openpyxl must read back exactly the CSV rows."""
    from tankbench.analysis.sections.runs import header, rows
    from tests.reportdata import lab_zfs_journal

    a, wb = _write(tmp_path, lab_zfs_journal(tmp_path))
    raw = wb["raw"]
    assert [c.value for c in raw[1]] == list(header(a))
    got = [[c.value for c in row] for row in raw.iter_rows(min_row=2)]
    want = [[None if v == "" else v for v in r] for r in rows(a)]
    assert len(got) == len(want) == 36
    for g, w in zip(got, want):
        assert g[: len(w)] == [int(v) if isinstance(v, bool) else v for v in w]
    assert raw.freeze_panes == "A2" and raw.cell(1, 1).font.b
