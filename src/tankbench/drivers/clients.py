"""Targets with clients at run time: checks, fio servers (started once per client set), layouts and runs on the
clients, for one campaign run on one host (the options and campaign rules are targets/clients.py)."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tankbench.drivers.base import check_directory
from tankbench.errors import UserError
from tankbench.fio.clientserver import ClientResult, FioServers
from tankbench.fio.parse import FioOutputError
from tankbench.guest.guestcopy import observed
from tankbench.hosts.base import Host
from tankbench.hosts.ssh import SshHost
from tankbench.model import ClientHost, Target, Test
from tankbench.targets.base import Campaign
from tankbench.targets.clients import client_options

if TYPE_CHECKING:
    from tankbench.agent import FioRunRequest

#: what a run records of each client's machine (from its agent's probe)
MACHINE_FACTS = ("hostname", "cpu_model", "cpu_count", "mem_bytes", "kernel", "fio_version")


def ssh_client(c: ClientHost) -> SshHost:
    """The SshHost of a client (the same options an ssh campaign host gets)."""
    from os.path import expanduser

    return SshHost(
        c.address,
        user=c.user,
        port=c.port,
        identity=expanduser(c.identity) if c.identity else None,
        known_hosts=expanduser(c.known_hosts) if c.known_hosts else None,
    )


def local_addresses() -> set[str]:
    """This machine's IP addresses (`ip -o addr`), loopback included."""
    try:
        out = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    found = {"::1", "localhost"}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[2] in ("inet", "inet6"):
            found.add(parts[3].split("/")[0])
    return found


def resolve(address: str) -> set[str]:
    """The IP addresses a name resolves to (itself when it does not resolve: the ssh check says why)."""
    try:
        return {str(info[4][0]) for info in socket.getaddrinfo(address, None)} | {address}
    except OSError:
        return {address}


def server_addresses(host: Host) -> set[str]:
    """Addresses under which the campaign's host could be named as a client (a lab is reached through a port
    forward of this machine: no client address is the lab's)."""
    address = str(getattr(host, "address", ""))
    if host.name == "local":
        return local_addresses()
    return resolve(address) if address and not host.name.startswith("lab") else set()


def refuse_server_as_client(where: Callable[[int], str], host: Host, clients: tuple[ClientHost, ...]) -> None:
    """UserError when a client is the campaign's host (its load would compete with the server it measures)."""
    server = server_addresses(host)
    for j, c in enumerate(clients):
        addresses = resolve(c.address)
        loopback = host.name == "local" and any(a.startswith("127.") for a in addresses)  # all of 127/8 is here
        same_sshd = c.port == getattr(host, "port", None) and addresses & resolve(str(getattr(host, "address", "")))
        if c.name == host.name or loopback or addresses & server or same_sshd:
            raise UserError(
                f"{where(j)}: is the campaign's host ({host.name}): its load would compete with the server it measures",
                "name client hosts other than the host that holds the target",
            )


def _servers_key(t: Target) -> tuple[tuple[str, ...], int]:
    return tuple(c.name for c in client_options(t).clients), client_options(t).client_port


