"""A target's `clients`: ssh hosts whose fio generates its load through fio's client/server mode.

A `kind = "file"` target with `clients = [...]` names a directory on each client (`path`): every client lays
out its own test file there and runs the test's job on it, all at once, driven by one `fio --client` on this
machine through loopback-only servers reached over ssh (fio/clientserver.py). The campaign's host observes the
same window (samplers, drain) as it does for a test guest. One journal run per test run: the aggregate figures
are the run's metrics, each client's are in its checks (`clients.results`) and in the run's fio JSON
(`client_stats`).

Everything a client can be refused for is checked before anything is created (the preflight): an entry that
is not an ssh host, a client named twice, a client that is the campaign's host, an unreachable client, a
directory that is not usable there, fio versions that differ, the server port in use on a client.
"""

from __future__ import annotations

import shlex
import socket
import subprocess
from collections.abc import Callable, Mapping
from typing import Any

from tankbench.errors import UserError
from tankbench.fio.clientserver import DEFAULT_PORT, SERVER_SCRIPT, ClientResult, FioServers
from tankbench.fio.parse import FioOutputError
from tankbench.guest.guestcopy import observed
from tankbench.hosts.base import Host
from tankbench.hosts.ssh import SshHost
from tankbench.keys import Keys
from tankbench.model import ClientHost, Target, Test
from tankbench.targets.base import Campaign, check_directory

#: what a run records of each client's machine (from its agent's probe)
MACHINE_FACTS = ("hostname", "cpu_model", "cpu_count", "mem_bytes", "kernel", "fio_version")
#: keys of a client's inline table
CLIENT_KEYS = ("address", "user", "port", "identity", "known_hosts")
_EXAMPLE = 'e.g. clients = ["root@10.0.0.2", "root@10.0.0.3"] or [{ address = "10.0.0.2", identity = "~/.ssh/id" }]'


def _entry(keys: Keys, key: str, value: object) -> ClientHost:
    if isinstance(value, str):
        text = value.removeprefix("ssh:")
        if text in ("local", "lab") or text.startswith("lab:"):
            raise keys.err(
                key,
                value,
                "a client is an ssh host (its fio serves on loopback, reached through ssh)",
                f"name the client's ssh address; {_EXAMPLE}",
            )
        user, _, rest = text.rpartition("@")
        address, port = rest, 22
        if rest.startswith("["):  # [IPv6]:port
            address, _, p = rest[1:].partition("]")
            port = int(p[1:]) if p.startswith(":") and p[1:].isdigit() else (22 if not p else -1)
        elif rest.count(":") == 1:
            address, _, p = rest.partition(":")
            port = int(p) if p.isdigit() else -1
        if not address or any(ch.isspace() for ch in text) or not 1 <= port <= 65535:
            raise keys.err(key, value, "not an ssh host", f"write [user@]address[:port]; {_EXAMPLE}")
        return ClientHost(address=address, user=user or "root", port=port)
    if not isinstance(value, dict):
        raise keys.err(key, value, "must be a string or an inline table", _EXAMPLE)
    keys.unknown_keys(value, CLIENT_KEYS, key + ".")
    address = keys.string(key + ".address", value.get("address", ""))
    if not address:
        raise keys.err(key + ".address", value.get("address"), "a client needs an address", _EXAMPLE)
    return ClientHost(
        address=address,
        user=keys.string(key + ".user", value.get("user", "root")) or "root",
        port=keys.integer(key + ".port", value.get("port", 22), 1, 65535),
        identity=keys.string(key + ".identity", value.get("identity", "")),
        known_hosts=keys.string(key + ".known_hosts", value.get("known_hosts", "")),
    )


def parse_clients(keys: Keys, table: Mapping[str, Any], prefix: str) -> tuple[tuple[ClientHost, ...], int]:
    """(clients, fio server port) of a target table's `clients` and `client_port` keys (pure)."""
    if "clients" not in table:
        if "client_port" in table:
            raise keys.err(prefix + "client_port", table["client_port"], "given without clients", _EXAMPLE)
        return (), 0
    value = table["clients"]
    if not isinstance(value, list) or not value:
        raise keys.err(prefix + "clients", value, "must be a non-empty list of client hosts", _EXAMPLE)
    clients = tuple(_entry(keys, f"{prefix}clients[{i}]", v) for i, v in enumerate(value))
    seen: dict[str, int] = {}
    for i, c in enumerate(clients):
        if c.name in seen:
            raise keys.err(
                f"{prefix}clients[{i}]",
                value[i],
                f"names the same client as {prefix}clients[{seen[c.name]}] ({c.name})",
                "name each client host once",
            )
        seen[c.name] = i
    port = keys.integer(prefix + "client_port", table.get("client_port", DEFAULT_PORT), 1024, 65535)
    return clients, port


