"""fio's client/server mode, safely: load from several client hosts, driven by one `fio --client`.

fio's server has no authentication and runs whatever job a client sends it (job options include commands), so
it never listens on a TCP port, not even on loopback (any local user can reach loopback): each client runs
`fio --server=sock:DIR/fio.sock`, a Unix socket in a directory of mode 0700 that the server's shell creates
(`mkdir -m 700`: one already there, e.g. planted, is refused), and tankbench reaches it through an ssh forward of
a connection of its own (`-L LOCAL.sock:DIR/fio.sock`) whose local end is a socket in a private directory here
(mode 0700). Only the ssh user on the client and the user running tankbench here can reach a server.

Nothing outlives tankbench (issue 34 item 2). On the client the server runs under a shell that waits for EOF on
its stdin, our pipe through ssh; then it ends fio and every process under it (fio's job processes call setsid:
the shell follows the process tree, not the group), SIGKILL after 2 s, and removes its directory. Here a watchdog
(fio/watchdog.py) holds the forwards, the `fio --client` of a run and the private directory: when tankbench ends
in any way, also kill -9, the watchdog ends them (the client side then sees its connection close) and removes
the directory with its sockets and job files.

Everything is checked before any server starts: a client named twice or that is the server host, fio versions
that differ between clients and this machine (client and server must speak the same protocol).
"""

from __future__ import annotations

import secrets
import shlex
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from tankbench.errors import HostError, UserError
from tankbench.fio.parse import load_fio_json
from tankbench.fio.server import SERVER_SCRIPT
from tankbench.fio.watchdog import Watchdog
from tankbench.hosts.ssh import SshHost


def server_dir() -> str:
    """A fresh, unguessable directory name on a client for one server's socket (the shell makes it, mode 0700)."""
    return f"/tmp/tankbench-fio-{secrets.token_hex(8)}"


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


