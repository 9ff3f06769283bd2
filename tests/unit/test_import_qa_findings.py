"""`tankbench import` on the QA sweep's findings (real fio 3.33 outputs in tests/fixtures/fio-public/, hand edits
made here from them): a result imported twice, json,normal with a brace in a job name, JSON nested too deeply,
verify reads, group_reporting over different jobs, concurrent jobs, values out of range, control characters."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tankbench.errors import UserError
from tankbench.fio import importer
from tankbench.fio.importer import read_fio_file
from tests.conftest import FIXTURES, tankbench

PUBLIC = FIXTURES / "fio-public"
DUP = PUBLIC / "local-fio-3.33-psync-then-libaio-stonewall.json"
BRACE = PUBLIC / "local-fio-3.33-json-normal-brace-jobname.json"
VERIFY = PUBLIC / "local-fio-3.33-write-verify.json"
MULTI_GR = PUBLIC / "local-fio-3.33-group-reporting-randread-and-write.json"
CONCURRENT = PUBLIC / "local-fio-3.33-three-concurrent-jobs.json"
RANDRW = PUBLIC / "local-fio-3.33-randrw.json"
PCTLIST = PUBLIC / "local-fio-3.33-jsonplus-percentile-list.json"
TRIM = PUBLIC / "local-fio-3.33-trim-error.json"
RWNUM = PUBLIC / "local-fio-3.33-randread-offset-modifier.json"
NAMES = PUBLIC / "local-fio-3.33-formula-names.json"


def _import(tmp_path: Path, *files: Path, journal: Path | None = None) -> tuple[Any, Path]:
    journal = journal or tmp_path / "j.sqlite"
    return tankbench("import", *map(str, files), "--journal", str(journal), cwd=tmp_path, timeout=120), journal


def _runs(journal: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(journal) as db:
        rows = db.execute(
            "SELECT t.name, r.status, r.metrics FROM runs r JOIN tests t ON t.id = r.test_id ORDER BY r.id"
        ).fetchall()
    return [(str(n), str(s), str(m)) for n, s, m in rows]


def _refused(res: Any, journal: Path, *words: str) -> None:
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("Error: ") and "Hint: " in res.stderr, res.stderr
    assert "Traceback" not in res.stderr + res.stdout
    for w in words:
        assert w in res.stderr, res.stderr
    assert not journal.exists(), "nothing is written on bad input"


def _edited(tmp_path: Path, src: Path, edit: Any, name: str = "edited.json") -> Path:
    """A hand-edited copy of a real fio output: `edit(doc)` changes the parsed document in place."""
    doc = json.loads(src.read_text())
    edit(doc)
    out = tmp_path / name
    out.write_text(json.dumps(doc, indent=2))
    return out


# Finding 1: the same fio result imported twice is one run, not two identical "repeats"


def test_the_same_file_twice_in_one_call_is_imported_once(tmp_path: Path) -> None:
    res, journal = _import(tmp_path, DUP, DUP)
    assert res.returncode == 0, res.stderr
    assert "imported 2 runs of 2 tests" in res.stdout
    assert f"{DUP}: skipped 2 job results already imported" in res.stderr
    assert len(_runs(journal)) == 2


def test_a_second_import_of_a_file_adds_nothing_and_says_so(tmp_path: Path) -> None:
    res, journal = _import(tmp_path, DUP)
    assert res.returncode == 0 and len(_runs(journal)) == 2, res.stderr
    again, _ = _import(tmp_path, DUP, journal=journal)
    assert again.returncode == 0, again.stderr
    assert "imported 0 runs" in again.stdout
    assert f"{DUP}: skipped 2 job results already imported" in again.stderr
    assert "every job result in these files was already imported" in again.stderr
    assert len(_runs(journal)) == 2
    other, _ = _import(tmp_path, DUP, RWNUM, journal=journal)  # something new beside the duplicates: exit 0
    assert other.returncode == 0 and "imported 1 runs of 1 tests" in other.stdout, other.stderr
    assert len(_runs(journal)) == 3


def test_a_file_holding_the_same_document_twice_is_one_run_per_job(tmp_path: Path) -> None:
    twice = tmp_path / "twice.json"
    twice.write_text(DUP.read_text() * 2)
    res, journal = _import(tmp_path, twice)
    assert res.returncode == 0, res.stderr
    assert f"{twice}: skipped 2 job results already imported" in res.stderr
    assert len(_runs(journal)) == 2


# Finding 5: json,normal whose job name or description holds `{`


def test_json_normal_with_a_brace_in_the_job_name_imports(tmp_path: Path) -> None:
    assert "job{1}: (g=0)" in BRACE.read_text()  # fio's normal header line before the JSON
    res, journal = _import(tmp_path, BRACE)
    assert res.returncode == 0, res.stderr
    assert [r[:2] for r in _runs(journal)] == [("job{1}", "done")]


def test_a_brace_inside_a_line_after_the_json_is_text_but_a_document_after_it_is_read(tmp_path: Path) -> None:
    text = BRACE.read_text()
    two = tmp_path / "two.json"
    json_part = text[text.index("\n{") + 1 : text.index("\n}\n") + 3]
    two.write_text(text + json_part.replace('"job{1}"', '"job{2}"'))  # appended with >>: a second document
    assert [j.test.name for j in read_fio_file(str(two))] == ["job{1}", "job{2}"]


# Finding 8: JSON nested deeper than Python recurses


def test_deeply_nested_json_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"jobs":[' + "[" * 5000 + "]" * 5000 + "]}")
    res, journal = _import(tmp_path, deep)
    _refused(res, journal, f"{deep}: not fio JSON (nested too deeply)")
    later = tmp_path / "later.json"  # a later document of the file nested too deeply
    later.write_text(DUP.read_text() + '{"jobs":[' + "[" * 5000 + "]" * 5000 + "]}")
    res, journal = _import(tmp_path, later)
    _refused(res, journal, f"{later}: not fio JSON (nested too deeply)")


def test_json_too_deep_to_store_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def too_deep(value: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(importer, "_finite", too_deep)
    with pytest.raises(UserError, match="nested too deeply"):
        read_fio_file(str(DUP))


# Finding 4: a write job's verify reads are a later phase, not part of its MiB/s, IOPS or p99


def test_verify_reads_of_a_write_job_stay_out_of_its_totals_and_p99() -> None:
    fio = json.loads(VERIFY.read_text())["jobs"][0]
    (run,) = read_fio_file(str(VERIFY))
    m = run.metrics
    assert run.test.params["rw"] == "write" and fio["job options"]["verify"] == "crc32c"
    assert m["total.iops"] == pytest.approx(fio["write"]["iops"])  # 170667, not 512000 with the verify reads
    assert m["total.bw_bytes"] == pytest.approx(fio["write"]["bw_bytes"])
    assert m["total.io_bytes"] == pytest.approx(fio["write"]["io_bytes"])
    assert m["verify.iops"] == pytest.approx(fio["read"]["iops"])
    assert m["verify.bw_bytes"] == pytest.approx(fio["read"]["bw_bytes"])
    assert m["verify.lat_p99_ns"] == pytest.approx(fio["read"]["clat_ns"]["percentile"]["99.000000"])
    assert not any(k.startswith("read.") for k in m)
    from tankbench.metrics import worst_p99_ms

    assert worst_p99_ms(m) == pytest.approx(fio["write"]["clat_ns"]["percentile"]["99.000000"] / 1e6)


def test_without_verify_tankbench_own_metrics_are_unchanged() -> None:
    from tankbench.fio.parse import metrics_from_fio, metrics_from_jobs

    doc = json.loads(VERIFY.read_text())
    assert metrics_from_jobs(doc["jobs"], "write") == metrics_from_fio(doc)  # no verify flag: as before
    assert "read.iops" in metrics_from_fio(doc) and "verify.iops" not in metrics_from_fio(doc)


# Finding 2: a group_reporting entry whose directions contradict its options is refused


def test_group_reporting_over_different_jobs_is_refused(tmp_path: Path) -> None:
    entry = json.loads(MULTI_GR.read_text())["jobs"][0]  # fio: the first job's name, the last job's options
    assert entry["jobname"] == "r1" and entry["job options"]["rw"] == "write" and entry["read"]["total_ios"] > 0
    res, journal = _import(tmp_path, MULTI_GR)
    _refused(res, journal, f"Error: {MULTI_GR}: job 'r1': ", "read I/O", "rw=write", "group_reporting")


def test_reads_beside_writes_are_accepted_only_with_verify(tmp_path: Path) -> None:
    def no_verify(doc: dict[str, Any]) -> None:
        del doc["jobs"][0]["job options"]["verify"]

    res, journal = _import(tmp_path, _edited(tmp_path, VERIFY, no_verify))
    _refused(res, journal, "job 'ver': ", "read I/O", "rw=write")
    assert _import(tmp_path, VERIFY)[0].returncode == 0


# Finding 3: jobs of one group with the same options ran at the same time: one run, like numjobs clones


def test_concurrent_jobs_with_the_same_options_are_one_run(tmp_path: Path) -> None:
    jobs = json.loads(CONCURRENT.read_text())["jobs"]
    assert [j["jobname"] for j in jobs] == ["a1", "a2", "a3"] and {j["groupid"] for j in jobs} == {0}
    (run,) = read_fio_file(str(CONCURRENT))
    assert run.test.name == "a1 + a2 + a3"
    assert run.metrics["total.iops"] == pytest.approx(sum(j["read"]["iops"] for j in jobs))  # 35584, not 11861
    assert run.concurrent == 3 and run.metrics["fio.jobs"] == 3
    res, journal = _import(tmp_path, CONCURRENT)
    assert res.returncode == 0 and "imported 1 runs of 1 tests" in res.stdout, res.stderr
    with sqlite3.connect(journal) as db:
        (note,) = db.execute("SELECT note FROM runs").fetchone()
    assert "3 concurrent job entries of one group with the same options were summed" in note


def test_a_long_list_of_concurrent_names_is_shortened() -> None:
    runs = read_fio_file(str(NAMES))  # @SUM(A1), -2+3 and the unicode job: randread, one group
    assert sorted(r.test.name for r in runs) == sorted(
        ["=1+2", "+cmd|' /C calc'!A0", "@SUM(A1) + -2+3 + ünï©ødé-ジョブ-💾"]
    )
    from tankbench.fio.importer import _run_name

    assert _run_name([{"jobname": "x" * 40}, {"jobname": "y" * 40}, {"jobname": "z"}]) == ("x" * 40 + " + 2 more", 3)


# Finding 6: `tankbench results --csv` neutralises formula-like cells as the report's results.csv does


def test_results_csv_neutralises_formula_like_cells(tmp_path: Path) -> None:
    import csv
    import io

    res, journal = _import(tmp_path, NAMES)
    assert res.returncode == 0, res.stderr
    out = tankbench("results", "--journal", str(journal), "--csv", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    names = sorted(r["test_name"] for r in rows)
    assert names == sorted(["'=1+2", "'+cmd|' /C calc'!A0", "'@SUM(A1) + -2+3 + ünï©ødé-ジョブ-💾"])
    for row in rows:
        for value in row.values():
            assert not value or value[0] not in "=+@\t\r" and not (value[0] == "-" and not _number(value)), row


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# Findings 14 and 9: values of the wrong kind or out of range are refused, naming the key and the value


def _set(path: str, value: Any) -> Any:
    def edit(doc: dict[str, Any]) -> None:
        *keys, last = path.split("/")
        node: Any = doc
        for k in keys:
            node = node[int(k)] if isinstance(node, list) else node[k]
        node[last] = value

    return edit


BAD_VALUES = [
    ("jobs/0/job options/bs", {"a": 1}, 'jobs[0].job options.bs = {"a": 1}: must be a text or a number'),
    ("global options/directory", ["a"], 'global options.directory = ["a"]: must be a text or a number'),
    ("jobs/0/jobname", None, "jobs[0].jobname = null: must be a string"),
    ("jobs/0/jobname", 7, "jobs[0].jobname = 7: must be a string"),
    ("jobs/0/job options/numjobs", "-3", 'jobs[0].job options.numjobs = "-3": must be a whole number of at least 1'),
    ("jobs/0/job options/iodepth", "1k", 'jobs[0].job options.iodepth = "1k": must be a whole number of at least 1'),
    ("global options/numjobs", "0", 'global options.numjobs = "0": must be a whole number of at least 1'),
    ("jobs/0/read/iops", -100, "jobs[0].read.iops = -100: must be a non-negative finite number"),
    ("jobs/0/read/bw_bytes", -1, "jobs[0].read.bw_bytes = -1: must be a non-negative finite number"),
    ("jobs/0/read/iops", 1e400, "jobs[0].read.iops = Infinity: must be a non-negative finite number"),
    ("jobs/0/write/bw", -5, "jobs[0].write.bw = -5: must be a non-negative finite number"),
    ("jobs/0/read/io_bytes", -4096, "jobs[0].read.io_bytes = -4096"),
    ("jobs/0/read/io_kbytes", -4, "jobs[0].read.io_kbytes = -4"),
    ("jobs/0/read/total_ios", -1, "jobs[0].read.total_ios = -1"),
    ("jobs/0/read/runtime", 1e400, "jobs[0].read.runtime = Infinity"),
    ("jobs/0/read/clat_ns/mean", -1, "jobs[0].read.clat_ns.mean = -1: must be a non-negative finite number"),
    ("jobs/0/read/lat_ns/max", 1e400, "jobs[0].read.lat_ns.max = Infinity"),
    ("jobs/0/read/clat_ns/percentile/99.000000", -5000, "jobs[0].read.clat_ns.percentile.99.000000 = -5000"),
    ("jobs/0/read/clat_ns/percentile/99.000000", 1e400, "jobs[0].read.clat_ns.percentile.99.000000 = Infinity"),
]


@pytest.mark.parametrize(("path", "value", "message"), BAD_VALUES, ids=[f"{p}={v}" for p, v, _ in BAD_VALUES])
def test_values_of_the_wrong_kind_or_range_are_refused(path: str, value: Any, message: str) -> None:
    with pytest.raises(UserError, match="^") as e:
        read_fio_file(str(_edited_in(path, value)))
    assert message in str(e.value), str(e.value)


def _edited_in(path: str, value: Any) -> Path:
    import tempfile

    out = Path(tempfile.mkdtemp()) / "edited.json"
    doc = json.loads(RANDRW.read_text())
    _set(path, value)(doc)
    out.write_text(json.dumps(doc))
    return out


def test_bin_counts_must_be_whole_numbers(tmp_path: Path) -> None:
    def float_bin(doc: dict[str, Any]) -> None:
        bins = doc["jobs"][0]["read"]["clat_ns"]["bins"]
        bins[next(iter(bins))] = 1.5

    res, journal = _import(tmp_path, _edited(tmp_path, PCTLIST, float_bin))
    _refused(res, journal, ".bins.", "= 1.5: must be a count of I/Os")


def test_nan_is_still_not_measured_and_a_bad_value_on_the_command_line_is_an_error(tmp_path: Path) -> None:
    nan = tmp_path / "nan.json"
    nan.write_text(RANDRW.read_text().replace('"iops" : ', '"iops" : NaN, "x" : ', 1))
    (run,) = read_fio_file(str(nan))
    assert "read.iops" not in run.metrics
    res, journal = _import(tmp_path, _edited(tmp_path, RANDRW, _set("jobs/0/read/iops", -100)))
    _refused(res, journal, "jobs[0].read.iops = -100: must be a non-negative finite number")


# Finding 7: control characters in job names and option values are imported escaped


def test_control_characters_in_names_and_options_are_escaped(tmp_path: Path) -> None:
    evil = "evil\n0002  fake  imported  done  done=9  999999  9999.0\x1b[31mRED\x1b[0m"

    def edit(doc: dict[str, Any]) -> None:
        doc["jobs"][0]["jobname"] = evil
        doc["jobs"][0]["job options"]["description"] = "tab\there\x7fdel\x85nel\rcr\x00nul"

    (run,) = read_fio_file(str(_edited(tmp_path, RANDRW, edit)))
    assert run.test.name == "evil\\n0002  fake  imported  done  done=9  999999  9999.0\\x1b[31mRED\\x1b[0m"
    assert run.test.fio_options["description"] == "tab\\there\\x7fdel\\x85nel\\rcr\\x00nul"
    assert "ünï©ødé-ジョブ-💾" in [n for r in read_fio_file(str(NAMES)) for n in r.test.name.split(" + ")]
    res, journal = _import(tmp_path, _edited(tmp_path, RANDRW, edit))
    assert res.returncode == 0, res.stderr
    shown = tankbench("show", "--journal", str(journal), cwd=tmp_path)
    assert shown.returncode == 0 and "\x1b" not in shown.stdout and "\n0002  fake" not in shown.stdout, shown.stdout


# Findings 11, 12, 13


def test_single_jsonplus_entry_gets_missing_percentiles_from_its_bins() -> None:
    from tankbench.fio.parse import bins_percentile

    clat = json.loads(PCTLIST.read_text())["jobs"][0]["read"]["clat_ns"]
    assert "99.000000" not in clat["percentile"] and clat["bins"]  # percentile_list=10:90:99.5:99.99
    (run,) = read_fio_file(str(PCTLIST))
    bins = {int(k): int(v) for k, v in clat["bins"].items()}
    for key, pct in (("p50", 50.0), ("p99", 99.0), ("p999", 99.9)):
        assert run.metrics[f"read.clat_{key}_ns"] == bins_percentile(bins, pct)
        assert run.metrics[f"read.lat_{key}_ns"] == bins_percentile(bins, pct)
    assert "read.lat_approx" not in run.metrics


def test_a_failed_job_that_did_no_io_gets_no_made_up_runtime() -> None:
    jobs = {j["jobname"]: j for j in json.loads(TRIM.read_text())["jobs"]}
    assert jobs["trimjob"]["error"] == 25 and jobs["trimjob"]["elapsed"] == 1 and not jobs["trimjob"]["job_runtime"]
    runs = {r.test.name: r for r in read_fio_file(str(TRIM))}
    assert runs["trimjob"].error == 25 and not runs["trimjob"].metrics.get("fio.runtime_s")
    assert runs["ok"].metrics["fio.runtime_s"] == pytest.approx(jobs["ok"]["read"]["runtime"] / 1000)


def test_an_rw_offset_modifier_keeps_the_test_case_of_its_pattern() -> None:
    from tankbench.model import test_case_of

    (run,) = read_fio_file(str(RWNUM))
    assert run.test.params["rw"] == "randread:8"
    assert test_case_of("randread:8", "4k") == "read random 4k" == test_case_of("randread", "4k")
    assert test_case_of("write:4k", "64k") == "write seq 64k"