class ClientLoad:
    """The run-time side of targets with clients, for one campaign run on one host: checks, fio servers (started
    once per campaign, per set of clients and port), per-client layout and the client/server run."""

    def __init__(self, host: Host, spec: Campaign, note: Callable[[str], None]) -> None:
        self.host = host
        self.spec = spec
        self.path = spec.path
        self.note = note
        self.servers: dict[tuple[tuple[str, ...], int], FioServers] = {}
        self.versions: dict[tuple[tuple[str, ...], int], str] = {}
        #: each client's machine facts (its agent's fingerprint, the part that says what generated the load)
        self.machines: dict[str, dict[str, Any]] = {}

    def key(self, t: Target) -> str:
        """`target[i].clients` of target t, as the campaign file names it."""
        i = next((n for n, x in enumerate(self.spec.targets) if x.name == t.name), 0)
        return f"target[{i}].clients"

    def where(self, t: Target) -> Callable[[int], str]:
        """`file: target[i].clients[j] = 'name'` for client j of target t (errors name the key and value)."""
        return lambda j: f"{self.path}: {self.key(t)}[{j}] = {client_options(t).clients[j].name!r}"

    def check(self, t: Target) -> None:
        """Everything a client can be refused for, read-only (the preflight): UserError with a hint."""
        where = self.where(t)
        refuse_server_as_client(where, self.host, client_options(t).clients)
        hosts = [ssh_client(c) for c in client_options(t).clients]
        try:
            for j, h in enumerate(hosts):
                try:
                    h.check_connection()
                except UserError as e:
                    raise UserError(f"{where(j)}: {e.message}", e.hint) from e
                self._check_directory(t, h)
            servers = FioServers(hosts, server=self.host.name)
            try:
                servers.check()
            except UserError as e:
                names = ", ".join(c.name for c in client_options(t).clients)
                raise UserError(f"{self.path}: {self.key(t)} = [{names}]: {e.message}", e.hint) from e
        finally:
            for h in hosts:
                h.close()

    def _check_directory(self, t: Target, h: SshHost) -> None:
        probe = h.call_agent({"op": "probe", "paths": [t.path], "block_devices": []}, timeout=300)
        check_directory(f"{self.path}: target {t.name!r} path = {t.path!r}", probe, t.path, f"client {h.name}")

    def start(self, t: Target) -> FioServers:
        """The target's fio servers (started on first use; one set per campaign run)."""
        key = _servers_key(t)
        if key not in self.servers:
            servers = FioServers([ssh_client(c) for c in client_options(t).clients], server=self.host.name)
            servers.__enter__()  # checks again, starts, waits until each serves on its socket; stop() in finish
            self.servers[key] = servers
            self.versions[key] = servers.fio_version
            for h in servers.clients:
                fp = h.call_agent({"op": "probe", "paths": [], "block_devices": []}, timeout=300)["fingerprint"]
                self.machines[h.name] = {k: fp[k] for k in MACHINE_FACTS if k in fp}
            self.note(
                f"fio servers on {', '.join(c.name for c in client_options(t).clients)} (on Unix sockets, reached through ssh)"
            )
        return self.servers[key]

    def lay_out(self, test: Test, lay_out_one: Callable[[Host], dict[str, Any]]) -> dict[str, Any]:
        """Each client lays out and verifies its own test file; the run's layout is verified when every one is."""
        servers = self.start(test.target)
        per: dict[str, dict[str, Any]] = {}
        for h in servers.clients:
            per[h.name] = lay_out_one(h)
        return {
            "layout.verified": all(bool(c.get("layout.verified")) for c in per.values()),
            "clients.layout": per,
        }

    def run(self, test: Test, request: FioRunRequest) -> dict[str, Any]:
        """The test's job on every client at once through `fio --client`, while the host observes the window."""
        t = test.target
        servers = self.start(t)
        job = without_logs(str(request["job_text"]))
        deadline = float(request["deadline_s"])

        def go() -> tuple[int, str, str, float]:
            return servers.run_raw(job, timeout=deadline + 60)

        res, (rc, out, err, wall) = observed(self.host, {**request, "job_text": job}, go)
        host_wall = float(res.get("wall_s", wall))  # the host's observing window (fio --client's, plus a round trip)
        per: list[ClientResult] = []
        total: ClientResult | None = None
        try:
            per, total = servers.results(out)
        except FioOutputError:
            pass  # decide_run says the run failed, and why (the output and stderr are kept)
        res.update(
            fio_json=out,
            exit_status=rc,
            stderr_tail=err[-4000:],
            wall_s=wall,
            timed_out=rc == 124 or bool(res.get("timed_out")),
        )
        res["checks"] = dict(
            res.get("checks", {}),
            **{
                "clients.hosts": [c.name for c in client_options(t).clients],
                "clients.port": client_options(t).client_port,
                "clients.fio_version": self.versions.get(_servers_key(t), ""),
                "clients.machines": {c.name: self.machines.get(c.name, {}) for c in client_options(t).clients},
                "clients.results": {r.host: figures(r) for r in per},
                "clients.host_wall_s": round(host_wall, 3),
            },
        )
        if total is not None:
            res["checks"]["clients.total"] = figures(total)
        missing = sorted({c.name for c in client_options(t).clients} - {r.host for r in per})
        if rc == 0 and missing:
            res["exit_status"] = 1
            res["stderr_tail"] = f"fio --client gave no result for {', '.join(missing)}\n" + res["stderr_tail"]
        return res

    def stop(self) -> None:
        """Stop every fio server (the end of the campaign run, whatever happened)."""
        for key, servers in list(self.servers.items()):
            servers.stop()
            for h in servers.clients:
                h.close()
            del self.servers[key]


#: the per-job log options fio/jobs.py adds to a run's job (per-second logs; 100 ms IOPS logs of size-based jobs
#: that end with an fsync)
_LOG_OPTIONS = ("write_iops_log=", "write_bw_log=", "write_lat_log=", "log_avg_msec=", "per_job_logs=")


def without_logs(job: str) -> str:
    """The job without IOPS logs: on a client they would be written in the server's directory, not ours."""
    return "".join(line for line in job.splitlines(keepends=True) if not line.startswith(_LOG_OPTIONS))


def figures(r: ClientResult) -> dict[str, float]:
    """One client's (or the total's) figures as a run's checks keep them."""
    return {
        "read_bw_bytes": r.read_bw_bytes,
        "write_bw_bytes": r.write_bw_bytes,
        "read_iops": r.read_iops,
        "write_iops": r.write_iops,
        "jobs": float(len(r.entry.get("entries", []))),
    }
