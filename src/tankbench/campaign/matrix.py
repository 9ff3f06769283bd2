"""The [matrix] table, [[exclude]] and [[include]] rules, and [tunables]: each axis value validated and
normalised (a target kind validates the axes it owns)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tankbench.campaign.vocab import (
    AXES,
    AXIS_OWNERS,
    CACHE_STATES,
    DEFAULT_AXES,
    INNER_AXES,
    KIND_AXES,
    LAYOUTS,
    RW_VALUES,
    TUNABLE_RE,
    TUNABLE_VALUE_RE,
    WORKLOADS,
    axes_of,
)
from tankbench.keys import Keys
from tankbench.model import IO_MODES, SYNC_MODES, Target, frozen_map
from tankbench.targets import kind_names, kinds
from tankbench.tunables import canonical_tunables
from tankbench.units import fmt_size, parse_size


def axis_value(keys: Keys, key: str, axis: str, v: object) -> Any:
    """Validate and normalise one value of a matrix axis."""
    if axis in AXIS_OWNERS:  # a target kind's own axis: the kind validates it
        return AXIS_OWNERS[axis].axis_value(keys, key, axis, v)
    if axis == "rw":
        return keys.choice(key, v, RW_VALUES)
    if axis == "workload":
        return keys.choice(key, v, WORKLOADS)
    if axis in ("bs", "size"):
        return fmt_size(keys.size(key, v))
    if axis == "iodepth":
        return keys.integer(key, v, 1, 65536)
    if axis == "numjobs":
        return keys.integer(key, v, 1, 1024)
    if axis == "rwmixread":
        return keys.integer(key, v, 0, 100)
    if axis == "io":
        return keys.choice(key, v, IO_MODES)
    if axis == "sync_mode":
        return keys.choice(key, v, SYNC_MODES)
    if axis == "ioengine":
        s = keys.string(key, v)
        if not re.fullmatch(r"[a-z0-9_:]+", s):
            raise keys.err(key, v, "not an fio ioengine name", 'e.g. "libaio", "psync", "io_uring", "null"')
        return s
    if axis in ("layout", "cache", "tunables", "buffer_compress_percentage", "refill_buffers"):
        return _data_axis_value(keys, key, axis, v)
    raise keys.err(key, v, "unknown axis", "")


def parse_matrix(keys: Keys, table: dict[str, Any], targets: tuple[Target, ...]) -> dict[str, tuple[Any, ...]]:
    keys.unknown_keys(table, AXES, "matrix.")
    for required in ("rw", "bs"):
        if required not in table:
            raise keys.err(
                f"matrix.{required}",
                None,
                "is required",
                f'e.g. {required} = ["read", "write"]' if required == "rw" else 'e.g. bs = ["4k", "1M"]',
            )
    out: dict[str, tuple[Any, ...]] = {}
    for axis in AXES:
        values = table.get(axis, DEFAULT_AXES.get(axis))
        if values is None:
            continue
        if not isinstance(values, list):
            values = [values]
        if not values:
            raise keys.err(f"matrix.{axis}", values, "is empty", "give at least one value or remove the key")
        norm = tuple(axis_value(keys, f"matrix.{axis}", axis, v) for v in values)
        if len(set(norm)) != len(norm):
            raise keys.err(f"matrix.{axis}", values, "lists a value twice", "remove the duplicate")
        out[axis] = norm
    present = {t.kind for t in targets}
    for axis in KIND_AXES + INNER_AXES:
        if axis in out and not any(axis in axes_of(k) for k in present):
            owners = [k for k in kind_names() if axis in axes_of(k)]
            raise keys.err(
                f"matrix.{axis}",
                list(out[axis]),
                f"applies only to {' and '.join(owners)} targets",
                "add such a target, or remove the axis",
            )
    for k in kind_names():
        if k in present:
            kinds()[k].check_matrix(keys, out)
    for size in out.get("size", ()):
        for t in targets:
            if t.size and parse_size(size) > t.size:
                raise keys.err(
                    "matrix.size",
                    size,
                    f"is larger than target {t.name!r} ({fmt_size(t.size)})",
                    "make the target larger or the size smaller",
                )
    return out


def _match_value(keys: Keys, key: str, axis: str, v: object, targets: tuple[Target, ...]) -> Any:
    if axis == "target":
        names = tuple(t.name for t in targets)
        return keys.choice(key, v, names)
    if axis == "kind":
        return keys.choice(key, v, kind_names())
    return axis_value(keys, key, axis, v)


#: the keys of an [[exclude]] rule and of an [[include]] (campaign/jsonschema.py finds them by these names)
EXCLUDE_KEYS = ("target", "kind", *AXES)
INCLUDE_KEYS = ("target", *AXES)


def parse_rule(
    keys: Keys, rule: dict[str, Any], i: int, section: str, targets: tuple[Target, ...]
) -> Mapping[str, tuple[Any, ...]]:
    """An exclude rule: axis -> accepted values; a test matching every key is dropped."""
    keys.unknown_keys(rule, EXCLUDE_KEYS, f"{section}[{i}].")
    if not rule:
        raise keys.err(f"{section}[{i}]", rule, "is empty (it would match every test)", "name at least one axis")
    out = {}
    for axis, values in rule.items():
        vals = values if isinstance(values, list) else [values]
        out[axis] = tuple(_match_value(keys, f"{section}[{i}].{axis}", axis, v, targets) for v in vals)
    return frozen_map(out)


def parse_include(keys: Keys, rule: dict[str, Any], i: int, targets: tuple[Target, ...]) -> Mapping[str, Any]:
    """An extra test: one value per axis; axes not given take the matrix's first value."""
    keys.unknown_keys(rule, INCLUDE_KEYS, f"include[{i}].")
    out: dict[str, Any] = {}
    for axis, v in rule.items():
        if isinstance(v, list):
            raise keys.err(f"include[{i}].{axis}", v, "takes one value, not a list", "write one [[include]] per test")
        out[axis] = _match_value(keys, f"include[{i}].{axis}", axis, v, targets)
    return frozen_map(out)


