"""fio's client/server mode, safely: load from several client hosts, driven by one `fio --client`.

fio's server has no authentication and runs whatever job a client sends it (job options include commands),
so here it never listens on a network interface: each client runs `fio --server=127.0.0.1,PORT` and tankbench
reaches it through an ssh port forward (`-L 127.0.0.1:LOCAL:127.0.0.1:PORT`) of a connection of its own. The
server's lifetime is tied to that connection: it runs under a shell that waits for EOF on its stdin (our pipe)
and then kills it, so it stops at the end, on Ctrl-C (the context manager's exit) and after a kill -9 of
tankbench (the kernel closes our pipe; ssh sends EOF; the shell ends fio). Everything is checked before any
server starts: a client named twice or that is the server host, a port already in use on a client, fio
versions that differ between clients and this machine (client and server must speak the same protocol).
"""

from __future__ import annotations

import shlex
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from tankbench.errors import HostError, UserError
from tankbench.fio.parse import load_fio_json
from tankbench.fio.server import DEFAULT_PORT, SERVER_SCRIPT
from tankbench.hosts.ssh import SshHost


@dataclass(frozen=True)
class ClientResult:
    """One client's share of a client/server run (fio's `client_stats` entry), or the aggregate."""

    host: str
    read_bw_bytes: float
    write_bw_bytes: float
    read_iops: float
    write_iops: float
    entry: dict[str, Any]


def check_clients(server: str, clients: Sequence[SshHost]) -> None:
    """UserError when a client is named twice or is the host that serves the target (pure)."""
    seen: set[str] = set()
    for c in clients:
        if c.name == server or c.address == server:
            raise UserError(
                f"client {c.name} is the server host: its load would compete with the server it measures",
                "name client hosts other than the host that holds the target",
            )
        if c.name in seen:
            raise UserError(f"client {c.name} is named twice", "name each client host once")
        seen.add(c.name)


def check_versions(local: str, versions: dict[str, str]) -> None:
    """UserError when any client's fio differs from this machine's (pure)."""
    odd = {h: v for h, v in versions.items() if v != local}
    if odd:
        shown = ", ".join(f"{h}: {v or 'no fio'}" for h, v in sorted(odd.items()))
        raise UserError(
            f"fio versions differ: this machine has {local}, {shown}; fio's client and servers must be one version",
            "install the same fio on every client (Debian: apt-get install fio from the same release)",
        )


def _version(argv: list[str]) -> str:
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return cp.stdout.strip() if cp.returncode == 0 else ""


def _listening(host: SshHost, port: int) -> list[str]:
    """Local addresses listening on TCP `port` on the host (`ss -ltnH`)."""
    res = host.run(["ss", "-ltnH", f"sport = :{port}"], timeout=60, check=True)
    return [line.split()[3] for line in res.stdout.splitlines() if len(line.split()) >= 4]


def _free_local_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _own_connection(options: list[str]) -> list[str]:
    """The host's ssh options without its ControlMaster settings: the forward gets a connection of its own,
    so ending it ends the server (a shared master would outlive us by ControlPersist)."""
    out, i = [], 0
    while i < len(options):
        if options[i] == "-o" and i + 1 < len(options) and options[i + 1].startswith("Control"):
            i += 2
            continue
        out.append(options[i])
        i += 1
    return out + ["-o", "ControlMaster=no", "-o", "ControlPath=none"]


