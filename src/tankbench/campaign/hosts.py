"""A campaign over several hosts: `[campaign] hosts = [...]` and `hosts_mode = "split" | "each"`.

Each entry is a string (`"local"`, `"lab"`, `"lab:NAME"`, `"[user@]address[:port]"` for ssh) or an inline table
`{ address = "…", user = "root", port = 22, identity = "…", known_hosts = "…" }` (`kind = "lab", name = "…"`
for a lab, `kind = "local"`).

- `split`: hosts must be alike; whole test cases go to one host each; hosts work in parallel.
- `each`: every host runs the whole matrix; the report compares the hosts side by side.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tankbench.campaign.login import ADDRESS_HINT, ADDRESS_PROBLEM, USER_HINT, USER_PROBLEM, bad_login
from tankbench.errors import SpecError

FLEET_MODES = ("split", "each")
ENTRY_KEYS = ("kind", "address", "user", "port", "identity", "known_hosts", "name")
_LAB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # whole values only: fullmatch (`$` takes a last "\n")
_SSH = re.compile(r"(?:(?P<user>[A-Za-z0-9_.-]+)@)?(?P<address>[A-Za-z0-9_.:-]+?)(?::(?P<port>[0-9]{1,5}))?")
_EXAMPLE = 'e.g. hosts = ["root@10.0.0.2", "root@10.0.0.3"] or [{ address = "10.0.0.2", identity = "~/.ssh/id" }]'


@dataclass(frozen=True)
class FleetHost:
    """One host of the fleet, as the campaign names it."""

    kind: str  # local | lab | ssh
    address: str = ""
    user: str = "root"
    port: int = 22
    identity: str = ""
    known_hosts: str = ""
    lab_name: str = "default"

    @property
    def name(self) -> str:
        """The name its runs carry in the journal (the same as the Host object's name)."""
        if self.kind == "local":
            return "local"
        if self.kind == "lab":
            return "lab" if self.lab_name == "default" else f"lab:{self.lab_name}"
        return f"ssh:{self.user}@{self.address}" + (f":{self.port}" if self.port != 22 else "")


@dataclass(frozen=True)
class FleetSpec:
    """The hosts of a campaign and how the matrix is spread over them."""

    mode: str
    hosts: tuple[FleetHost, ...]


def _entry(path: str, i: int, value: object) -> FleetHost:
    key = f"campaign.hosts[{i}]"
    if isinstance(value, str):
        if value == "local":
            return FleetHost("local")
        if value == "lab" or value.startswith("lab:"):
            name = value[4:] or "default"
            if not _LAB_NAME.fullmatch(name):
                raise SpecError(path, key, value, "a lab name is letters, digits, '.', '_' or '-'", 'e.g. "lab:bench"')
            return FleetHost("lab", lab_name=name)
        m = _SSH.fullmatch(value)
        if not m or not m.group("address"):
            raise SpecError(
                path, key, value, "not a host", f"write local, lab, lab:NAME or [user@]address[:port]; {_EXAMPLE}"
            )
        port = int(m.group("port") or 22)
        if not 1 <= port <= 65535:
            raise SpecError(path, key, value, "the port must be 1-65535", "e.g. root@10.0.0.2:2222")
        if bad_login(m.group("user") or "root", m.group("address")):
            raise SpecError(
                path, key, value, "not a host (user and address must not start with '-')", "e.g. root@10.0.0.2"
            )
        return FleetHost("ssh", address=m.group("address"), user=m.group("user") or "root", port=port)
    if not isinstance(value, dict):
        raise SpecError(path, key, value, "must be a string or an inline table", _EXAMPLE)
    unknown = sorted(set(value) - set(ENTRY_KEYS))
    if unknown:
        raise SpecError(
            path, f"{key}.{unknown[0]}", value[unknown[0]], "unknown key", f"known: {', '.join(ENTRY_KEYS)}"
        )
    kind = value.get("kind", "ssh" if "address" in value else None)
    if kind not in ("local", "lab", "ssh"):
        raise SpecError(path, f"{key}.kind", kind, "must be local, lab or ssh", 'an ssh host needs address = "…"')
    fields: dict[str, Any] = {}
    for k in ("address", "user", "identity", "known_hosts", "name"):
        if k in value and not isinstance(value[k], str):
            raise SpecError(path, f"{key}.{k}", value[k], "must be a string", _EXAMPLE)
    port = value.get("port", 22)
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        raise SpecError(path, f"{key}.port", port, "must be a port number 1-65535", "e.g. port = 2222")
    if kind == "ssh":
        if not value.get("address"):
            raise SpecError(path, f"{key}.address", value.get("address"), "an ssh host needs an address", _EXAMPLE)
        fields.update(
            address=value["address"],
            user=value.get("user", "root") or "root",
            port=port,
            identity=value.get("identity", ""),
            known_hosts=value.get("known_hosts", ""),
        )
        bad = bad_login(fields["user"], fields["address"])  # both go into ssh's argv: no option, no space
        if bad:
            problem, hint = (USER_PROBLEM, USER_HINT) if bad == "user" else (ADDRESS_PROBLEM, ADDRESS_HINT)
            raise SpecError(path, f"{key}.{bad}", fields[bad], problem, hint)
    elif kind == "lab":
        name = value.get("name", "default")
        if not _LAB_NAME.fullmatch(name):
            raise SpecError(path, f"{key}.name", name, "a lab name is letters, digits, '.', '_' or '-'", 'e.g. "bench"')
        fields.update(lab_name=name)
    return FleetHost(kind, **fields)


def parse_fleet(path: str, campaign: Mapping[str, Any], has_single_host: bool) -> FleetSpec | None:
    """The fleet of a campaign table, or None when it names no `hosts` (one host: [host] or campaign.host)."""
    value = campaign.get("hosts")
    mode = campaign.get("hosts_mode")
    if value is None:
        if mode is not None:
            raise SpecError(path, "campaign.hosts_mode", mode, "given without campaign.hosts", _EXAMPLE)
        return None
    if has_single_host:
        raise SpecError(
            path, "campaign.hosts", value, "given with a single host ([host] or campaign.host)", "keep one of them"
        )
    if not isinstance(value, list) or not value:
        raise SpecError(path, "campaign.hosts", value, "must be a non-empty list", _EXAMPLE)
    hosts = tuple(_entry(path, i, v) for i, v in enumerate(value))
    seen: dict[str, int] = {}
    for i, h in enumerate(hosts):
        if h.name in seen:
            raise SpecError(
                path,
                f"campaign.hosts[{i}]",
                value[i],
                f"names the same host as campaign.hosts[{seen[h.name]}] ({h.name})",
                "name each host once",
            )
        seen[h.name] = i
    if mode is None:
        raise SpecError(
            path,
            "campaign.hosts_mode",
            None,
            "is required with several hosts",
            'hosts_mode = "split" (alike hosts share the matrix) or "each" (every host runs it all, compared)',
        )
    if mode not in FLEET_MODES:
        raise SpecError(path, "campaign.hosts_mode", mode, "must be split or each", 'e.g. hosts_mode = "split"')
    return FleetSpec(str(mode), hosts)