def table_list(keys: Keys, doc: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    value = doc.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise keys.err(key, value, "must be an array of tables", f"write each one as [[{key}]]")
    return value


def _layout_value(keys: Keys, key: str, v: object) -> str:
    """random | zero | unwritten | compressible:<N>% (N from 1 to 99)."""
    if isinstance(v, str) and v.startswith("compressible:"):
        m = re.fullmatch(r"compressible:([0-9]{1,2})%", v)
        if not m or not 1 <= int(m.group(1)) <= 99:
            raise keys.err(
                key,
                v,
                "needs a percentage from 1 to 99",
                'e.g. "compressible:50%" (half of each block compresses away)',
            )
        return f"compressible:{int(m.group(1))}%"
    if v not in LAYOUTS:
        raise keys.err(
            key,
            v,
            f"must be one of {', '.join(LAYOUTS)} or compressible:<N>%",
            'e.g. layout = ["unwritten", "random"] (seed 002: never-written vs written file)',
        )
    return str(v)


def _data_axis_value(keys: Keys, key: str, axis: str, v: object) -> Any:
    if axis == "layout":
        return _layout_value(keys, key, v)
    if axis == "cache":
        return keys.choice(key, v, CACHE_STATES)
    if axis == "tunables":
        return canonical_tunables(tunable_set(keys, key, v))
    if axis == "buffer_compress_percentage":
        return keys.integer(key, v, 0, 100)
    return keys.boolean(key, v)


def tunable_set(keys: Keys, key: str, table: object) -> dict[str, str]:
    """A table of ZFS module parameters (names as in /sys/module/zfs/parameters) and their values."""
    if not isinstance(table, dict):
        raise keys.err(
            key,
            table,
            "must be a table of module parameters",
            "e.g. tunables = [{}, { zfs_txg_timeout = 10 }] ({} keeps the host's values)",
        )
    out: dict[str, str] = {}
    for name, value in table.items():
        if not TUNABLE_RE.match(name):
            raise keys.err(
                f"{key}.{name}",
                value,
                "is not a module parameter name",
                "names as in /sys/module/zfs/parameters, e.g. zfs_txg_timeout",
            )
        if isinstance(value, bool) or not isinstance(value, (int, str)) or not TUNABLE_VALUE_RE.match(str(value)):
            raise keys.err(
                f"{key}.{name}",
                value,
                "must be a whole number or a short word",
                "e.g. zfs_txg_timeout = 10, zfs_arc_max = 1073741824 (bytes)",
            )
        out[name] = str(value)
    return out


def parse_tunables_table(keys: Keys, table: dict[str, Any]) -> dict[str, str]:
    """[tunables]: module parameters fixed for the whole campaign (merged under matrix.tunables)."""
    return tunable_set(keys, "tunables", table) if table else {}
