"""A campaign on the user's own disks without editing it: `--set key=value`, `--disks/--log/--cache`, `--host`,
and sizes relative to the host (`"2x arc"`, `"50% free"`). Works on the TOML document before parse.py validates
it (like apply_scale), so every value still goes through the same checks and errors."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tankbench.errors import UserError
from tankbench.safety import BLANK_PREFIX, STABLE_PREFIX
from tankbench.targets import traits_of
from tankbench.units import fmt_size, human
from tankbench.zfs.vdevs import leaves, vdev_group

if TYPE_CHECKING:
    from tankbench.campaign.schema import HostSpec

#: what `--set pool.parent=DATASET` drops: the campaign then works under that dataset and creates no pool
POOL_CREATE_KEYS = ("name", "vdevs", "log", "cache", "special", "confirm", "ashift")
#: `2x arc`, `0.5x ram`, `50% free`: a size relative to what the host has
RELATIVE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(x|%)\s*(arc|ram|free)\s*$", re.IGNORECASE)
BASES = {
    "arc": "the ARC's maximum size (c_max)",
    "ram": "the host's memory (MemTotal)",
    "free": "the space available where the targets live",
}
#: relative sizes are rounded down to this (whole MiB: aligned with any recordsize/volblocksize up to 1M)
ROUND = 1 << 20

#: what a facts provider answers: base -> (bytes, where it was read); it raises UserError when it cannot ask
Facts = Callable[["HostSpec", Mapping[str, Any], frozenset[str]], Mapping[str, tuple[int, str]]]


@dataclass(frozen=True)
class Overrides:
    """What the command line (or a host file) changes in a campaign; empty means the campaign as written."""

    #: (dotted key, value already read as TOML: `8G` -> "8G", `30` -> 30, `["4k"]` -> ["4k"])
    sets: tuple[tuple[str, Any], ...] = ()
    disks: tuple[str, ...] = ()
    log: tuple[str, ...] = ()
    cache: tuple[str, ...] = ()
    confirm: tuple[str, ...] = ()
    #: a [host] table that replaces the campaign's (from --host)
    host: Mapping[str, Any] | None = None
    #: where they came from, for error messages (e.g. "command line", "myhost.toml")
    source: str = "command line"
    #: asks the host for the bases of relative sizes; None: a relative size is an error
    facts: Facts | None = field(default=None, compare=False)

    @property
    def empty(self) -> bool:
        return not (self.sets or self.disks or self.log or self.cache or self.confirm or self.host is not None)

    def describe(self) -> list[str]:
        """The overrides as command-line words, one per line (recorded with the campaign text)."""
        out = [f"--host {self.source}"] if self.host is not None else []
        out += [f"--{k} {','.join(v)}" for k, v in self.devices().items() if v]
        out += [f"--confirm {','.join(self.confirm)}"] if self.confirm else []
        return out + [f"--set {k}={show_value(v)}" for k, v in self.sets]

    def devices(self) -> dict[str, tuple[str, ...]]:
        return {"disks": self.disks, "log": self.log, "cache": self.cache}


def apply_overrides(path: str, doc: dict[str, Any], ov: Overrides | None, top_keys: tuple[str, ...]) -> dict[str, Any]:
    """The document with the host table, `--set` values and named disks applied (a new dict; pure)."""
    if ov is None or ov.empty:
        return doc
    out: dict[str, Any] = _copy(doc)
    if ov.host is not None:
        out["host"] = dict(ov.host)
        if isinstance(out.get("campaign"), dict):
            out["campaign"].pop("host", None)
    for key, value in ov.sets:
        if nested_too_deep(value):  # a host file's [set] table is not read by toml_value
            raise UserError(f"{ov.source}: --set {key}: {NESTING_PROBLEM}", NESTING_HINT)
        _set(out, key, value, top_keys, ov.source)
    _name_devices(path, out, ov)
    return out


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def show_value(value: Any) -> str:
    """A --set value as it would be typed (strings bare, the rest as TOML/JSON)."""
    return value if isinstance(value, str) else json.dumps(value)


#: how deep a campaign's arrays and tables may nest (a campaign needs 5 levels: [scale.X.campaign.cooldown] …)
MAX_NESTING = 32
NESTING_PROBLEM = f"arrays or tables nested more than {MAX_NESTING} deep"
NESTING_HINT = "a campaign's values are strings, numbers, lists of them and small tables: remove the extra brackets"


def nested_too_deep(value: Any, key: str = "") -> str:
    """The key path of the first value nested more than MAX_NESTING deep in a TOML value ("" when none is);
    iterative, so that it cannot itself run out of recursion."""
    stack: list[tuple[Any, str, int]] = [(value, key, 0)]
    while stack:
        node, where, depth = stack.pop()
        if depth > MAX_NESTING:
            return where or "(value)"
        if isinstance(node, dict):
            stack.extend((v, f"{where}.{k}" if where else str(k), depth + 1) for k, v in node.items())
        elif isinstance(node, list):
            inner = where if where.endswith("]") else f"{where}[…]"  # the key, not a path of indices
            stack.extend((v, inner, depth + 1) for v in node)
    return ""


def toml_value(raw: str) -> Any:
    """`--set` values are TOML (`30`, `true`, `["4k","1M"]`, `"8G"`); anything else is a plain string."""
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw
    except RecursionError:  # tomllib recurses into nested arrays: a few hundred levels end it
        value = None
    if value is None or nested_too_deep(value):
        shown = raw if len(raw) <= 40 else raw[:40] + "…"
        raise UserError(f"--set value {shown}: {NESTING_PROBLEM}", NESTING_HINT)
    return value


def _set(doc: dict[str, Any], key: str, value: Any, top_keys: tuple[str, ...], source: str) -> None:
    where = f"{source}: --set {key}={show_value(value)}"
    parts = key.split(".")
    if not key or any(not p for p in parts):
        raise UserError(f"{where}: not a key", "write --set table.key=value, e.g. --set campaign.runtime=30s")
    if parts[0] not in top_keys or parts[0] == "scale":
        known = ", ".join(k for k in top_keys if k != "scale")
        raise UserError(f"{where}: unknown table {parts[0]!r}", f"keys start with one of: {known}")
    node: Any = doc
    for i, part in enumerate(parts[:-1]):
        if isinstance(node, list):
            node = _element(node, part, where, ".".join(parts[:i]))
            continue
        if part not in node:
            node[part] = [] if part in ("target", "include", "exclude", "goal", "claim") else {}
        node = node[part]
        if isinstance(node, list) and i == len(parts) - 2:
            raise UserError(f"{where}: {'.'.join(parts[: i + 1])} is an array", _array_hint(parts[0]))
        if not isinstance(node, dict | list):
            raise UserError(
                f"{where}: {'.'.join(parts[: i + 1])} is a value, not a table", "set the value itself, not a sub-key"
            )
    if isinstance(node, list):
        raise UserError(f"{where}: {'.'.join(parts[:-1])} is an array", _array_hint(parts[0]))
    if key == "pool.parent":  # an existing dataset instead of the pool the campaign would create on its disks
        for k in POOL_CREATE_KEYS:
            node.pop(k, None)
    node[parts[-1]] = _copy(value)


def _array_hint(top: str) -> str:
    if top == "target":
        return "name the target: --set target.NAME.size=8G (or its number, from 0: target.0.size)"
    return f"name the element by its number, from 0: --set {top}.0.KEY=VALUE"


def _element(items: list[Any], part: str, where: str, prefix: str) -> dict[str, Any]:
    """`target.fs` -> the target named fs; `goal.0` -> the first goal."""
    named = [t for t in items if isinstance(t, dict) and t.get("name") == part]
    if named:
        return named[0]
    if part.isdigit() and int(part) < len(items) and isinstance(items[int(part)], dict):
        item: dict[str, Any] = items[int(part)]
        return item
    names = [str(t.get("name")) for t in items if isinstance(t, dict) and "name" in t]
    known = f"names: {', '.join(names)}" if names else f"numbers 0-{len(items) - 1}" if items else "it is empty"
    raise UserError(f"{where}: no element {part!r} in {prefix}", f"{prefix} has {known}")


# -- disks named on the command line ----------------------------------------------------------------------


def _name_devices(path: str, doc: dict[str, Any], ov: Overrides) -> None:
    """Put the named disks where the campaign had its own: data disks (pool vdevs, then raw targets), log, cache.

    Each disk replaces one of the campaign's; the campaign's confirmations of its own disks go, and a named disk
    is confirmed as `blank:ID` (usable only while it carries no signature) unless `--confirm ID` names it too."""
    named = [d for v in ov.devices().values() for d in v]
    for d in named:
        if not d.startswith(STABLE_PREFIX):
            raise UserError(
                f"{ov.source}: disk {d!r}: disks are named by stable id",
                f"use its {STABLE_PREFIX}… path (ls -l {STABLE_PREFIX}); /dev/sdX names change between boots",
            )
    dup = sorted({d for d in named if named.count(d) > 1})
    if dup:
        raise UserError(
            f"{ov.source}: disk {dup[0]} is named twice", "name each disk once (in --disks, --log or --cache)"
        )
    for c in ov.confirm:
        if c not in named:
            raise UserError(
                f"{ov.source}: --confirm {c}: not one of the disks named",
                "--confirm repeats the id of a disk given with --disks/--log/--cache whose contents may be destroyed",
            )
    if not named:
        return
    pool = doc.get("pool") if isinstance(doc.get("pool"), dict) else None
    mapping: dict[str, str] = {}
    if ov.disks:
        mapping.update(_map_data(path, doc, pool, ov))
    for key in ("log", "cache"):
        given = ov.devices()[key]
        if given:
            mapping.update(_map_class(path, pool, key, given, ov.source))
    _replace(doc, mapping, ov)


def _on_a_disk(table: Mapping[str, Any]) -> bool:
    """A [[target]] table whose kind writes to a whole block device it is given (a raw target)."""
    t = traits_of(str(table.get("kind", "")))
    return t.block_device and not t.needs_pool


def _data_slots(doc: Mapping[str, Any], pool: Mapping[str, Any] | None) -> tuple[list[str], list[str]]:
    """The campaign's data disks in order (pool vdevs, then raw targets' devices) and the pool's vdev words."""
    vdevs = [v for v in (pool or {}).get("vdevs", []) if isinstance(v, str)]
    slots = leaves(vdevs)
    targets = doc.get("target", [])
    for t in targets if isinstance(targets, list) else []:
        if isinstance(t, dict) and _on_a_disk(t) and isinstance(t.get("path"), str):
            if t["path"] not in slots:
                slots.append(t["path"])
    return slots, [v for v in vdevs if vdev_group(v) is not None]


