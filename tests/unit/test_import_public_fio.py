"""`tankbench import` keeps the meaning of real fio output (issue 9 item 7).

Every expected number below is read by hand from the raw JSON of the fixture (tests/fixtures/fio-public/,
sources in tests/fixtures/README.md), in the units that fio version wrote, and converted here: fio 2.x wrote
io_bytes in KiB and latencies in µs; bw is KiB/s in every version."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tankbench.fio.importer import import_files, read_fio_file
from tankbench.journal.db import Journal
from tests.conftest import FIXTURES, tankbench

PUBLIC = FIXTURES / "fio-public"
FIO214 = PUBLIC / "fio-2.1.4-pkb-five-jobs.json"
FIO31 = PUBLIC / "fio-3.1-fioplot-randread-qd1.json"
FIO217 = PUBLIC / "fio-2.17-pkb-group-reporting-numjobs2.json"
FIO343 = PUBLIC / "fio-3.43-client-2servers-global-options-list.json"
GROUP4 = PUBLIC / "local-fio-3.33-group-reporting-numjobs4.json"
JSONPLUS = PUBLIC / "local-fio-3.33-jsonplus-numjobs2-two-jobs.json"
UTF16 = PUBLIC / "derived-utf16-bom-fio-3.1-fioplot-randread-qd1.json"
TRAILING = PUBLIC / "derived-trailing-message-fio-2.17-pkb-group-reporting-numjobs2.json"

# (file, test name) -> direction, expected figures as fio wrote them
EXPECTED: dict[tuple[Path, str], dict[str, Any]] = {
    (FIO31, "random-read"): {  # fio 3.1: latency blocks without "N", no job_runtime, no bw_bytes
        "dir": "read",
        "iops": 6614.073099,
        "bw": 26456 * 1024,
        "io": 1625501696,
        "lat_mean": 147792.395919,
        "clat_mean": 135557.025488,
        "clat_p50": 134144,
        "clat_p99": 142336,
        "clat_p999": 464896,
        "runtime": 60.001,
        "jobs": 1,
    },
    (FIO217, "rand_16k_read_100%-io-depth-1-num-jobs-2"): {  # fio 2.17, group_reporting, numjobs=2: µs, KiB
        "dir": "read",
        "iops": 8086.673998,
        "bw": 129386 * 1024,
        "io": 1294256 * 1024,
        "lat_mean": 245531.122,
        "clat_mean": 238357.679,
        "clat_p50": 96000,
        "clat_p99": 1352000,
        "clat_p999": 1896000,
        "runtime": 10.003,
        "jobs": 1,
    },
    (FIO217, "rand_16k_write_100%-io-depth-1-num-jobs-2"): {
        "dir": "write",
        "iops": 2457.017193,
        "bw": 39312 * 1024,
        "io": 393280 * 1024,
        "lat_mean": 810977.136,
        "clat_mean": 800193.694,
        "clat_p50": 548000,
        "clat_p99": 2384000,
        "clat_p999": 5728000,
        "runtime": 10.004,
        "jobs": 1,
    },
    (GROUP4, "randread-4jobs"): {  # group_reporting over 4 jobs: job_runtime is 8008 (4 x 2 s), fio ran 2.009 s
        "dir": "read",
        "iops": 71308.113489,
        "bw": 292078032,
        "io": 586784768,
        "lat_mean": 54413.986283,
        "clat_mean": 54364.127504,
        "clat_p50": 1688,
        "clat_p99": 288768,
        "clat_p999": 5734400,
        "runtime": 2.009,
        "jobs": 1,
    },
}
EXPECTED[(FIO214, "sequential_write")] = {  # fio 2.1.4: no options, no total_ios, µs and KiB
    "dir": "write",
    "iops": 133,
    "bw": 68118 * 1024,
    "io": 361984 * 1024,
    "lat_mean": 478737.47e3,
    "clat_mean": 477734.84e3,
    "clat_p50": 444416e3,
    "clat_p99": 823296e3,
    "clat_p999": 872448e3,
    "runtime": 5.314,
    "jobs": 1,
}
EXPECTED[(FIO214, "random_read_test")] = {
    "dir": "read",
    "iops": 317,
    "bw": 1269 * 1024,
    "io": 36244 * 1024,
    "lat_mean": 3146.50e3,
    "clat_mean": 3117.62e3,
    "clat_p50": 3280e3,
    "clat_p99": 3728e3,
    "clat_p999": 6880e3,
    "runtime": 28.540,
    "jobs": 1,
}
EXPECTED[(UTF16, "random-read")] = EXPECTED[(FIO31, "random-read")]
for _name in ("rand_16k_read_100%-io-depth-1-num-jobs-2", "rand_16k_write_100%-io-depth-1-num-jobs-2"):
    EXPECTED[(TRAILING, _name)] = EXPECTED[(FIO217, _name)]


def by_name(path: Path) -> dict[str, Any]:
    runs = read_fio_file(str(path))
    assert len({r.test.name for r in runs}) == len(runs), "one run per distinct job"
    return {r.test.name: r for r in runs}


@pytest.mark.parametrize("path,name", list(EXPECTED), ids=[f"{p.stem}:{n}" for p, n in EXPECTED])
def test_single_entry_files_give_what_fio_printed(path: Path, name: str) -> None:
    e = EXPECTED[(path, name)]
    runs = by_name(path)
    assert {n for p, n in EXPECTED if p == path} <= set(runs)
    m, d = runs[name].metrics, e["dir"]
    assert m[f"{d}.iops"] == pytest.approx(e["iops"], rel=1e-12)
    assert m["total.iops"] == pytest.approx(e["iops"], rel=1e-12)
    assert m[f"{d}.bw_bytes"] == pytest.approx(e["bw"], rel=1e-12)
    assert m[f"{d}.io_bytes"] == pytest.approx(e["io"], rel=1e-12)
    assert m[f"{d}.lat_mean_ns"] == pytest.approx(e["lat_mean"], rel=1e-9)
    assert m[f"{d}.clat_mean_ns"] == pytest.approx(e["clat_mean"], rel=1e-9)
    for p in ("p50", "p99", "p999"):
        assert m[f"{d}.clat_{p}_ns"] == pytest.approx(e[f"clat_{p}"], rel=1e-12)
        assert m[f"{d}.lat_{p}_ns"] == m[f"{d}.clat_{p}_ns"], "the ranked p99 is completion latency, as labelled"
    assert m["fio.runtime_s"] == pytest.approx(e["runtime"], rel=1e-12)
    assert m["fio.jobs"] == e["jobs"] and f"{d}.lat_approx" not in m


def test_fio_2_1_five_distinct_jobs_are_five_tests() -> None:
    runs = by_name(FIO214)
    assert sorted(runs) == [
        "random_read_test",
        "random_read_test_parallel",
        "random_write_test",
        "sequential_read",
        "sequential_write",
    ]
    test = runs["random_write_test"].test
    assert test.params["rw"] == "write" and test.params["bs"] == "unknown", "no invented fio defaults"
    assert len({r.test.id for r in runs.values()}) == 5


def test_fio_2_x_directions_without_io_are_absent() -> None:
    m = by_name(FIO217)["rand_16k_read_100%-io-depth-1-num-jobs-2"].metrics
    assert not any(k.startswith(("write.", "trim.")) for k in m)


def test_client_mode_two_servers_is_one_run_with_each_host_kept() -> None:
    """fio 3.43 --client with two servers: "global options" is a list; the run is the sum over the clients,
    which must equal fio's own "All clients" entry (except job_runtime, which fio sums: 2000 for 1 s)."""
    raw = json.loads(FIO343.read_text())
    a, b, total = raw["client_stats"]
    assert total["jobname"] == "All clients" and total["job_runtime"] == 2000
    runs = read_fio_file(str(FIO343))
    assert len(runs) == 1
    run = runs[0]
    m = run.metrics
    assert run.hosts == ("127.0.0.1:18801", "127.0.0.1:18802")
    assert m["read.iops"] == 1110589 + 1113931 == total["read"]["iops"]
    assert m["read.bw_bytes"] == 4548972544 + 4562661376 == total["read"]["bw_bytes"]
    assert m["read.lat_mean_ns"] == pytest.approx(total["read"]["lat_ns"]["mean"], rel=1e-9)  # 815.106630
    assert m["read.clat_mean_ns"] == pytest.approx(total["read"]["clat_ns"]["mean"], rel=1e-9)  # 798.467085
    assert m["read.clat_stdev_ns"] == pytest.approx(total["read"]["clat_ns"]["stddev"], rel=1e-3)
    assert m["read.clat_p99_ns"] == 2008 == total["read"]["clat_ns"]["percentile"]["99.000000"]
    assert m["read.lat_approx"] == 1.0, "no json+ bins: combined percentiles are marked approximate"
    assert m["fio.runtime_s"] == 1.0 and m["fio.jobs"] == 2
    assert m["client[127.0.0.1:18802].total.iops"] == 1110589
    assert m["client[127.0.0.1:18801].total.bw_bytes"] == 4562661376
    assert run.test.params["numjobs"] == 1 and run.test.target.path == "/mnt/fio-test"
    assert "hostname" not in run.test.fio_options and "port" not in run.test.fio_options


