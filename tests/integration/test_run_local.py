"""`run` end to end on the local host with real fio: journal contents, resume, kill -9, exported scripts."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.conftest import proc_cmdline, tankbench, wait_until

CAMPAIGN = """
[campaign]
name = "itest"
runtime = "{runtime}"
ramp = "0s"
warmup = {warmup}
repeats = {repeats}
host = "local"

[[target]]
name = "scratch"
kind = "file"
path = "{dir}"
size = "16M"

[matrix]
rw = {rw}
bs = ["4k", "64k"]
iodepth = [1]
io = ["direct"]
"""


def write_campaign(
    tmp: Path, runtime: str = "1s", repeats: int = 1, warmup: str = "false", rw: str = '["read", "randwrite"]'
) -> Path:
    path = tmp / "c.toml"
    path.write_text(CAMPAIGN.format(runtime=runtime, repeats=repeats, warmup=warmup, dir=tmp / "scratch", rw=rw))
    return path


def rows(journal: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(journal)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_run_records_everything_and_resume_adds_nothing(tmp_path: Path):
    c = write_campaign(tmp_path, repeats=2, warmup="true")
    j = tmp_path / "j.sqlite"
    res = tankbench("run", str(c), "--journal", str(j), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "12 run(s) done" in res.stdout
    runs = rows(j, "SELECT status, warmup, run_no, wall_s, drain_s, metrics, checks, samples, fio_json FROM runs")
    assert len(runs) == 12 and {r[0] for r in runs} == {"done"}
    assert sorted({(r[1], r[2]) for r in runs}) == [(0, 1), (0, 2), (1, 0)]  # (warmup, run_no)
    for _status, _w, _n, wall, drain, metrics, checks, samples, fio_json in runs:
        m, c_, s = json.loads(metrics), json.loads(checks), json.loads(samples)
        assert wall >= 1.0 and drain is not None
        assert m["total.iops"] > 0 and m["fio.runtime_s"] > 0.5 and "sys.load1_start" in m
        assert "sys.cpu_sys_pct" in m and "timing.excess_s" in m
        assert c_["layout.verified"] is True and c_["layout.sparse"] is False
        assert c_["layout.allocated_bytes"] >= 16 << 20 and c_["layout.sample_compress_ratio"] > 0.95
        assert isinstance(s["load1"], list)
        assert json.loads(fio_json)["jobs"]
    fps = rows(j, "SELECT data FROM fingerprints")
    fp = json.loads(fps[0][0])
    assert fp["kernel"] == os.uname().release and fp["fio_version"].startswith("fio-") and fp["cpu_count"] >= 1
    # the test file is real, allocated, incompressible
    f = tmp_path / "scratch" / "tankbench-scratch.fiodata"
    assert f.stat().st_size == 16 << 20 and f.stat().st_blocks * 512 >= 16 << 20
    again = tankbench("run", str(c), "--journal", str(j), cwd=tmp_path)
    assert again.returncode == 0 and "12 already in the journal" in again.stdout
    assert rows(j, "SELECT count(*) FROM runs")[0][0] == 12
    show = tankbench("show", "--journal", str(j), "--json")
    states = {t["name"]: t["state"] for t in json.loads(show.stdout)}
    assert set(states.values()) == {"done"} and len(states) == 4
    csv_out = tankbench("results", "--journal", str(j), "--csv")
    header = csv_out.stdout.splitlines()[0].split(",")
    assert len(csv_out.stdout.splitlines()) == 13
    for col in ("wall_s", "drain_s", "read.lat_p99_ns", "sys.load1_start", "check.layout.verified", "param.bs"):
        assert col in header


def test_kill_9_in_the_middle_then_resume_loses_and_duplicates_nothing(tmp_path: Path, loopdev: str):
    """Done means (issue 2): a 16-test campaign over a loop device and a file, killed with kill -9 in the
    middle, resumes to completion with no completed run lost or duplicated."""
    c = write_campaign(tmp_path, runtime="1s", rw='["read", "write", "randread", "randwrite"]')
    c.write_text(
        c.read_text()
        + f"""
