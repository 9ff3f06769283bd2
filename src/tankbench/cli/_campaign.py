"""Options that put a campaign (a preset, usually) on the user's host and disks: --host, --disks, --log,
--cache, --confirm, --set. Shared by plan, run and clean; the work is done by campaign/overrides.py."""

from __future__ import annotations

import argparse
import os
import re
import tomllib
from typing import Any

from tankbench.campaign import Spec, load_spec
from tankbench.campaign.overrides import Overrides, toml_value
from tankbench.cli.presets import resolve_campaign
from tankbench.errors import UserError

HOST_FILE_KEYS = ("host", "disks", "log", "cache", "confirm", "set")
SSH_RE = re.compile(r"^ssh://(?:([A-Za-z0-9._-]+)@)?([A-Za-z0-9._:-]+?|\[[0-9A-Fa-f:]+\])(?::([0-9]{1,5}))?$")


def add_campaign_options(p: argparse.ArgumentParser) -> None:
    """--host/--disks/--log/--cache/--confirm/--set on a subcommand that takes a CAMPAIGN."""
    g = p.add_argument_group("your host and disks (no need to edit the campaign)")
    g.add_argument(
        "--host",
        metavar="H",
        help="where it runs instead of the campaign's [host]: a host file (TOML: [host], disks, log, cache, "
        "confirm, [set]), `local`, `lab`, `lab:NAME` or `ssh://[user@]address[:port]`",
    )
    g.add_argument(
        "--disks",
        metavar="IDS",
        action="append",
        default=[],
        help="your data disks by /dev/disk/by-id/ (comma-separated or repeated): they take the places of the "
        "campaign's pool vdevs, then raw targets, in order; accepted only while blank unless --confirm names them",
    )
    g.add_argument("--log", metavar="IDS", action="append", default=[], help="your SLOG device(s) for pool.log")
    g.add_argument("--cache", metavar="IDS", action="append", default=[], help="your L2ARC device(s) for pool.cache")
    g.add_argument(
        "--confirm",
        metavar="IDS",
        action="append",
        default=[],
        help="repeat the id of a named disk whose contents (a filesystem, an old pool) may be destroyed",
    )
    g.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        dest="sets",
        help="override a campaign key, e.g. --set campaign.runtime=30s --set target.fs.size=8G; sizes may be "
        'relative to the host: "2x arc", "25%% ram", "50%% free" (resolved and printed by plan)',
    )


def _ids(values: list[str]) -> tuple[str, ...]:
    return tuple(x.strip() for v in values for x in v.split(",") if x.strip())


def overrides_from(args: argparse.Namespace) -> Overrides:
    """The Overrides that the options (and the host file, if --host names one) ask for."""
    from tankbench.doctor.facts import facts_provider

    host, source, base = host_option(getattr(args, "host", None))
    sets: list[tuple[str, Any]] = list(base.get("set", []))
    for item in args.sets:
        key, eq, raw = item.partition("=")
        if not eq:
            raise UserError(f"--set {item}: expected KEY=VALUE", "e.g. --set campaign.runtime=30s")
        sets.append((key.strip(), toml_value(raw.strip())))
    devices = {k: _ids(getattr(args, k)) or tuple(base.get(k, ())) for k in ("disks", "log", "cache", "confirm")}
    return Overrides(
        sets=tuple(sets),
        disks=devices["disks"],
        log=devices["log"],
        cache=devices["cache"],
        confirm=devices["confirm"],
        host=host,
        source=source,
        facts=facts_provider,
    )


def host_option(value: str | None) -> tuple[dict[str, Any] | None, str, dict[str, Any]]:
    """--host: ([host] table or None, where it came from, the host file's other keys)."""
    if not value:
        return None, "command line", {}
    if value == "local":
        return {"kind": "local"}, "command line", {}
    if value == "lab" or value.startswith("lab:"):
        return {"kind": "lab", "name": value[4:] or "default"}, "command line", {}
    m = SSH_RE.match(value)
    if m:
        table: dict[str, Any] = {"kind": "ssh", "address": m.group(2).strip("[]")}
        if m.group(1):
            table["user"] = m.group(1)
        if m.group(3):
            table["port"] = int(m.group(3))
        return table, "command line", {}
    if os.path.isfile(value):
        return read_host_file(value)
    if os.path.isdir(value):
        raise UserError(f"--host {value}: is a directory, not a host file", "pass the host file (TOML) itself")
    raise UserError(
        f"--host {value}: no such host file, and not `local`, `lab[:NAME]` or `ssh://[user@]address[:port]`",
        "write a host file (see docs/real-host.md) or e.g. --host ssh://root@bench.example.org:22",
    )


def read_host_file(path: str) -> tuple[dict[str, Any] | None, str, dict[str, Any]]:
    """A small TOML file describing the user's host: [host], disks/log/cache/confirm lists, a [set] table."""
    try:
        with open(path, "rb") as f:
            doc = tomllib.loads(f.read().decode("utf-8").removeprefix("\ufeff"))  # a BOM: Windows editors
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{path}: not valid TOML: {e}", "check quotes, brackets and `key = value` syntax") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read host file {path}: {e}", "check the path and that it is UTF-8 text") from None
    for key in doc:
        if key not in HOST_FILE_KEYS:
            raise UserError(f"{path}: {key}: unknown key in a host file", f"known keys: {', '.join(HOST_FILE_KEYS)}")
    host = doc.get("host")
    if host is not None and not isinstance(host, dict):
        raise UserError(f"{path}: host = {host!r}: must be a table", 'write [host] with kind = "ssh", address = …')
    if isinstance(host, dict) and isinstance(host.get("identity"), str) and host["identity"]:
        ident = os.path.expanduser(host["identity"])
        host = {**host, "identity": os.path.join(os.path.dirname(os.path.abspath(path)), ident)}
    base: dict[str, Any] = {}
    for key in ("disks", "log", "cache", "confirm"):
        v = doc.get(key, [])
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise UserError(f"{path}: {key} = {v!r}: must be a list of device ids", f'{key} = ["/dev/disk/by-id/…"]')
        base[key] = tuple(v)
    sets = doc.get("set", {})
    if not isinstance(sets, dict):
        raise UserError(f"{path}: set = {sets!r}: must be a table", '[set] then e.g. "campaign.runtime" = "30s"')
    base["set"] = [(k, v) for k, v in _flatten(sets, "")]
    return host, path, base


def _flatten(table: dict[str, Any], prefix: str) -> list[tuple[str, Any]]:
    """[set] written with quoted dotted keys ("target.fs.size" = "8G") or as nested tables: both give dotted keys."""
    out: list[tuple[str, Any]] = []
    for k, v in table.items():
        if isinstance(v, dict):
            out += _flatten(v, f"{prefix}{k}.")
        else:
            out.append((f"{prefix}{k}", v))
    return out


def load_campaign(args: argparse.Namespace) -> Spec:
    """The campaign named by args.campaign (a file or a preset), at args.scale, with the options applied."""
    return load_spec(resolve_campaign(args.campaign), args.scale, overrides_from(args))
