"""The [host] table (or the campaign.host shortcut): where the campaign runs."""

from __future__ import annotations

from tankbench.keys import Keys
from tankbench.lab import diskmodels
from tankbench.spec.schema import HostSpec
from tankbench.spec.vocab import HOST_KEYS, HOST_KINDS, NAME_RE


def parse_host(ctx: Keys, shortcut: object, table: object) -> HostSpec:
    if shortcut is not None and table is not None:
        raise ctx.err("campaign.host", shortcut, "given twice (also as a [host] table)", "keep one of them")
    if table is None:
        if shortcut is None:
            return HostSpec()
        kind = ctx.choice("campaign.host", shortcut, HOST_KINDS)
        if kind == "ssh":
            raise ctx.err(
                "campaign.host",
                shortcut,
                "an ssh host needs an address",
                'write a [host] table: kind = "ssh", address = "bench.example.org"',
            )
        return HostSpec(kind=kind)
    if not isinstance(table, dict):
        raise ctx.err("host", table, "must be a table", 'write [host] with kind = "local" | "lab" | "ssh"')
    ctx.unknown_keys(table, HOST_KEYS, "host.")
    kind = ctx.choice("host.kind", table.get("kind", "auto"), HOST_KINDS)
    spec = HostSpec(
        kind=kind,
        address=ctx.string("host.address", table.get("address", "")),
        user=ctx.string("host.user", table.get("user", "")),
        port=ctx.integer("host.port", table.get("port", 22), 1, 65535),
        identity=ctx.string("host.identity", table.get("identity", "")),
        known_hosts=ctx.string("host.known_hosts", table.get("known_hosts", "")),
        lab_name=ctx.string("host.name", table.get("name", "default")),
        lab_disks=ctx.integer("host.disks", table.get("disks", 2), 1, 16),
        lab_slog=ctx.boolean("host.slog", table.get("slog", True)),
        lab_machine=diskmodels.parse_host_keys(table, ctx.err),
    )
    if kind in ("local", "ssh") and (given := [k for k in diskmodels.HOST_KEYS if k in table]):
        raise ctx.err(f"host.{given[0]}", table[given[0]], "only applies to the lab", 'use it with kind = "lab"')
    if kind == "ssh" and not spec.address:
        raise ctx.err("host.address", "", "is required for an ssh host", 'e.g. address = "bench.example.org"')
    if not NAME_RE.match(spec.lab_name):
        raise ctx.err("host.name", spec.lab_name, "must be letters, digits, '.', '_' or '-'", 'e.g. "default"')
    return spec