[[target]]
name = "loop"
kind = "raw"
path = "{loopdev}"
confirm = "{loopdev}"
size = "16M"
"""
    )
    j = tmp_path / "j.sqlite"
    fio_pid, _, _ = _kill_when(
        c,
        j,
        tmp_path,
        lambda: (
            rows(j, "SELECT count(*) FROM runs WHERE status='done'")[0][0] >= 6
            and rows(j, "SELECT count(*) FROM runs WHERE status='running' AND pid IS NOT NULL")[0][0] == 1
        ),
        "the campaign never reached its 7th run",
    )
    before = rows(j, "SELECT id, test_id, run_no, status FROM runs ORDER BY id")
    done_before = [r for r in before if r[3] == "done"]
    assert [r[3] for r in before].count("running") == 1
    # the agent saw its stdin close and ended fio: nothing keeps benchmarking behind our back
    wait_until(
        lambda: "fio" not in (proc_cmdline(fio_pid) or ""), 10, f"fio {fio_pid} still runs after tankbench was killed"
    )
    res = tankbench("run", str(c), "--journal", str(j), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "only host crashes count toward skipping a test" in res.stderr
    after = rows(j, "SELECT id, test_id, run_no, status FROM runs ORDER BY id")
    assert [r for r in after if r[0] in {d[0] for d in done_before}] == done_before, (
        "completed runs are kept as they were"
    )
    done = [(r[1], r[2]) for r in after if r[3] == "done"]
    assert len(done) == 16 and len(set(done)) == 16, "every test done exactly once"
    kinds = rows(j, "SELECT DISTINCT t.target_kind FROM runs r JOIN tests t ON t.id = r.test_id")
    assert sorted(k[0] for k in kinds) == ["file", "raw"]
    # tankbench was killed, the host stayed up (same boot id): the run is `interrupted`, not `crashed`
    assert [r[3] for r in after].count("interrupted") == 1 and [r[3] for r in after].count("crashed") == 0


def test_exported_scripts_run_with_plain_fio(tmp_path: Path):
    c = write_campaign(tmp_path)
    out = tmp_path / "export"
    res = tankbench("plan", str(c), "--export", str(out))
    assert res.returncode == 0, res.stderr
    scripts = sorted(out.glob("*-job.sh"))
    assert [s.name for s in scripts] == ["0001-job.sh", "0002-job.sh", "0003-job.sh", "0004-job.sh"]
    assert (out / "0001-job.fio").exists() and (out / "tests.tsv").exists()
    run = subprocess.run(
        ["sh", str(scripts[0])],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin:/usr/sbin:/sbin"},
    )
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout[run.stdout.index("{") :])
    assert doc["jobs"][0]["read"]["iops"] > 0 and doc["jobs"][0]["job options"]["bs"] == "4k"
    f = tmp_path / "scratch" / "tankbench-scratch.fiodata"
    assert f.stat().st_blocks * 512 >= 16 << 20, "the script lays the file out before fio reads it"


def test_second_run_on_same_journal_is_refused_while_first_runs(tmp_path: Path):
    c = write_campaign(tmp_path, runtime="2s")
    j = tmp_path / "j.sqlite"
    first = subprocess.Popen(
        [sys.executable, "-m", "tankbench", "run", str(c), "--journal", str(j), "-q"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        for _ in range(300):
            if j.exists():
                break
            time.sleep(0.1)
        second = tankbench("run", str(c), "--journal", str(j), cwd=tmp_path)
        assert second.returncode == 2 and "another `tankbench run` is using" in second.stderr
    finally:
        first.wait(timeout=120)


def test_copy_workloads_record_apparent_and_durable_throughput(tmp_path: Path):
    c = tmp_path / "copy.toml"
    c.write_text(f"""
[campaign]
name = "copy"
runtime = "1s"
host = "local"
copy_size = "32M"

[[target]]
name = "scratch"
kind = "file"
path = "{tmp_path / "dst"}"
size = "8M"

