"""A campaign whose file target names two client hosts (namespace hosts, real sshd, real fio servers): `tankbench
run` drives them through fio client/server, the journal keeps per-client and total figures, the report shows
both, nothing listens afterwards (also after kill -9 of tankbench), and bad clients are refused first."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import proc_cmdline, run_until_fio_servers, tankbench, wait_until
from tests.netns import NetnsHost, namespace_hosts

PORT = 18766

CAMPAIGN = """
[campaign]
name = "clients-itest"
runtime = "{runtime}"
ramp = "0s"
warmup = false
repeats = 1
host = "local"

[[target]]
name = "load"
kind = "file"
path = "{dir}"
size = "4M"
clients = [{clients}]
client_port = {port}

[fio]
rate = "1m"

[matrix]
rw = ["read", "write"]
bs = ["64k"]
iodepth = [1]
io = ["direct"]
"""


@pytest.fixture
def clients(tmp_path: Path):
    with namespace_hosts(2, tmp_path / "ns") as pair:
        yield pair


def campaign(
    tmp: Path, hosts: list[NetnsHost], target: Path, runtime: str = "2s", port: int = PORT, name: str = "clients"
) -> Path:
    c = tmp / f"{name}.toml"
    c.write_text(
        CAMPAIGN.format(runtime=runtime, dir=target / "load", clients=", ".join(h.table() for h in hosts), port=port)
    )
    return c


def listeners(h: NetnsHost) -> list[str]:
    """Every TCP listener in the host's namespace that is not its sshd."""
    out = subprocess.run(
        ["ip", "netns", "exec", h.netns, "ss", "-ltnpH"], capture_output=True, text=True, check=True
    ).stdout
    return [line for line in out.splitlines() if "sshd" not in line]