def merged_percentile(entries: list[dict[str, Any]], direction: str, pct: float) -> float:
    """The test's own reading of fio's rule, on the union of the jobs' json+ bins."""
    counts: dict[int, int] = {}
    for e in entries:
        for k, v in e[direction]["clat_ns"]["bins"].items():
            counts[int(k)] = counts.get(int(k), 0) + v
    need = pct / 100 * sum(counts.values())
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if seen >= need:
            return float(value)
    raise AssertionError("empty histogram")


def test_bins_reproduce_fios_own_percentiles() -> None:
    """The merge rule is fio's: on one job's bins it gives exactly the percentiles fio printed."""
    from tankbench.fio.parse import bins_percentile

    for job in json.loads(JSONPLUS.read_text())["jobs"]:
        d = "write" if job["write"]["total_ios"] else "read"
        clat = job[d]["clat_ns"]
        bins = {int(k): v for k, v in clat["bins"].items()}
        for key in ("1.000000", "50.000000", "90.000000", "99.000000", "99.900000", "99.990000"):
            assert bins_percentile(bins, float(key)) == clat["percentile"][key]


@pytest.mark.parametrize(
    "name,d,iops,bw,runtime",
    [
        ("seqwrite-2jobs", "write", 40236.738703 + 47083.333333, 164809681 + 192853333, 1.018),
        ("randread-2jobs", "read", 8343.629344 + 8867.265469, 34175505 + 36320319, 1.036),
    ],
)
def test_parallel_jobs_are_one_run_with_merged_histogram(
    name: str, d: str, iops: float, bw: float, runtime: float
) -> None:
    """numjobs=2 without group_reporting, two distinct jobs (json+): two tests of one run each, not four
    runs averaged as repeats."""
    runs = by_name(JSONPLUS)
    assert sorted(runs) == ["randread-2jobs", "seqwrite-2jobs"]
    entries = [j for j in json.loads(JSONPLUS.read_text())["jobs"] if j["jobname"] == name]
    assert len(entries) == 2
    m = runs[name].metrics
    assert m[f"{d}.iops"] == pytest.approx(iops, rel=1e-12)
    assert m[f"{d}.bw_bytes"] == pytest.approx(bw, rel=1e-12)
    assert m["fio.runtime_s"] == pytest.approx(runtime, rel=1e-12)
    n = [e[d]["lat_ns"]["N"] for e in entries]
    mean = sum(e[d]["lat_ns"]["mean"] * k for e, k in zip(entries, n)) / sum(n)
    assert m[f"{d}.lat_mean_ns"] == pytest.approx(mean, rel=1e-12)
    for key, pct in (("p50", 50.0), ("p99", 99.0), ("p999", 99.9)):
        assert m[f"{d}.clat_{key}_ns"] == merged_percentile(entries, d, pct)
    assert f"{d}.lat_approx" not in m, "exact: merged from json+ bins"
    assert runs[name].test.params["numjobs"] == 2


