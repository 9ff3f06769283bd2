"""The [host] table (or the campaign.host shortcut): where the campaign runs."""

from __future__ import annotations

import os

from tankbench import diskmodels
from tankbench.campaign.login import ADDRESS_HINT, ADDRESS_PROBLEM, USER_HINT, USER_PROBLEM, bad_login
from tankbench.campaign.schema import HostSpec, Spec
from tankbench.campaign.vocab import HOST_KEYS, HOST_KINDS, NAME_RE
from tankbench.keys import Keys


def parse_host(keys: Keys, shortcut: object, table: object) -> HostSpec:
    if shortcut is not None and table is not None:
        raise keys.err("campaign.host", shortcut, "given twice (also as a [host] table)", "keep one of them")
    if table is None:
        if shortcut is None:
            return HostSpec()
        kind = keys.choice("campaign.host", shortcut, HOST_KINDS)
        if kind == "ssh":
            raise keys.err(
                "campaign.host",
                shortcut,
                "an ssh host needs an address",
                'write a [host] table: kind = "ssh", address = "bench.example.org"',
            )
        return HostSpec(kind=kind)
    if not isinstance(table, dict):
        raise keys.err("host", table, "must be a table", 'write [host] with kind = "local" | "lab" | "ssh"')
    keys.unknown_keys(table, HOST_KEYS, "host.")
    kind = keys.choice("host.kind", table.get("kind", "auto"), HOST_KINDS)
    spec = HostSpec(
        kind=kind,
        address=keys.string("host.address", table.get("address", "")),
        user=keys.string("host.user", table.get("user", "root")) or "root",  # as every ssh host entry
        port=keys.integer("host.port", table.get("port", 22), 1, 65535),
        identity=keys.string("host.identity", table.get("identity", "")),
        known_hosts=keys.string("host.known_hosts", table.get("known_hosts", "")),
        lab_name=keys.string("host.name", table.get("name", "default")),
        lab_disks=keys.integer("host.disks", table.get("disks", 2), 1, 16),
        lab_slog=keys.boolean("host.slog", table.get("slog", True)),
        lab_machine=diskmodels.parse_host_keys(table, keys.err),
    )
    if kind in ("local", "ssh") and (given := [k for k in diskmodels.HOST_KEYS if k in table]):
        raise keys.err(f"host.{given[0]}", table[given[0]], "only applies to the lab", 'use it with kind = "lab"')
    if kind == "ssh" and not spec.address:
        raise keys.err("host.address", "", "is required for an ssh host", 'e.g. address = "bench.example.org"')
    bad = bad_login(spec.user, spec.address or "localhost")  # both go into ssh's argv: no option, no space
    if bad == "user":
        raise keys.err("host.user", spec.user, USER_PROBLEM, USER_HINT)
    if bad == "address":
        raise keys.err("host.address", spec.address, ADDRESS_PROBLEM, ADDRESS_HINT)
    if not NAME_RE.match(spec.lab_name):
        raise keys.err("host.name", spec.lab_name, "must be letters, digits, '.', '_' or '-'", 'e.g. "default"')
    return spec


def local_has_zfs() -> bool:
    """Whether this machine's kernel has ZFS (`host = "auto"` is then local, else the lab VM)."""
    return os.path.exists("/sys/module/zfs")


def default_journal_path(spec: Spec) -> str:
    """Where results go unless --journal says otherwise: ./tankbench-results/<campaign>/journal.sqlite."""
    return os.path.join("tankbench-results", spec.name, "journal.sqlite")
