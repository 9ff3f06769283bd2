"""A target's `clients`: ssh hosts whose fio generates its load through fio's client/server mode.

A `kind = "file"` target with `clients = [...]` names a directory on each client (`path`): every client lays
out its own test file there and runs the test's job on it, all at once, driven by one `fio --client` on this
machine through servers on Unix sockets reached only over ssh (fio/clientserver.py). The campaign's host observes the
same window (samplers, drain) as it does for a test guest. One journal run per test run: the aggregate figures
are the run's metrics, each client's are in its checks (`clients.results`) and in the run's fio JSON
(`client_stats`).

Everything a client can be refused for is checked before anything is created (the preflight): an entry that
is not an ssh host, a client named twice, a client that is the campaign's host, an unreachable client, a
directory that is not usable there, fio versions that differ. (`client_port` is read, checked and kept in the
test's id, so campaign files and journals from before stay valid; no server listens on a port any more.) This module
is the pure part (the options, parsing, campaign rules, export lines); drivers/clients.py drives the clients.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tankbench.fio.server import DEFAULT_PORT, SERVER_SCRIPT
from tankbench.keys import Keys
from tankbench.model import ClientHost, Target, TargetOptions, Test


@dataclass(frozen=True)
class ClientOptions(TargetOptions):
    """A target's client hosts (fio client/server) and the port their fio servers listen on (loopback only)."""

    clients: tuple[ClientHost, ...] = ()
    #: the TCP port of fio's server on each client (loopback only; reached through ssh)
    client_port: int = 0

    def canonical(self) -> dict[str, Any]:
        # who generates the load is part of the test; how we reach them (keys, port) is not
        return {"clients": [c.name for c in self.clients]} if self.clients else {}


def client_options(target: Target) -> ClientOptions:
    """A target's client settings (none for a kind without clients)."""
    o = target.options
    return o if isinstance(o, ClientOptions) else ClientOptions()


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
    named = [(i, t) for i, t in enumerate(targets) if client_options(t).clients]
    if not named:
        return
    i, t = named[0]
    owner: dict[tuple[str, int], tuple[int, Target]] = {}
    for n, x in named:  # one fio server per client and port: targets that share one share the whole set
        for c in client_options(x).clients:
            first = owner.setdefault((c.name, client_options(x).client_port), (n, x))
            if client_options(first[1]).clients != client_options(x).clients:
                raise keys.err(
                    f"target[{n}].clients",
                    [c.name for c in client_options(x).clients],
                    f"shares client {c.name} (port {client_options(x).client_port}) with target[{first[0]}], whose clients differ",
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
            [c.name for c in client_options(t).clients],
            "client targets run on one campaign host, not with campaign.hosts",
            "name one host ([host] or campaign.host) for a campaign with client targets",
        )


def script_lines(test: Test, fio_name: str) -> list[str]:
    """Shell lines that run the test's job on its clients as `run` does, for `plan --export`: a fio server per
    client on a Unix socket in a fresh 0700 directory, reached through an ssh forward to a socket in this script's
    private directory, whose stdin is this script's (the server ends with it), then one `fio --client`. fio lays
    out each client's file itself (tankbench's run lays it out with random data)."""
    t = client_options(test.target)
    q = shlex.quote
    server = q(shlex.join(["sh", "-c", SERVER_SCRIPT, "sh"]))
    lines = [
        "# The load comes from client hosts (fio client/server): each client's fio serves on a Unix socket in a",
        "# private directory, reached only through an ssh forward; closing the forward's stdin (this script's end)",
        "# stops the server and removes its directory.",
        "d=$(mktemp -d); trap 'exec 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-; wait; rm -rf \"$d\"' EXIT",
    ]
    clients = []
    for j, c in enumerate(t.clients[:7]):
        opts = ["-p", str(c.port)]
        if c.identity:
            opts += ["-i", c.identity, "-o", "IdentitiesOnly=yes"]
        if c.known_hosts:
            opts += ["-o", f"UserKnownHostsFile={c.known_hosts}"]
        argv = ["ssh", *opts, "-o", "ExitOnForwardFailure=yes"]
        remote = f"r{j}"
        lines += [
            f"{remote}=/tmp/tankbench-fio-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \\n')",
            f'mkfifo "$d/c{j}"',
            f'{shlex.join(argv)} -L "$d/c{j}.sock:${remote}/fio.sock" {q(f"{c.user}@{c.address}")} -- '
            f'{server}" ${remote}" <"$d/c{j}" >/dev/null &',
            f'exec {j + 3}>"$d/c{j}"',
        ]
        clients += [f'--client=sock:"$d/c{j}.sock"', q(fio_name)]
    if len(t.clients) > 7:
        lines.append("# (only the first 7 clients: a shell script has 7 spare descriptors here)")
    lines += [
        "sleep 5  # until every server listens (tankbench run polls each client instead)",
        "fio --output-format=json " + " ".join(clients),
    ]
    return lines