def _tcp_listeners(host: SshHost, pid: int) -> list[str]:
    """TCP addresses the process `pid` listens on, on the host (`ss -ltnpH`): none for a server on a socket."""
    res = host.run(["ss", "-ltnpH"], timeout=60, check=True)
    return [line.split()[3] for line in res.stdout.splitlines() if f"pid={pid}," in line and len(line.split()) > 3]


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
    """`with FioServers(clients, server=...) as s: s.run(job_text)`: a fio server per client on a Unix socket,
    reached only through ssh; everything ends with the `with`, or with tankbench (the watchdog)."""

    def __init__(self, clients: Sequence[SshHost], *, server: str = "") -> None:
        self.clients = list(clients)
        self.server = server
        #: per client: the local end of its forward (a socket in our private directory), the server's directory there
        self.sockets: dict[str, str] = {}
        self.remote_dirs: dict[str, str] = {}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.directory = ""
        self.watchdog: Watchdog | None = None
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
        self.fio_version = local
        return local

    def __enter__(self) -> FioServers:
        self.check()
        self.directory = tempfile.mkdtemp(prefix="tankbench-fio-")  # mode 0700: our sockets and job files
        self.watchdog = Watchdog(self.directory)
        try:
            for j, c in enumerate(self.clients):
                self._start(j, c)
            for c in self.clients:
                self._wait_listening(c)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def _start(self, j: int, c: SshHost) -> None:
        assert self.watchdog is not None
        local, remote = f"{self.directory}/c{j}.sock", server_dir()
        argv = [
            "ssh",
            *_own_connection(c.ssh_options()),
            "-o",
            "ExitOnForwardFailure=yes",
            "-L",
            f"{local}:{remote}/fio.sock",
            "--",  # before the target: a target beginning with `-` is not an ssh option
            c.target,
            shlex.join(["sh", "-c", SERVER_SCRIPT, "sh", remote]),
        ]
        # own session: a Ctrl-C reaches us (and our exit stops it), not ssh directly
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
        self.watchdog.watch(proc.pid)
        self.procs[c.name], self.sockets[c.name], self.remote_dirs[c.name] = proc, local, remote

    def _wait_listening(self, c: SshHost, timeout: float = 60.0) -> None:
        """Until the client's fio serves on its socket (polled), on no TCP port; HostError if it ends first."""
        proc = self.procs[c.name]
        assert proc.stdout is not None
        line = proc.stdout.readline().decode(errors="replace")  # the shell's "started" line
        if not line.startswith("tankbench-fio-server"):
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise HostError(f"{c.name}: fio --server did not start: {err.strip()[-500:]}")
        pid = int(line.split()[1])
        sock = f"{self.remote_dirs[c.name]}/fio.sock"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if c.run(["test", "-S", sock], timeout=60).returncode == 0:
                tcp = _tcp_listeners(c, pid)
                if tcp:
                    raise HostError(f"{c.name}: fio listens on {tcp}, not only on its socket: stopped")
                return
            if proc.poll() is not None:
                break
            time.sleep(0.1)  # polling for the server to listen
        raise HostError(f"{c.name}: fio --server did not listen on {sock}")

    def stop(self) -> None:
        """Close each server's stdin (its shell then ends fio), wait for the connections to end, then let the
        watchdog remove our directory."""
        for proc in self.procs.values():  # all at once: the servers end in parallel
            try:
                if proc.stdin:
                    proc.stdin.close()
            except OSError:
                pass
        for name, proc in list(self.procs.items()):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()  # the connection drops: sshd closes the shell's stdin, which ends fio the same way
                proc.wait()
            if self.watchdog is not None:
                self.watchdog.forget(proc.pid)
            del self.procs[name]
        if self.watchdog is not None:
            self.watchdog.close()
            self.watchdog = None

    def run(self, job_text: str, timeout: float) -> tuple[list[ClientResult], ClientResult, str]:
        """Run one job on every client through `fio --client`; (per client, aggregate, fio's JSON text)."""
        rc, out, err, _ = self.run_raw(job_text, timeout)
        if rc != 0:
            raise HostError(f"fio --client exited {rc}: {err.strip()[-500:]}")
        per, total = self.results(out)
        return per, total, out

    def run_raw(self, job_text: str, timeout: float) -> tuple[int, str, str, float]:
        """Run one job on every client through `fio --client`: (exit status, stdout, stderr, wall seconds); a
        run that does not end within `timeout` is killed (exit status 124, as timeout(1) says). The job file
        and the `fio --client` are the watchdog's until they end."""
        assert self.watchdog is not None, "run inside `with FioServers(...)`"
        with tempfile.NamedTemporaryFile("w", suffix=".fio", prefix="tankbench-client-", dir=self.directory) as f:
            f.write(job_text)
            f.flush()
            argv = ["fio", "--output-format=json"]
            for c in self.clients:
                argv += [f"--client=sock:{self.sockets[c.name]}", f.name]
            t0 = time.monotonic()
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.watchdog.watch(proc.pid)
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
                return 124, out or "", f"fio --client did not finish in {timeout:.0f} s", time.monotonic() - t0
            finally:
                if proc.poll() is not None:  # still running (Ctrl-C): the watchdog ends it with the servers
                    self.watchdog.forget(proc.pid)
            return proc.returncode, out, err, time.monotonic() - t0

    def results(self, text: str) -> tuple[list[ClientResult], ClientResult]:
        """(per client, aggregate) from `fio --client`'s JSON (its `client_stats`, by the socket we reached)."""
        doc = load_fio_json(text)
        by_socket = {sock: name for name, sock in self.sockets.items()}
        per: dict[str, list[dict[str, Any]]] = {}
        for entry in doc.get("client_stats", []):
            if entry.get("jobname") == "All clients":
                continue
            host = str(entry.get("hostname"))
            per.setdefault(by_socket.get(host, host), []).append(entry)
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
