"""fio client/server with namespace hosts as clients: per-client and total results, servers on Unix sockets reached
only through ssh (no TCP port), nothing left running, listening or on disk afterwards (also after kill -9 of the
process that started the servers), bad input refused first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tankbench.errors import HostError, UserError
from tankbench.fio.clientserver import FioServers
from tankbench.hosts.ssh import SshHost
from tests.netns import NetnsHost, namespace_hosts


@pytest.fixture
def clients(tmp_path: Path):
    with namespace_hosts(2, tmp_path / "ns") as pair:
        yield pair


def ssh_host(h: NetnsHost, tmp_path: Path) -> SshHost:
    return SshHost(h.address, identity=h.identity, known_hosts=h.known_hosts, control_dir=tmp_path / "cm")


def listeners(h: NetnsHost, kind: str = "-ltnpH") -> list[str]:
    """fio's listening sockets in the host's namespace: TCP (`-ltnpH`) or Unix (`-lxpH`)."""
    out = subprocess.run(
        ["ip", "netns", "exec", h.netns, "ss", kind], capture_output=True, text=True, check=True
    ).stdout
    return [line for line in out.splitlines() if "fio" in line]


def leftovers(hosts: list[NetnsHost]) -> list[str]:
    """Anything of a fio server or its forward: a fio process or listener in a client's namespace, a server's or
    our directory in /tmp (the namespace hosts share it), an ssh forward of ours."""
    found = [f"{h.netns}: fio pid {p}" for h in hosts for p in fio_processes(h)]
    found += [f"{h.netns}: {line}" for h in hosts for kind in ("-ltnpH", "-lxpH") for line in listeners(h, kind)]
    found += [str(p) for p in Path("/tmp").glob("tankbench-fio-*") if p.stat().st_mtime > START]
    return found + forwards(hosts)


def forwards(hosts: list[NetnsHost]) -> list[str]:
    """ssh processes on this machine that forward a socket to these clients (FioServers's connections)."""
    out = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        text = b" ".join(argv).decode(errors="replace")
        if argv[0].endswith(b"ssh") and "tankbench-fio-" in text and any(h.address in text for h in hosts):
            out.append(text)
    return out


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


def wait_no_fio(hosts: list[NetnsHost], timeout: float = 60.0) -> float:
    """Seconds until nothing of the servers is left (polled); fails with what is left after `timeout`."""
    t0 = time.monotonic()
    while leftovers(hosts) and time.monotonic() < t0 + timeout:
        time.sleep(0.05)  # polling until the servers, their directories and our forwards are gone
    assert leftovers(hosts) == []
    return time.monotonic() - t0


START = time.time() - 1  # directories older than this test module are not ours to judge


JOB = """
[global]
ioengine=psync
rw=read
bs=64k
size=4M
runtime=2
time_based=1
directory={dir}
rate=1m

[load]
"""


def test_two_clients_give_per_client_and_total_results_and_leave_nothing_listening(clients, tmp_path: Path):
    hosts, target = clients
    hs = [ssh_host(h, tmp_path) for h in hosts]
    with FioServers(hs, server="lab") as servers:
        during = [(listeners(h), listeners(h, "-lxpH")) for h in hosts]
        per, total, text = servers.run(JOB.format(dir=target), timeout=120)
        assert os.stat(servers.directory).st_mode & 0o777 == 0o700
        remote = servers.remote_dirs[hs[0].name]
        assert os.stat(remote).st_mode & 0o777 == 0o700  # (the namespace hosts share this machine's /tmp)
    for tcp, unix in during:  # one fio, on its socket in its private directory, on no TCP port
        assert tcp == [] and len(unix) == 1 and "/tmp/tankbench-fio-" in unix[0], (tcp, unix)
    assert sorted(r.host for r in per) == sorted(h.name for h in hs)
    for r in per:
        assert 0.5 * 2**20 < r.read_bw_bytes < 1.5 * 2**20  # rate=1m on each client
    assert total.read_bw_bytes == pytest.approx(sum(r.read_bw_bytes for r in per))
    assert '"client_stats"' in text
    wait_no_fio(hosts, timeout=5)
    for h in hosts:  # each client wrote in its own directory (fio prefixes a name it makes of the client's address)
        names = [p.name for p in (h.base / "target").iterdir()]
        assert len(names) == 1 and names[0].endswith(".load.0.0"), names
    for h in hs:
        h.close()


STARTER = """
import sys
from pathlib import Path
from tankbench.fio.clientserver import FioServers
from tankbench.hosts.ssh import SshHost
hosts = [SshHost(a, identity=i, known_hosts=k, control_dir=Path(sys.argv[1])) for a, i, k in zip(*[iter(sys.argv[2:])] * 3)]
with FioServers(hosts, server="lab"):
    print("ready", flush=True)
    sys.stdin.read()
"""


def test_kill_9_of_the_starter_stops_every_server(clients, tmp_path: Path):
    hosts, _ = clients
    args = [str(tmp_path / "cm2")] + [x for h in hosts for x in (h.address, h.identity, h.known_hosts)]
    proc = subprocess.Popen(
        [sys.executable, "-c", STARTER, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    assert all(listeners(h, "-lxpH") for h in hosts)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert wait_no_fio(hosts) <= 5.0


def test_bad_input_is_refused_before_any_server_starts(clients, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    hosts, _ = clients
    a, b = (ssh_host(h, tmp_path) for h in hosts)
    with pytest.raises(UserError, match="is named twice"):
        FioServers([a, a], server="lab").check()
    with pytest.raises(UserError, match="is the server host"):
        FioServers([a, b], server=b.name).check()
    # a server directory someone made first on a client (a planted one): refused, nothing left running
    planted = Path("/tmp") / "tankbench-fio-planted"
    planted.mkdir(mode=0o755)
    monkeypatch.setattr("tankbench.fio.clientserver.server_dir", lambda: str(planted))
    try:
        with pytest.raises(HostError, match="fio --server did not start"):
            with FioServers([a], server="lab"):
                pass
        assert list(planted.iterdir()) == [] and fio_processes(hosts[0]) == []
    finally:
        planted.rmdir()
    a.close()
    b.close()