def _map_data(path: str, doc: dict[str, Any], pool: dict[str, Any] | None, ov: Overrides) -> dict[str, str]:
    slots, groups = _data_slots(doc, pool)
    n_pool = len(leaves([v for v in (pool or {}).get("vdevs", []) if isinstance(v, str)]))
    if not slots:
        raise UserError(
            f"{path}: the campaign names no disks (no pool vdevs, no raw target), but --disks names {len(ov.disks)}",
            "drop --disks; set where it writes with --set (e.g. --set pool.parent=tank/bench)",
        )
    layout = _describe_slots(groups, n_pool, len(slots) - n_pool)
    if len(ov.disks) < len(slots):
        raise UserError(
            f"{path}: the campaign needs {len(slots)} data disks ({layout}); --disks names {len(ov.disks)}",
            f"name {len(slots)} disks, or give a layout of your own and name its disks: "
            f'--set \'pool.vdevs=["mirror", "a", "b"]\' --disks ID1,ID2',
        )
    if len(ov.disks) > len(slots):
        # one group (or a plain stripe) and no raw target: the extra disks widen it (a 4-disk raidz1 is still one)
        if len(groups) > 1 or n_pool != len(slots) or pool is None:
            raise UserError(
                f"{path}: the campaign takes {len(slots)} data disks ({layout}); --disks names {len(ov.disks)}",
                "name exactly that many disks (the layout has several groups or a raw target, so extra disks have no place)",
            )
        pool["vdevs"] = groups + list(ov.disks)
        return {}
    return dict(zip(slots, ov.disks))