[matrix]
workload = ["cp", "rsync", "dd"]
rw = ["write"]
bs = ["1M"]
""")
    j = tmp_path / "j.sqlite"
    res = tankbench("run", str(c), "--journal", str(j), "--no-report", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    got = rows(
        j, "SELECT t.name, r.status, r.metrics, r.wall_s, r.drain_s FROM runs r JOIN tests t ON t.id = r.test_id"
    )
    assert sorted(g[0] for g in got) == [
        "file-scratch-copy-cp-32M",
        "file-scratch-copy-dd-32M",
        "file-scratch-copy-rsync-32M",
    ]
    for _name, status, metrics, wall, drain in got:
        m = json.loads(metrics)
        assert status == "done" and m["copy.bytes"] == 32 << 20
        assert m["copy.seconds"] == wall and abs(m["copy.durable_seconds"] - (wall + drain)) < 1e-9
        assert m["copy.durable_bw_bytes"] <= m["copy.apparent_bw_bytes"]
    copied = tmp_path / "dst" / "tankbench-scratch.fiodata"
    assert copied.stat().st_size == 32 << 20


def _kill_when(
    c: Path,
    j: Path,
    tmp_path: Path,
    ready: Callable[[], bool],
    never: str,
    *args: str,
    sig: signal.Signals = signal.SIGKILL,
) -> tuple[int, int, str]:
    """Start `run`, send it `sig` as soon as `ready()` holds on its journal; return the pid of the run in flight,
    the exit status of `run` and its stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tankbench", "run", str(c), "--journal", str(j), *args],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:  # the journal file exists a moment before its schema does
                if j.exists() and ready():
                    break
            except sqlite3.OperationalError:
                pass
            time.sleep(0.2)
        else:
            raise AssertionError(never)
        fio_pid = rows(j, "SELECT pid FROM runs WHERE status='running'")[0][0]
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return int(fio_pid), proc.returncode, err


def _kill_while_running(c: Path, j: Path, tmp_path: Path, earlier: int) -> None:
    """Start `run` and kill -9 it once its fio runs (after it marked the `earlier` killed runs interrupted)."""
    _kill_when(
        c,
        j,
        tmp_path,
        lambda: (
            rows(j, "SELECT count(*) FROM runs WHERE status='interrupted'")[0][0] == earlier
            and rows(j, "SELECT count(*) FROM runs WHERE status='running' AND pid IS NOT NULL")[0][0] > 0
        ),
        "the run never started",
        "--no-report",
    )


def test_two_kills_of_tankbench_during_one_test_do_not_skip_it(tmp_path: Path):
    """Issue 9 item 3: only a host that went down (another boot id) counts toward skipping a test; two kill -9s
    of tankbench itself during the same test must not lose that test."""
    c = write_campaign(tmp_path, runtime="6s", rw='["randread"]')
    c.write_text(c.read_text().replace('bs = ["4k", "64k"]', 'bs = ["4k"]'))
    j = tmp_path / "j.sqlite"
    _kill_while_running(c, j, tmp_path, earlier=0)
    _kill_while_running(c, j, tmp_path, earlier=1)
    res = tankbench("run", str(c), "--journal", str(j), "--no-report", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    statuses = [r[0] for r in rows(j, "SELECT status FROM runs ORDER BY id")]
    assert statuses == ["interrupted", "interrupted", "done"], statuses
    assert "skipped" not in res.stdout + res.stderr


def test_sigterm_stops_a_run_as_ctrl_c_does_and_the_next_run_finishes_it(tmp_path: Path) -> None:
    """`kill PID` (SIGTERM: systemctl stop, a CI's timeout) stopped tankbench at once before, with no cleanup (a
    lab it booted stayed up with nobody to stop it): now it stops as Ctrl-C does, exit 130, the run in flight
    left for the next `run` (as after Ctrl-C), which marks it interrupted and finishes the campaign, each test
    done once."""
    c = write_campaign(tmp_path, runtime="2s", rw='["read", "write", "randread"]')
    j = tmp_path / "j.sqlite"
    fio_pid, status, err = _kill_when(
        c,
        j,
        tmp_path,
        lambda: rows(j, "SELECT count(*) FROM runs WHERE status='running' AND pid IS NOT NULL")[0][0] == 1,
        "no run came to be in flight",
        "--no-report",
        sig=signal.SIGTERM,
    )
    assert status == 130 and "Interrupted." in err, (status, err[-2000:])
    assert "Traceback" not in err
    statuses = [r[0] for r in rows(j, "SELECT status FROM runs ORDER BY id")]
    assert statuses.count("running") == 1, statuses  # as after Ctrl-C: the next run finds it and runs it again
    wait_until(lambda: "fio" not in (proc_cmdline(fio_pid) or ""), 10, f"fio {fio_pid} still runs after SIGTERM")
    res = tankbench("run", str(c), "--journal", str(j), "--no-report", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    done = rows(j, "SELECT test_id FROM runs WHERE status='done' AND warmup=0")
    tests = rows(j, "SELECT count(*) FROM tests")[0][0]
    assert len(done) == tests and len(set(done)) == tests
    statuses = [r[0] for r in rows(j, "SELECT status FROM runs ORDER BY id")]
    assert statuses.count("interrupted") == 1 and "running" not in statuses, statuses