class FioServers:
    """`with FioServers(clients, server=...) as s: s.run(job_text)`: a loopback-only fio server per client."""

    def __init__(self, clients: Sequence[SshHost], *, server: str = "", port: int = DEFAULT_PORT) -> None:
        self.clients = list(clients)
        self.server = server
        self.port = port
        self.local_ports: dict[str, int] = {}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        #: the fio version every end runs (set by check)
        self.fio_version = ""

    def check(self) -> str:
        """Everything that can be refused, before any server starts; returns the fio version."""
        check_clients(self.server, self.clients)
        for c in self.clients:
            c.check_connection()
        local = _version(["fio", "--version"])
        if not local:
            raise UserError("fio is not installed on this machine (fio --client runs here)", "apt-get install fio")
        check_versions(local, {c.name: c.run(["fio", "--version"], timeout=60).stdout.strip() for c in self.clients})
        for c in self.clients:
            taken = _listening(c, self.port)
            if taken:
                raise UserError(
                    f"{c.name}: port {self.port} is in use there ({', '.join(taken)})",
                    "stop what listens there, or choose another fio server port",
                )
        self.fio_version = local
        return local

    def __enter__(self) -> FioServers:
        self.check()
        try:
            for c in self.clients:
                self._start(c)
            for c in self.clients:
                self._wait_listening(c)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def _start(self, c: SshHost) -> None:
        lport = _free_local_port()
        argv = [
            "ssh",
            *_own_connection(c.ssh_options()),
            "-o",
            "ExitOnForwardFailure=yes",
            "-L",
            f"127.0.0.1:{lport}:127.0.0.1:{self.port}",
            c.target,
            "--",
            shlex.join(["sh", "-c", SERVER_SCRIPT, "sh", str(self.port)]),
        ]
        # own session: a Ctrl-C reaches us (and our exit stops it), not ssh directly
        self.procs[c.name] = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
        self.local_ports[c.name] = lport

    def _wait_listening(self, c: SshHost, timeout: float = 60.0) -> None:
        """Until the client's fio listens on loopback (polled), and only there; HostError if it ends first."""
        proc = self.procs[c.name]
        assert proc.stdout is not None
        line = proc.stdout.readline().decode(errors="replace")  # the shell's "started" line
        if not line.startswith("tankbench-fio-server"):
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise HostError(f"{c.name}: fio --server did not start: {err.strip()[-500:]}")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            addrs = _listening(c, self.port)
            if addrs:
                if any(not a.startswith("127.0.0.1:") for a in addrs):
                    raise HostError(f"{c.name}: fio listens on {addrs}, not on loopback only: stopped")
                return
            if proc.poll() is not None:
                break
            time.sleep(0.1)  # polling for the server to listen
        raise HostError(f"{c.name}: fio --server did not listen on 127.0.0.1:{self.port}")

    def stop(self) -> None:
        """Close each server's stdin (its shell then kills fio) and wait for the connection to end."""
        for name, proc in list(self.procs.items()):
            try:
                if proc.stdin:
                    proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()  # the connection drops: sshd closes the shell's stdin, which ends fio the same way
                proc.wait()
            del self.procs[name]

    def run(self, job_text: str, timeout: float) -> tuple[list[ClientResult], ClientResult, str]:
        """Run one job on every client through `fio --client`; (per client, aggregate, fio's JSON text)."""
        rc, out, err, _ = self.run_raw(job_text, timeout)
        if rc != 0:
            raise HostError(f"fio --client exited {rc}: {err.strip()[-500:]}")
        per, total = self.results(out)
        return per, total, out

    def run_raw(self, job_text: str, timeout: float) -> tuple[int, str, str, float]:
        """Run one job on every client through `fio --client`: (exit status, stdout, stderr, wall seconds); a
        run that does not end within `timeout` is killed (exit status 124, as timeout(1) says)."""
        with tempfile.NamedTemporaryFile("w", suffix=".fio", prefix="tankbench-client-") as f:
            f.write(job_text)
            f.flush()
            argv = ["fio", "--output-format=json"]
            for c in self.clients:
                argv += [f"--client=127.0.0.1,{self.local_ports[c.name]}", f.name]
            t0 = time.monotonic()
            try:
                cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired as e:
                out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
                return 124, out, f"fio --client did not finish in {timeout:.0f} s", time.monotonic() - t0
            return cp.returncode, cp.stdout, cp.stderr, time.monotonic() - t0

    def results(self, text: str) -> tuple[list[ClientResult], ClientResult]:
        """(per client, aggregate) from `fio --client`'s JSON (its `client_stats`, by the port we reached)."""
        doc = load_fio_json(text)
        by_port = {p: name for name, p in self.local_ports.items()}
        per: dict[str, list[dict[str, Any]]] = {}
        for entry in doc.get("client_stats", []):
            if entry.get("jobname") == "All clients":
                continue
            per.setdefault(by_port.get(int(entry.get("port", 0)), str(entry.get("hostname"))), []).append(entry)
        results = [_result(name, entries) for name, entries in per.items()]
        total = _result("all clients", [e for es in per.values() for e in es])
        return results, total


def _result(host: str, entries: list[dict[str, Any]]) -> ClientResult:
    def total(direction: str, key: str) -> float:
        return float(sum(e.get(direction, {}).get(key, 0) for e in entries))

    return ClientResult(
        host,
        total("read", "bw_bytes"),
        total("write", "bw_bytes"),
        total("read", "iops"),
        total("write", "iops"),
        {"entries": entries},
    )