def _describe_slots(groups: list[str], n_pool: int, n_raw: int) -> str:
    parts = [f"pool vdevs: {'+'.join(groups) or 'stripe'} of {n_pool}"] if n_pool else []
    return ", ".join(parts + ([f"raw targets: {n_raw}"] if n_raw else []))


def _map_class(path: str, pool: dict[str, Any] | None, key: str, given: tuple[str, ...], source: str) -> dict[str, str]:
    have = leaves([v for v in (pool or {}).get(key, []) if isinstance(v, str)])
    if pool is None or not have:
        raise UserError(
            f"{path}: --{key} {','.join(given)}: the campaign's pool has no {key} device (pool.{key})",
            f"drop --{key}, or add the class with --set 'pool.{key}=[\"{STABLE_PREFIX}…\"]'",
        )
    if key == "cache":  # L2ARC devices are never grouped: take as many as given
        pool["cache"] = list(given)
        return dict(zip(have, given))
    if len(given) != len(have):
        raise UserError(
            f"{path}: pool.{key} has {len(have)} device(s) ({'mirror' if 'mirror' in pool[key] else 'single'}); "
            f"--{key} names {len(given)}",
            f'name {len(have)} device(s) with --{key}, or change it: --set \'pool.{key}=["mirror", "A", "B"]\'',
        )
    return dict(zip(have, given))