def wait_nothing_listening(hosts: list[NetnsHost], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while any(listeners(h) + unix_listeners(h) for h in hosts) and time.monotonic() < deadline:
        time.sleep(0.1)  # polling until the servers are gone
    assert [listeners(h) + unix_listeners(h) for h in hosts] == [[] for _ in hosts]


def test_two_clients_run_a_campaign_with_per_client_and_total_results(clients, tmp_path: Path):
    hosts, target = clients
    c = campaign(tmp_path, hosts, target)
    j = tmp_path / "j.sqlite"
    res = tankbench("run", str(c), "--journal", str(j), cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr + res.stdout
    assert "2 run(s) done" in res.stdout
    wait_nothing_listening(hosts, timeout=5)
    conn = sqlite3.connect(j)
    try:
        runs = conn.execute("SELECT metrics, checks, fio_json, host FROM runs WHERE status = 'done'").fetchall()
    finally:
        conn.close()
    assert len(runs) == 2
    names = sorted(h.name for h in hosts)
    for metrics_text, checks_text, fio_json, host in runs:
        metrics, checks = json.loads(metrics_text), json.loads(checks_text)
        assert host == "local"  # the campaign's host; the clients generated the load
        assert sorted(checks["clients.results"]) == names
        assert checks["clients.hosts"] == [h.name for h in hosts]
        assert checks["layout.verified"] is True
        machines = checks["clients.machines"]
        assert sorted(m["hostname"] for m in machines.values()) == sorted(h.netns for h in hosts)
        assert {m["fio_version"] for m in machines.values()} == {checks["clients.fio_version"]}
        per = checks["clients.results"]
        direction = "read" if per[names[0]]["read_bw_bytes"] else "write"
        for name in names:  # rate = 1m on each client
            assert 0.5 * 2**20 < per[name][f"{direction}_bw_bytes"] < 1.5 * 2**20, per
        total = sum(p[f"{direction}_bw_bytes"] for p in per.values())
        assert checks["clients.total"][f"{direction}_bw_bytes"] == pytest.approx(total)
        assert metrics[f"{direction}.bw_bytes"] == pytest.approx(total, rel=0.01)  # the run's figure: the sum
        assert '"client_stats"' in fio_json
    for h in hosts:  # each client laid out its own file in its own directory, and fio used that file
        assert (h.base / "target" / "load" / "tankbench-load.fiodata").stat().st_size == 4 << 20
        assert [p.name for p in (h.base / "target" / "load").iterdir()] == ["tankbench-load.fiodata"]
    md = (tmp_path / "report" / "clients.md").read_text()
    for name in names:
        assert name in md
    assert "all clients" in md
    # the main report summarises them too: each client's mean beside all clients' (summary.md, index.html, JSON)
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert "## Load from client hosts" in summary
    row = next(line for line in summary.splitlines() if line.startswith("| #") and " | 1 | " in line)
    assert all(name in row for name in names), row
    assert '<h2 id="clients">Load from client hosts</h2>' in (tmp_path / "report" / "index.html").read_text()
    rows = json.loads((tmp_path / "report" / "results.json").read_text())["clients"]
    assert len(rows) == 2 and all(sorted(r["clients_mibs"]) == names for r in rows)
    for r in rows:  # rate = 1m on each client: the means and the sum agree with the journal's figures
        assert all(0.5 < m < 1.5 for m in r["clients_mibs"].values()), r
        assert r["all_clients_mibs"] == pytest.approx(sum(r["clients_mibs"].values()), rel=0.02)
        assert 0.5 < r["even"] <= 1.0
    # plan --export's script does the same with plain fio and ssh, and leaves nothing behind either
    exported = tankbench("plan", str(c), "--export", str(tmp_path / "x"), cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    script = subprocess.run(["sh", str(tmp_path / "x" / "0001-job.sh")], capture_output=True, text=True, timeout=120)
    assert script.returncode == 0, script.stderr
    doc = json.loads(script.stdout[script.stdout.index("{") :])
    entries = [e for e in doc["client_stats"] if e["jobname"] != "All clients"]
    assert len(entries) == 2 and all(0.5 * 2**20 < e["read"]["bw_bytes"] < 1.5 * 2**20 for e in entries)
    wait_nothing_listening(hosts, timeout=5)
    assert [fio_processes(h) for h in hosts] == [[], []]


def tree(top: int) -> dict[int, str]:
    """`top` and every process under it, each with its start time (a pid with another start time is not it)."""
    parent, start = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parent[int(stat.parent.name)], start[int(stat.parent.name)] = int(fields[1]), fields[19]
    out, grew = {top}, True
    while grew:
        grew = False
        for pid, ppid in parent.items():
            if ppid in out and pid not in out:
                out.add(pid)
                grew = True
    return {p: start[p] for p in out if p in start}


def still_running(procs: dict[int, str]) -> list[str]:
    """The processes of `procs` that still run (not zombies: a dead child its dead parent left unreaped)."""
    out = []
    for pid, when in procs.items():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[19] == when and fields[0] != "Z":
            out.append(f"{pid} {proc_cmdline(pid)}")
    return out


def unix_listeners(h: NetnsHost) -> list[str]:
    """Unix sockets listening in the host's namespace that are a fio server's."""
    out = subprocess.run(
        ["ip", "netns", "exec", h.netns, "ss", "-lxpH"], capture_output=True, text=True, check=True
    ).stdout
    return [line for line in out.splitlines() if "fio" in line or "tankbench-fio-" in line]


def leftovers(hosts: list[NetnsHost], ours: dict[int, str], since: float) -> list[str]:
    """Anything of tankbench's on any host: its processes here (the agent, fio --client, the ssh forwards, the
    watchdog), fio processes and listeners on the clients, its directories and job files in /tmp."""
    found = still_running(ours)
    found += [f"{h.netns}: fio pid {p}" for h in hosts for p in fio_processes(h)]
    found += [f"{h.netns}: {line}" for h in hosts for line in listeners(h) + unix_listeners(h)]
    found += [str(p) for p in Path("/tmp").glob("tankbench-fio-*") if p.stat().st_mtime >= since]
    return found + [str(p) for p in Path("/tmp").glob("tankbench-client-*.fio")]


@pytest.mark.parametrize("how", ["kill -9", "Ctrl-C"])
def test_tankbench_stopped_mid_run_leaves_nothing_within_5_s(clients, tmp_path: Path, how: str):
    """Issue 34 item 2: tankbench stopped during a 60 s client job (kill -9, or a terminal's Ctrl-C): within 5 s
    no fio process, listener, socket or file of ours is left on any host (measured)."""
    hosts, target = clients
    c = campaign(tmp_path, hosts, target, runtime="60s")
    j = tmp_path / "j.sqlite"
    since = time.time() - 1
    proc, seen = run_until_fio_servers(c, j, tmp_path, timeout=120, new_session=True)
    assert proc.stdout is not None
    assert [len(unix_listeners(h)) for h in hosts] == [1, 1] and [listeners(h) for h in hosts] == [[], []]
    wait_until(lambda: len(fio_processes(hosts[0])) >= 2, 30, "the job runs on the client (server and job)")
    ours = tree(proc.pid)
    t0 = time.monotonic()
    if how == "kill -9":
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait() == -signal.SIGKILL
    else:  # a terminal's Ctrl-C reaches the whole foreground process group
        os.killpg(proc.pid, signal.SIGINT)
        rest = proc.stdout.read()
        assert proc.wait() == 130, "".join(seen) + rest
    deadline = t0 + 30
    while leftovers(hosts, ours, since) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling until nothing of ours is left
    took = time.monotonic() - t0
    assert leftovers(hosts, ours, since) == []
    print(f"{how}: nothing of tankbench's left on any host {took:.2f} s after it was stopped")
    assert took <= 5.0, f"{how}: things of ours were left for {took:.2f} s"


def fio_processes(h: NetnsHost) -> list[int]:
    """Processes named fio in the host's namespace (the server and the jobs it forks)."""
    pids = subprocess.run(["ip", "netns", "pids", h.netns], capture_output=True, text=True).stdout.split()
    out = []
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "fio":
                out.append(int(pid))
        except OSError:
            continue
    return out


def test_bad_clients_are_refused_before_anything_is_created(clients, tmp_path: Path):
    hosts, target = clients
    c = campaign(tmp_path, hosts, target)
    # a directory whose parent does not exist on the clients
    nowhere = campaign(tmp_path, hosts, target / "nowhere", name="nowhere")
    res = tankbench("run", str(nowhere), "--journal", str(tmp_path / "j.sqlite"), cwd=tmp_path)
    assert res.returncode == 2, res.stderr + res.stdout
    assert f"neither it nor its parent directory exists on client {hosts[0].name}" in res.stderr, res.stderr
    # a different fio here (where fio --client runs) than on the clients: a shim first on this PATH
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "fio").write_text(
        '#!/bin/sh\n[ "$1" = --version ] && { echo fio-2.1.4; exit 0; }\nexec /usr/bin/fio "$@"\n'
    )
    (shim / "fio").chmod(0o755)
    path = f"{shim}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    res = tankbench("run", str(c), "--journal", str(tmp_path / "j.sqlite"), cwd=tmp_path, env={"PATH": path})
    assert res.returncode == 2, res.stderr + res.stdout
    assert "fio versions differ" in res.stderr and "fio-2.1.4" in res.stderr, res.stderr
    assert "Hint: " in res.stderr
    assert not (tmp_path / "j.sqlite").exists()
    for h in hosts:
        assert not (h.base / "target" / "load").exists()
