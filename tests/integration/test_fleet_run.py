"""A campaign over namespace hosts (real sshd, real fio through ssh): split, each, resume per host."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.conftest import journal_rows, run_until, tankbench
from tests.netns import NetnsHost, namespace_hosts


@pytest.fixture
def netns_hosts(tmp_path: Path):
    """Three namespace hosts, removed after the test whatever happened."""
    with namespace_hosts(3, tmp_path / "fleet") as pair:
        yield pair


CAMPAIGN = """
[campaign]
name = "fleet-itest"
runtime = "1s"
ramp = "0s"
warmup = false
repeats = {repeats}
hosts = [{hosts}]
hosts_mode = "{mode}"

[[target]]
name = "scratch"
kind = "file"
path = "{dir}"
size = "8M"

[matrix]
rw = {rw}
bs = ["4k", "64k"]
iodepth = [1]
io = ["direct"]
"""


def campaign(tmp: Path, hosts: list[NetnsHost], target: Path, mode: str, rw: str, repeats: int = 1) -> Path:
    c = tmp / f"{mode}.toml"
    c.write_text(
        CAMPAIGN.format(
            hosts=", ".join(h.table() for h in hosts), mode=mode, dir=target / "scratch", rw=rw, repeats=repeats
        )
    )
    return c


def rows(journal: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(journal)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_split_gives_each_case_to_one_host_and_resumes(netns_hosts, tmp_path: Path):
    hosts, target = netns_hosts
    c = campaign(tmp_path, hosts, target, "split", '["read", "write", "randread"]', repeats=2)
    j = tmp_path / "j.sqlite"
    res = tankbench("run", str(c), "--journal", str(j), cwd=tmp_path)
    assert res.returncode == 0, res.stderr + res.stdout
    assert "12 run(s) done" in res.stdout
    for h in hosts:
        assert f"{h.name}:" in res.stdout  # the summary names every host
    per_case = rows(
        j, "SELECT t.test_case, count(DISTINCT r.host) FROM runs r JOIN tests t ON t.id = r.test_id GROUP BY 1"
    )
    assert len(per_case) == 6 and all(n == 1 for _, n in per_case), per_case
    used = {h for (h,) in rows(j, "SELECT DISTINCT host FROM runs")}
    assert used <= {h.name for h in hosts} and len(used) >= 2, used
    assert rows(j, "SELECT name, mode FROM hosts ORDER BY position") == [(h.name, "split") for h in hosts]
    # every host wrote its file target in its own directory (private mounts), none in the shared path
    assert not (target / "scratch").exists()
    written = [h for h in hosts if (h.base / "target" / "scratch").exists()]
    assert {f"ssh:root@{h.address}" for h in written} == used
    again = tankbench("run", str(c), "--journal", str(j), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "0 run(s) done" in again.stdout and "12 already in the journal" in again.stdout
    assert (tmp_path / "report" / "index.html").exists()


def test_each_runs_everything_on_every_host_and_compares_them(netns_hosts, tmp_path: Path):
    hosts, target = netns_hosts
    two = hosts[:2]
    c = campaign(tmp_path, two, target, "each", '["read"]')
    j = tmp_path / "j.sqlite"
    res = tankbench("run", str(c), "--journal", str(j), cwd=tmp_path)
    assert res.returncode == 0, res.stderr + res.stdout
    assert "4 run(s) done" in res.stdout
    per_host = dict(rows(j, "SELECT host, count(*) FROM runs WHERE status = 'done' GROUP BY host"))
    assert per_host == {h.name: 2 for h in two}
    md = (tmp_path / "report" / "hosts.md").read_text()
    assert f"{two[0].name} vs {two[1].name}" in md
    assert "| cpu_model |" in md and f"{two[1].name} / {two[0].name}" in md
    assert md.count("×") == 2, md  # each test: host B over host A
    for h in two:
        slug = h.name.replace(":", "-").replace("@", "-")
        assert (tmp_path / "report" / slug / "index.html").exists()
    rep = tankbench("report", "--journal", str(j), "--out", str(tmp_path / "again"), cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    assert "compare them in hosts.md" in rep.stdout
    assert (tmp_path / "again" / "hosts.md").read_text() == md


def test_unreachable_host_is_refused_before_anything_is_written(netns_hosts, tmp_path: Path):
    hosts, target = netns_hosts
    c = campaign(tmp_path, hosts[:1], target, "split", '["read"]')
    c.write_text(c.read_text().replace("hosts = [", 'hosts = ["root@127.0.0.1:1", '))
    work = tmp_path / "cwd"
    work.mkdir()
    res = tankbench("run", str(c), cwd=work)
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith(f"Error: {c}: campaign.hosts[0] = 'root@127.0.0.1:1': "), res.stderr
    assert "cannot reach 127.0.0.1:1 over ssh" in res.stderr
    assert "Hint: " in res.stderr
    assert list(work.iterdir()) == []


def _running_on(journal: Path, host: str) -> bool:
    return bool(journal_rows(journal, "SELECT 1 FROM runs WHERE status = 'running' AND host = ?", host))


def _start_and_wait_running(
    netns_hosts, tmp_path: Path, rw: str
) -> tuple[list[NetnsHost], Path, Path, subprocess.Popen[str]]:
    """A split campaign (2 s runs) on two hosts running in the background, returned once the second host has a
    run in progress: (the two hosts, campaign, journal, the process)."""
    hosts, target = netns_hosts
    two = hosts[:2]
    c = campaign(tmp_path, two, target, "split", rw)
    c.write_text(c.read_text().replace('runtime = "1s"', 'runtime = "2s"'))
    j, host = tmp_path / "j.sqlite", two[1].name
    return two, c, j, run_until(c, j, tmp_path, lambda: _running_on(j, host))


def test_kill_9_then_resume_finishes_each_case_on_its_host(netns_hosts, tmp_path: Path):
    two, c, j, proc = _start_and_wait_running(netns_hosts, tmp_path, '["read", "write"]')
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    before = dict(rows(j, "SELECT test_id, host FROM runs"))
    res = tankbench("run", str(c), "--journal", str(j), cwd=tmp_path)
    assert res.returncode == 0, res.stderr + res.stdout
    assert "resuming: " in res.stderr
    statuses = rows(j, "SELECT status, count(*) FROM runs GROUP BY status ORDER BY status")
    assert ("done", 4) in statuses and all(s in ("done", "interrupted") for s, _ in statuses), statuses
    assert {h for (h,) in rows(j, "SELECT host FROM runs WHERE status = 'interrupted'")} <= {h.name for h in two}
    after = dict(rows(j, "SELECT test_id, host FROM runs"))
    assert all(after[t] == h for t, h in before.items()), "a case begun on a host finishes there"


def test_a_host_that_fails_stops_alone_and_its_case_moves(netns_hosts, tmp_path: Path):
    two, c, j, proc = _start_and_wait_running(netns_hosts, tmp_path, '["read", "write", "randread"]')
    # the host goes down mid-run: every process in its namespace (sshd, agent, fio) is killed
    for pid in subprocess.run(["ip", "netns", "pids", two[1].netns], capture_output=True, text=True).stdout.split():
        try:  # listed, then gone: a process of that host can end by itself meanwhile (its sshd's session child)
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 3, out + err
    assert f"{two[1].name}: " in out and "FAILED" in out, out
    # progress lines are "[host] <UTC time> …" when stderr is not a terminal
    assert any(ln.startswith(f"[{two[1].name}] ") and "host failed" in ln for ln in err.splitlines()), err
    done = dict(rows(j, "SELECT test_id, host FROM runs WHERE status = 'done'"))
    assert len(done) == 6, "the case the failed host was running moved to the other host"
    crashed = rows(j, "SELECT test_id FROM runs WHERE status = 'crashed'")
    assert len(crashed) == 1 and done[crashed[0][0]] == two[0].name
    per_case = rows(
        j,
        "SELECT t.test_case, count(DISTINCT r.host) FROM runs r JOIN tests t ON t.id = r.test_id"
        " WHERE r.status = 'done' GROUP BY 1",
    )
    assert all(n == 1 for _, n in per_case)


HOOK = '#!/bin/sh\necho "$1|$TANKBENCH_HOST|$TANKBENCH_EXIT_STATUS|$TANKBENCH_TEST" >> "{log}"\n'


def test_each_host_runs_the_session_of_a_single_host(netns_hosts, tmp_path: Path):
    """A fleet drives the single host's session per host: its `end` hook, crashes found on resume (the row
    completed with the boot ids, the `crash` and `host-back` hooks) and the report's index of every run."""
    hosts, target = netns_hosts
    two = hosts[:2]
    c = campaign(tmp_path, two, target, "each", '["read"]')
    log, hook = tmp_path / "hook.log", tmp_path / "hook.sh"
    hook.write_text(HOOK.format(log=log))
    hook.chmod(0o755)
    c.write_text(c.read_text().replace("hosts_mode", f'hook = ["{hook}"]\nhosts_mode'))
    j = tmp_path / "j.sqlite"
    res = tankbench("run", str(c), "--journal", str(j), "--no-report", cwd=tmp_path)
    assert res.returncode == 0, res.stderr + res.stdout
    assert sorted(log.read_text().splitlines()) == sorted(f"end|{h.name}|0|" for h in two)
    # the report's index (run_inputs) holds every run, as a single host's journal does
    assert rows(j, "SELECT count(*) FROM input_keys") == [(1,)]
    assert rows(j, "SELECT count(*) FROM run_inputs") == rows(j, "SELECT count(*) FROM runs") == [(4,)]

    # the first host went down under a run (a `running` row of an older boot): the next run finds the crash
    name = two[0].name
    ((row, test_id),) = journal_rows(j, "SELECT id, test_id FROM runs WHERE host = ? ORDER BY id LIMIT 1", name)
    conn = sqlite3.connect(j)
    with conn:
        conn.execute("UPDATE runs SET status = 'running', boot_id = 'boot-before' WHERE id = ?", (row,))
    conn.close()
    log.unlink()
    again = tankbench("run", str(c), "--journal", str(j), "--no-report", cwd=tmp_path)
    assert again.returncode == 0, again.stderr + again.stdout
    assert "resuming: 1 run(s)" in again.stderr
    found = journal_rows(
        j,
        "SELECT status, json_extract(checks, '$.\"recovery.boot_id_before\"'),"
        " json_extract(checks, '$.\"recovery.found_on_resume\"') FROM runs WHERE id = ?",
        row,
    )
    assert found == [("crashed", "boot-before", 1)]
    ((test_name,),) = journal_rows(j, "SELECT name FROM tests WHERE id = ?", test_id)
    events = log.read_text().splitlines()  # the hosts' threads interleave: each host's own events in order
    assert [e for e in events if not e.startswith("end|")] == [
        f"crash|{name}||{test_name}",
        f"host-back|{name}||{test_name}",
    ], events
    assert sorted(e for e in events if e.startswith("end|")) == sorted(f"end|{h.name}|0|" for h in two), events
    assert events[-1].startswith("end|"), events
    assert rows(j, "SELECT count(*) FROM run_inputs") == rows(j, "SELECT count(*) FROM runs") == [(5,)]