def check_client_targets(
    keys: Keys,
    targets: tuple[Target, ...],
    matrix: Mapping[str, tuple[Any, ...]],
    includes: tuple[Mapping[str, Any], ...],
    fleet: bool,
) -> None:
    """Campaign-wide rules for targets with clients (pure): no copy or fill workloads (they run on the
    campaign's host), no fleet (hosts sharing one set of clients would start their servers on one port)."""
    named = [(i, t) for i, t in enumerate(targets) if t.clients]
    if not named:
        return
    i, t = named[0]
    owner: dict[tuple[str, int], tuple[int, Target]] = {}
    for n, x in named:  # one fio server per client and port: targets that share one share the whole set
        for c in x.clients:
            first = owner.setdefault((c.name, x.client_port), (n, x))
            if first[1].clients != x.clients:
                raise keys.err(
                    f"target[{n}].clients",
                    [c.name for c in x.clients],
                    f"shares client {c.name} (port {x.client_port}) with target[{first[0]}], whose clients differ",
                    "give both targets the same clients, or this one another client_port",
                )
    odd = [w for w in matrix.get("workload", ()) if w != "fio"]
    if odd:
        raise keys.err(
            "matrix.workload",
            list(matrix["workload"]),
            f"target {t.name!r} has clients: copy and fill workloads run on the campaign's host, not through "
            "fio client/server",
            'use workload = ["fio"] with client targets (a campaign of their own for the copy tests)',
        )
    with_clients = {x.name for _, x in named}
    for n, inc in enumerate(includes):
        if inc.get("workload", "fio") != "fio" and inc.get("target", t.name) in with_clients:
            raise keys.err(
                f"include[{n}].workload",
                inc["workload"],
                f"target {inc.get('target', t.name)!r} has clients: copy and fill workloads run on the campaign's "
                "host, not through fio client/server",
                'give the include a target without clients (target = "…")',
            )
    if fleet:
        raise keys.err(
            f"target[{i}].clients",
            [c.name for c in t.clients],
            "client targets run on one campaign host, not with campaign.hosts",
            "name one host ([host] or campaign.host) for a campaign with client targets",
        )


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
    return tuple(c.name for c in t.clients), t.client_port


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
        return lambda j: f"{self.path}: {self.key(t)}[{j}] = {t.clients[j].name!r}"

    def check(self, t: Target) -> None:
        """Everything a client can be refused for, read-only (the preflight): UserError with a hint."""
        where = self.where(t)
        refuse_server_as_client(where, self.host, t.clients)
        hosts = [ssh_client(c) for c in t.clients]
        try:
            for j, h in enumerate(hosts):
                try:
                    h.check_connection()
                except UserError as e:
                    raise UserError(f"{where(j)}: {e.message}", e.hint) from e
                self._check_directory(t, h)
            servers = FioServers(hosts, server=self.host.name, port=t.client_port)
            try:
                servers.check()
            except UserError as e:
                names = ", ".join(c.name for c in t.clients)
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
            servers = FioServers([ssh_client(c) for c in t.clients], server=self.host.name, port=t.client_port)
            servers.__enter__()  # checks again, starts, waits until each listens on loopback; stop() in finish
            self.servers[key] = servers
            self.versions[key] = servers.fio_version
            for h in servers.clients:
                fp = h.call_agent({"op": "probe", "paths": [], "block_devices": []}, timeout=300)["fingerprint"]
                self.machines[h.name] = {k: fp[k] for k in MACHINE_FACTS if k in fp}
            self.note(f"fio servers on {', '.join(c.name for c in t.clients)} (127.0.0.1:{t.client_port}, via ssh)")
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

    def run(self, test: Test, request: dict[str, Any]) -> dict[str, Any]:
        """The test's job on every client at once through `fio --client`, while the host observes the window."""
        t = test.target
        servers = self.start(t)
        job = without_logs(str(request["job_text"]))
        deadline = float(request["deadline_s"])

        def go() -> tuple[int, str, str, float]:
            return servers.run_raw(job, timeout=deadline + 60)

        res, (rc, out, err, wall) = observed(self.host, dict(request, job_text=job), go)
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
                "clients.hosts": [c.name for c in t.clients],
                "clients.port": t.client_port,
                "clients.fio_version": self.versions.get(_servers_key(t), ""),
                "clients.machines": {c.name: self.machines.get(c.name, {}) for c in t.clients},
                "clients.results": {r.host: figures(r) for r in per},
                "clients.host_wall_s": round(host_wall, 3),
            },
        )
        if total is not None:
            res["checks"]["clients.total"] = figures(total)
        missing = sorted({c.name for c in t.clients} - {r.host for r in per})
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


def script_lines(test: Test, fio_name: str) -> list[str]:
    """Shell lines that run the test's job on its clients as `run` does, for `plan --export`: a loopback-only
    fio server per client through an ssh forward whose stdin is this script's (the server ends with it), then
    one `fio --client`. fio lays out each client's file itself (tankbench's run lays it out with random data)."""
    t = test.target
    q = shlex.quote
    server = q(shlex.join(["sh", "-c", SERVER_SCRIPT, "sh", str(t.client_port)]))
    lines = [
        "# The load comes from client hosts (fio client/server): each client's fio serves on its loopback only,",
        "# reached through an ssh forward; closing the forward's stdin (this script's end) stops the server.",
        "d=$(mktemp -d); trap 'exec 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-; wait; rm -rf \"$d\"' EXIT",
    ]
    clients = []
    for j, c in enumerate(t.clients[:7]):
        opts = ["-p", str(c.port)]
        if c.identity:
            opts += ["-i", c.identity, "-o", "IdentitiesOnly=yes"]
        if c.known_hosts:
            opts += ["-o", f"UserKnownHostsFile={c.known_hosts}"]
        local = LOCAL_PORT_BASE + j
        argv = ["ssh", *opts, "-o", "ExitOnForwardFailure=yes", "-L", f"127.0.0.1:{local}:127.0.0.1:{t.client_port}"]
        lines += [
            f'mkfifo "$d/c{j}"',
            f'{shlex.join([*argv, f"{c.user}@{c.address}", "--"])} {server} <"$d/c{j}" >/dev/null &',
            f'exec {j + 3}>"$d/c{j}"',
        ]
        clients += [f"--client=127.0.0.1,{local}", q(fio_name)]
    if len(t.clients) > 7:
        lines.append("# (only the first 7 clients: a shell script has 7 spare descriptors here)")
    lines += [
        "sleep 5  # until every server listens (tankbench run polls ss on each client instead)",
        "fio --output-format=json " + " ".join(clients),
    ]
    return lines


#: local ends of the forwards in exported scripts (tankbench run picks free ports)
LOCAL_PORT_BASE = 38765
