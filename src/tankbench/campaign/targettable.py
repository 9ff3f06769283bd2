"""The [[target]] tables: each one's name and kind here, the rest of its keys by its kind (targets/)."""

from __future__ import annotations

from typing import Any

from tankbench.campaign.login import ADDRESS_HINT, ADDRESS_PROBLEM, USER_HINT, USER_PROBLEM, bad_login
from tankbench.campaign.vocab import NAME_RE, TARGET_KEYS
from tankbench.keys import Keys
from tankbench.model import Target
from tankbench.targets import kind_names, kinds
from tankbench.targets.clients import client_options

EXAMPLE = 'add e.g. [[target]] name = "scratch" kind = "file" path = "/tmp/tb" size = "64M"'


def parse_targets(keys: Keys, value: object) -> tuple[Target, ...]:
    """Every [[target]] in file order; names unique; the kind parses its own table."""
    if value is None:
        raise keys.err("[[target]]", None, "no target", EXAMPLE)
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise keys.err("target", value, "must be an array of tables", "write each target as [[target]]")
    if not value:
        raise keys.err("target", value, "no target", EXAMPLE)
    out: list[Target] = []
    for i, t in enumerate(value):
        p = f"target[{i}]."
        keys.unknown_keys(t, TARGET_KEYS, p)
        name = keys.string(p + "name", t.get("name", ""))
        if not NAME_RE.match(name):
            raise keys.err(p + "name", name, "must be 1-64 letters, digits, '.', '_' or '-'", 'e.g. name = "scratch"')
        if any(o.name == name for o in out):
            raise keys.err(p + "name", name, "is used by two targets", "give each target its own name")
        kind = keys.choice(p + "kind", t.get("kind"), kind_names())
        cls = kinds()[kind]
        target = cls.parse_table(keys, t, p, name)
        if cls.traits.block_device and target.path:
            twin = next((o for o in out if kinds()[o.kind].traits.block_device and o.path == target.path), None)
            if twin is not None:  # two baselines on one disk: each run would overwrite the other's layout
                raise keys.err(
                    p + "path",
                    target.path,
                    f"is the same device as target {twin.name!r}",
                    "give each raw target its own disk",
                )
        _check_clients(keys, target, t, p)
        out.append(target)
        for key in t:  # a key of another kind would be ignored silently (e.g. clients on a raw target)
            if key not in ("name", "kind", *cls.table_keys):
                raise keys.err(
                    p + key, t[key], f"a {kind} target does not take {key}", f"its keys: {', '.join(cls.table_keys)}"
                )
    return tuple(out)


def _check_clients(keys: Keys, target: Target, table: dict[str, Any], prefix: str) -> None:
    """A client's user and address go into ssh's argv: neither may read as an option (`-oProxyCommand=…`). (The
    entries are parsed by targets/clients.py; this checks what it made of them.)"""
    entries = table.get("clients")
    for i, c in enumerate(client_options(target).clients):
        bad = bad_login(c.user, c.address)
        if not bad:
            continue
        given = entries[i] if isinstance(entries, list) and i < len(entries) else None
        key = f"{prefix}clients[{i}]"
        if isinstance(given, dict):
            problem, hint = (USER_PROBLEM, USER_HINT) if bad == "user" else (ADDRESS_PROBLEM, ADDRESS_HINT)
            raise keys.err(f"{key}.{bad}", getattr(c, bad), problem, hint)
        raise keys.err(
            key,
            given,
            f"not an ssh host: its {bad} {getattr(c, bad)!r} is {USER_PROBLEM if bad == 'user' else ADDRESS_PROBLEM}",
            "write [user@]address[:port], e.g. root@10.0.0.2",
        )
