"""fio client/server with namespace hosts as clients: per-client and total results, loopback only, nothing left
listening afterwards (also after kill -9 of the process that started the servers), bad input refused first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tankbench.errors import UserError
from tankbench.fio.clientserver import FioServers
from tankbench.hosts.ssh import SshHost
from tests.netns import NetnsHost, namespace_hosts

PORT = 18765


@pytest.fixture
def clients(tmp_path: Path):
    with namespace_hosts(2, tmp_path / "ns") as pair:
        yield pair


def ssh_host(h: NetnsHost, tmp_path: Path) -> SshHost:
    return SshHost(h.address, identity=h.identity, known_hosts=h.known_hosts, control_dir=tmp_path / "cm")


def listeners(h: NetnsHost) -> list[str]:
    out = subprocess.run(
        ["ip", "netns", "exec", h.netns, "ss", "-ltnpH"], capture_output=True, text=True, check=True
    ).stdout
    return [line for line in out.splitlines() if "fio" in line]


def wait_no_fio(hosts: list[NetnsHost], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while any(listeners(h) for h in hosts) and time.monotonic() < deadline:
        time.sleep(0.1)  # polling until the servers are gone
    assert [listeners(h) for h in hosts] == [[] for _ in hosts]


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
    with FioServers(hs, server="lab", port=PORT) as servers:
        during = [listeners(h) for h in hosts]
        per, total, text = servers.run(JOB.format(dir=target), timeout=120)
    for lines in during:  # one fio, listening on loopback only
        assert len(lines) == 1 and f"127.0.0.1:{PORT}" in lines[0], lines
    assert sorted(r.host for r in per) == sorted(h.name for h in hs)
    for r in per:
        assert 0.5 * 2**20 < r.read_bw_bytes < 1.5 * 2**20  # rate=1m on each client
    assert total.read_bw_bytes == pytest.approx(sum(r.read_bw_bytes for r in per))
    assert '"client_stats"' in text
    wait_no_fio(hosts, timeout=5)
    for h in hosts:  # each client wrote in its own directory
        assert [p.name for p in (h.base / "target").iterdir()] == ["127.0.0.1.load.0.0"]  # fio prefixes the client
    for h in hs:
        h.close()


STARTER = """
import sys
from pathlib import Path
from tankbench.fio.clientserver import FioServers
from tankbench.hosts.ssh import SshHost
hosts = [SshHost(a, identity=i, known_hosts=k, control_dir=Path(sys.argv[1])) for a, i, k in zip(*[iter(sys.argv[2:])] * 3)]
with FioServers(hosts, server="lab", port=%d):
    print("ready", flush=True)
    sys.stdin.read()
"""


def test_kill_9_of_the_starter_stops_every_server(clients, tmp_path: Path):
    hosts, _ = clients
    args = [str(tmp_path / "cm2")] + [x for h in hosts for x in (h.address, h.identity, h.known_hosts)]
    proc = subprocess.Popen(
        [sys.executable, "-c", STARTER % PORT, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    assert all(listeners(h) for h in hosts)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    wait_no_fio(hosts)


def test_bad_input_is_refused_before_any_server_starts(clients, tmp_path: Path):
    hosts, _ = clients
    a, b = (ssh_host(h, tmp_path) for h in hosts)
    with pytest.raises(UserError, match="is named twice"):
        FioServers([a, a], server="lab", port=PORT).check()
    with pytest.raises(UserError, match="is the server host"):
        FioServers([a, b], server=b.name, port=PORT).check()
    # a port in use on the second client: nothing starts on the first either
    busy = subprocess.Popen(
        ["ip", "netns", "exec", hosts[1].netns, "fio", f"--server=127.0.0.1,{PORT}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not listeners(hosts[1]) and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(UserError, match=f"port {PORT} is in use"):
            with FioServers([a, b], server="lab", port=PORT):
                pass
        assert listeners(hosts[0]) == []
    finally:
        busy.send_signal(signal.SIGTERM)
        busy.wait()
    a.close()
    b.close()