def _replace(doc: dict[str, Any], mapping: Mapping[str, str], ov: Overrides) -> None:
    """Swap the campaign's disks for the named ones everywhere, and confirm the named ones as the user did."""

    def confirmation(dev: str) -> str:
        return dev if dev in ov.confirm else BLANK_PREFIX + dev

    pool = doc.get("pool")
    named = {d for v in ov.devices().values() for d in v}
    if isinstance(pool, dict):
        for key in ("vdevs", "log", "cache", "special"):
            if isinstance(pool.get(key), list):
                pool[key] = [mapping.get(v, v) for v in pool[key]]
        devices = [v for k in ("vdevs", "log", "cache", "special") for v in pool.get(k, []) if isinstance(v, str)]
        kept = [c for c in pool.get("confirm", []) if c in devices and c not in named]
        pool["confirm"] = kept + [confirmation(d) for d in devices if d in named]
    targets = doc.get("target", [])
    for t in targets if isinstance(targets, list) else []:
        if isinstance(t, dict) and _on_a_disk(t) and t.get("path") in mapping:
            t["path"] = mapping[t["path"]]
            t["confirm"] = confirmation(t["path"])


# -- sizes relative to the host ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Resolved:
    """One relative size and what it became on this host."""

    key: str
    expr: str
    size: int
    base: str
    base_bytes: int
    where: str

    def line(self) -> str:
        return f"{self.key} = {self.expr!r} -> {fmt_size(self.size)} ({self.base} = {human(self.base_bytes)} from {self.where})"


def relative_sizes(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every string in the document (outside [scale]) that is a relative size, with its key path."""
    found: list[tuple[str, str]] = []

    def walk(value: Any, key: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if key or k != "scale":
                    walk(v, f"{key}.{k}" if key else k)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{key}[{i}]")
        elif isinstance(value, str) and RELATIVE_RE.match(value):
            found.append((key, value))

    walk(doc, "")
    return found


def resolve_sizes(
    path: str, doc: dict[str, Any], host: HostSpec, ov: Overrides | None
) -> tuple[dict[str, Any], tuple[Resolved, ...]]:
    """Replace relative sizes by bytes, asking the host (through `ov.facts`) for the bases they need."""
    found = relative_sizes(doc)
    if not found:
        return doc, ()
    if ov is None or ov.facts is None:
        key, expr = found[0]
        raise UserError(
            f"{path}: {key} = {expr!r}: a size relative to the host is resolved by `plan` and `run`",
            "give an absolute size here (e.g. --set with 8G), or use plan/run, which ask the host",
        )
    bases = frozenset(m.group(3).lower() for _, e in found if (m := RELATIVE_RE.match(e)))
    facts = ov.facts(host, doc, bases)
    out: dict[str, Any] = _copy(doc)
    resolved = []
    for key, expr in found:
        m = RELATIVE_RE.match(expr)
        assert m is not None
        number, op, base = float(m.group(1)), m.group(2), m.group(3).lower()
        base_bytes, where = facts[base]
        size = int(base_bytes * (number / 100 if op == "%" else number)) // ROUND * ROUND
        if size <= 0:
            raise UserError(
                f"{path}: {key} = {expr!r} is {size} bytes on this host ({base} = {base_bytes} from {where})",
                "pick a larger factor or an absolute size",
            )
        _put(out, key, fmt_size(size))
        resolved.append(Resolved(key, expr, size, base, base_bytes, where))
    return out, tuple(resolved)


def _put(doc: dict[str, Any], key: str, value: str) -> None:
    node: Any = doc
    steps = re.findall(r"([^.\[\]]+)|\[([0-9]+)\]", key)
    for i, (name, index) in enumerate(steps):
        last = i == len(steps) - 1
        sel: Any = int(index) if index else name
        if last:
            node[sel] = value
        else:
            node = node[sel]


def record(text: str, ov: Overrides | None, resolved: tuple[Resolved, ...], scale: str = "") -> str:
    """The campaign text as run: the file, then what the command line changed (journalled with every result)."""
    lines = [f"--scale {scale}"] if scale else []
    lines += (ov.describe() if ov is not None else []) + [f"resolved {r.line()}" for r in resolved]
    if not lines:
        return text
    return text.rstrip("\n") + "\n\n# tankbench: applied on top of this file\n" + "".join(f"# {x}\n" for x in lines)
