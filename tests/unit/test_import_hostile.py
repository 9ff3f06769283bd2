"""`tankbench import` on fio output as users have it, not as fio's manual shows it: a job that failed, runs
appended into one file with `>>`, `--output-format=json,normal`, the text formats given by mistake, files cut
short, and JSON of the wrong shape. Each imports, or fails with `Error:` naming the file (and the key), exit 2,
with no journal written."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES, tankbench

PUBLIC = FIXTURES / "fio-public"
FAILED = PUBLIC / "local-fio-3.33-jsonplus-one-job-failed.json"
APPENDED = PUBLIC / "local-fio-3.33-two-runs-appended.json"
JSON_NORMAL = PUBLIC / "local-fio-3.33-json-and-normal.json"
TERSE = PUBLIC / "local-fio-3.33-terse.txt"
FIO31 = PUBLIC / "fio-3.1-fioplot-randread-qd1.json"


def _import(tmp_path: Path, *files: Path) -> tuple[Any, Path]:
    journal = tmp_path / "j.sqlite"
    return tankbench("import", *map(str, files), "--journal", str(journal), cwd=tmp_path, timeout=120), journal


def _runs(journal: Path) -> list[tuple[str, str, int]]:
    with sqlite3.connect(journal) as db:
        rows = db.execute(
            "SELECT t.name, r.status, r.exit_status FROM runs r JOIN tests t ON t.id = r.test_id ORDER BY t.number"
        ).fetchall()
    return [(str(n), str(s), int(e)) for n, s, e in rows]


def _refused(res: Any, journal: Path, *words: str) -> None:
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("Error: ") and "Hint: " in res.stderr, res.stderr
    assert "Traceback" not in res.stderr + res.stdout
    for w in words:
        assert w in res.stderr, res.stderr
    assert not journal.exists(), "nothing is written on bad input"


def test_a_job_that_failed_is_a_failed_run_and_the_report_says_so(tmp_path: Path) -> None:
    res, journal = _import(tmp_path, FAILED)
    assert res.returncode == 0, res.stderr
    assert _runs(journal) == [("randrw-ok", "done", 0), ("write-nosize", "failed", 22)]
    rep = tankbench("report", "--journal", str(journal), "--out", str(tmp_path / "r"), timeout=120)
    assert rep.returncode == 0, rep.stderr
    assert "failed-runs" in (tmp_path / "r" / "summary.md").read_text()


def test_runs_appended_into_one_file_are_all_imported(tmp_path: Path) -> None:
    """`for bs in 4k 64k; do fio --output-format=json … >> out.json; done`: both runs, not only the first."""
    res, journal = _import(tmp_path, APPENDED)
    assert res.returncode == 0, res.stderr
    assert "imported 2 runs of 2 tests" in res.stdout
    assert [n for n, _, _ in _runs(journal)] == ["seqread-4k", "seqread-64k"]


def test_json_and_normal_output_imports_the_json(tmp_path: Path) -> None:
    res, journal = _import(tmp_path, JSON_NORMAL)
    assert res.returncode == 0, res.stderr
    assert _runs(journal) == [("randread", "done", 0)]


def test_terse_output_is_named_as_such(tmp_path: Path) -> None:
    res, journal = _import(tmp_path, TERSE)
    _refused(res, journal, f"{TERSE}: fio's terse output, not JSON", "--output-format=json")


def test_normal_output_is_named_as_such(tmp_path: Path) -> None:
    text = JSON_NORMAL.read_text()
    normal = tmp_path / "normal.txt"
    normal.write_text(text[: text.index("{")] + text[text.rindex("}") + 1 :])  # the same run without its JSON
    res, journal = _import(tmp_path, normal)
    _refused(res, journal, f"{normal}: fio's normal output, not JSON")


def test_a_file_cut_short_is_an_error(tmp_path: Path) -> None:
    cut = tmp_path / "cut.json"
    cut.write_bytes(FAILED.read_bytes()[:3000])
    res, journal = _import(tmp_path, cut)
    _refused(res, journal, f"{cut}: fio output is not valid JSON")


def test_a_second_document_cut_short_is_an_error_not_dropped(tmp_path: Path) -> None:
    cut = tmp_path / "cut.json"
    cut.write_bytes(APPENDED.read_bytes()[:-200])
    res, journal = _import(tmp_path, cut)
    _refused(res, journal, f"{cut}: fio JSON document 2 is not valid JSON")


def test_one_bad_file_writes_nothing_for_the_good_ones(tmp_path: Path) -> None:
    res, journal = _import(tmp_path, FIO31, TERSE)
    _refused(res, journal, str(TERSE))


def _set(doc: dict[str, Any], path: str, value: Any) -> None:
    keys: list[Any] = [int(k) if k.isdigit() else k for k in path.split("/")]
    for k in keys[:-1]:
        doc = doc[k]
    doc[keys[-1]] = value


# (where in fio 3.1's JSON, a value of the wrong shape, what the error names)
SHAPES = [
    ("timestamp", "yesterday", 'timestamp = "yesterday": must be seconds since 1970'),
    ("timestamp", 1e300, "timestamp = 1e+300: must be seconds since 1970"),
    ("jobs", "randread", 'jobs = "randread": must be a list of job objects'),
    ("jobs/0", 7, "jobs[0] = 7: must be a job object"),
    ("jobs/0/job options", ["rw=read"], 'jobs[0].job options = ["rw=read"]: must be an object'),
    ("jobs/0/error", 1e300, "jobs[0].error = 1e+300: must be an errno"),
    ("jobs/0/write", 0, "jobs[0].write = 0: must be an object of that direction's results"),
    ("jobs/0/read/clat_ns", [1, 2], "jobs[0].read.clat_ns = [1, 2]: must be a latency object"),
    ("jobs/0/read/clat_ns/percentile", "99=142336", "jobs[0].read.clat_ns.percentile"),
    ("jobs/0/read/clat_ns/percentile/99.000000", None, "jobs[0].read.clat_ns.percentile.99.000000 = null"),
    ("global options", "direct=1", 'global options = "direct=1": must be an object'),
]


@pytest.mark.parametrize("where,value,words", SHAPES, ids=[f"{w}={v!r}" for w, v, _ in SHAPES])
def test_json_of_the_wrong_shape_is_an_error_naming_the_key(tmp_path: Path, where: str, value: Any, words: str):
    doc = json.loads(FIO31.read_text())
    _set(doc, where, value)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    res, journal = _import(tmp_path, bad)
    _refused(res, journal, f"{bad}: {words}")


def test_nan_from_fio_is_not_a_number_in_the_journal(tmp_path: Path) -> None:
    """Python's json reads NaN, SQLite's JSON does not: the figure is dropped, the run kept, the report works."""
    text = FIO31.read_text().replace('"iops_stddev" : ', '"iops_stddev" : NaN, "was" : ', 1)
    assert "NaN" in text
    nan = tmp_path / "nan.json"
    nan.write_text(text)
    res, journal = _import(tmp_path, nan)
    assert res.returncode == 0, res.stderr
    with sqlite3.connect(journal) as db:
        (metrics,) = db.execute("SELECT metrics FROM runs").fetchone()
    assert "read.iops_stdev" not in json.loads(metrics) and "NaN" not in metrics
    rep = tankbench("report", "--journal", str(journal), "--out", str(tmp_path / "r"), timeout=120)
    assert rep.returncode == 0, rep.stderr


def test_a_runner_up_that_moved_nothing_does_not_break_the_report(tmp_path: Path) -> None:
    """fio 2.1 files group both write jobs into one test case ("write seq unknown"); when one of them nearly stalled
    (4 KiB in its whole runtime: fio 2.x prints bw in whole KiB/s and iops rounded, both 0) the recommendation
    asserted a ratio against a 0 MiB/s runner-up and report crashed."""
    doc = json.loads((PUBLIC / "fio-2.1.4-pkb-five-jobs.json").read_text())
    job = next(j for j in doc["jobs"] if j["jobname"] == "sequential_write")
    job["write"].update(bw=0, iops=0, io_bytes=4)
    stalled = tmp_path / "stalled.json"
    stalled.write_text(json.dumps(doc))
    res, journal = _import(tmp_path, stalled)
    assert res.returncode == 0, res.stderr
    rep = tankbench("report", "--journal", str(journal), "--out", str(tmp_path / "r"), timeout=120)
    assert rep.returncode == 0 and "Traceback" not in rep.stderr, rep.stderr
    assert "#1 sequential_write" in (tmp_path / "r" / "summary.md").read_text()