def test_merged_p99_lies_between_the_jobs() -> None:
    entries = [j for j in json.loads(JSONPLUS.read_text())["jobs"] if j["jobname"] == "randread-2jobs"]
    p99s = sorted(e["read"]["clat_ns"]["percentile"]["99.000000"] for e in entries)
    merged = by_name(JSONPLUS)["randread-2jobs"].metrics["read.clat_p99_ns"]
    assert p99s[0] <= merged <= p99s[1] and not math.isclose(merged, sum(p99s) / 2)


def test_import_journal_one_fingerprint_per_file(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    files = [FIO31, FIO217, FIO343, JSONPLUS, GROUP4]
    r = tankbench("import", "--journal", str(path), *map(str, files), "--fingerprint", "kernel=x")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"imported 7 runs of 7 tests into {path}\n"
    with Journal.open_readonly(str(path)) as j:
        fps = {f.data["fio_version"]: dict(f.data) for f in j.fingerprints().values()}
        runs = j.runs(with_samples=False)
    assert sorted(fps) == ["fio-2.17", "fio-3.1", "fio-3.33", "fio-3.43"]
    assert fps["fio-3.43"]["fio_clients"] == ["127.0.0.1:18801", "127.0.0.1:18802"]
    assert all(f["kernel"] == "x" and f["source"] == "import" for f in fps.values())
    assert {r.host for r in runs} == {"imported", "127.0.0.1:18801,127.0.0.1:18802"}
    assert all(r.run_no == 1 for r in runs), "parallel jobs are not repeats"
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(DISTINCT fingerprint_id) FROM runs").fetchone()[0] == 4


def test_utf16_and_trailing_text_import_from_the_cli(tmp_path: Path) -> None:
    r = tankbench("import", "--journal", str(tmp_path / "j.sqlite"), str(UTF16), str(TRAILING))
    assert r.returncode == 0, r.stderr
    assert "imported 3 runs of 3 tests" in r.stdout


def test_non_utf8_file_is_an_error(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.json"
    bad.write_bytes(FIO31.read_bytes().replace(b'"random-read"', b'"random-r\xe9ad"'))
    r = tankbench("import", "--journal", str(tmp_path / "j.sqlite"), str(bad))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith(f"Error: {bad}: not UTF-8 text (byte 0xe9 at offset "), r.stderr
    assert "Hint: " in r.stderr and not (tmp_path / "j.sqlite").exists()


def test_imported_journal_reports(tmp_path: Path) -> None:
    with Journal(str(tmp_path / "j.sqlite")) as j:
        import_files(j, [str(FIO343), str(JSONPLUS)], {})
    r = tankbench("report", "--journal", str(tmp_path / "j.sqlite"), "--out", str(tmp_path / "rep"))
    assert r.returncode == 0, r.stderr


def _counts(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as db:
        return {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("campaigns", "tests", "runs")}


KILL_MID_IMPORT = """
import os, signal, sys
from tankbench.fio.importer import import_files
from tankbench.journal.db import Journal
calls = 0
real = Journal.finish_run
def finish_then_die(self, row, run):
    global calls
    real(self, row, run)
    calls += 1
    if calls == 2:  # two runs written, more to come: the process dies as a kill -9 would end it
        os.kill(os.getpid(), signal.SIGKILL)
Journal.finish_run = finish_then_die
with Journal(sys.argv[1]) as j:
    import_files(j, sys.argv[2:], {})
"""


def test_an_import_killed_part_way_leaves_nothing_and_is_done_once_again(tmp_path: Path) -> None:
    """kill -9 during `import` of several files: the journal is as before (one transaction), and importing the
    same files again adds each run once (it used to keep the runs written before the kill, then add them twice)."""
    import subprocess
    import sys

    journal = tmp_path / "j.sqlite"
    with Journal(str(journal)) as j:
        import_files(j, [str(FIO31)], {})
    before = _counts(journal)
    files = [str(FIO343), str(JSONPLUS)]
    killed = subprocess.run([sys.executable, "-c", KILL_MID_IMPORT, str(journal), *files], capture_output=True)
    assert killed.returncode == -9, killed.stderr
    assert _counts(journal) == before
    r = tankbench("import", "--journal", str(journal), *files)
    assert r.returncode == 0, r.stderr
    with sqlite3.connect(journal) as db:
        imported = db.execute("SELECT count(*) FROM runs WHERE note LIKE '%" + FIO343.name + "%'").fetchone()[0]
    assert imported == len(read_fio_file(str(FIO343))) and _counts(journal)["runs"] > before["runs"] + 2


def test_an_import_that_fails_part_way_rolls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    journal = tmp_path / "j.sqlite"
    with Journal(str(journal)) as j:
        import_files(j, [str(FIO31)], {})
        before = _counts(journal)
        real, calls = Journal.finish_run, []

        def fail_third(self: Journal, row: int, run: Any) -> None:
            calls.append(row)
            if len(calls) == 3:
                raise OSError("disk full")
            real(self, row, run)

        monkeypatch.setattr(Journal, "finish_run", fail_third)
        with pytest.raises(OSError):
            import_files(j, [str(FIO343), str(JSONPLUS)], {})
        assert _counts(journal) == before and len(calls) == 3
        monkeypatch.setattr(Journal, "finish_run", real)
        import_files(j, [str(FIO343)], {})  # the journal is still usable afterwards
    assert _counts(journal)["runs"] == before["runs"] + len(read_fio_file(str(FIO343)))
