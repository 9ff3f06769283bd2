"""The campaign file's JSON Schema, generated from the tables the parser checks keys against (vocab.py, the target
kinds' own keys, and each top-level table's `<TABLE>_KEYS` tuple in this package), so an editor (Taplo / Even
Better TOML: `#:schema` or .taplo.toml) completes and checks the keys the code takes, and a table or key added to
the parser appears here without an edit. Values are checked only where the vocabulary is a closed list (kinds,
host kinds, disk models, orders, preflight actions, axes as arrays); the parser remains the judge of values."""

from __future__ import annotations

import functools
import importlib
import pkgutil
from typing import Any

from tankbench import campaign as _pkg
from tankbench.campaign import vocab
from tankbench.campaign.hosts import ENTRY_KEYS
from tankbench.lab import diskmodels
from tankbench.preflight import ACTIONS, PREFLIGHT_KEYS
from tankbench.targets import kind_names, kinds
from tankbench.targets.clients import CLIENT_KEYS

SCHEMA_ID = "https://tankbench.invalid/schemas/campaign.schema.json"  # an id, not a download address
#: the top-level tables written [[like.this]] (arrays of tables); a table the parser reads through table_list
ARRAY_TABLES = ("target", "exclude", "include", "goal")

DESCRIPTIONS = {
    "campaign": "the campaign's settings: name, runtime, repeats, host, … (README, 'A campaign file')",
    "host": "the host to run on; for the lab, its machine (disk models, ARC cap: docs/lab.md)",
    "pool": "a pool the campaign creates on blank disks (or parent = an existing dataset)",
    "target": "what is benchmarked: one [[target]] per raw disk, file, dataset, zvol, VM disk, …",
    "matrix": "the axes: every combination becomes a test (per target)",
    "exclude": "drop the tests matching every key given",
    "include": "add a test; axes not given take the matrix's first value",
    "fio": "any other fio option, the same for every test",
    "scale": "[scale.NAME]: overrides applied with --scale NAME (e.g. quick)",
    "preflight": "noise checks before each run (docs/preflight.md)",
    "tunables": "ZFS module parameters for the whole campaign",
}


def _closed(keys: tuple[str, ...] | list[str], props: dict[str, Any] | None = None) -> dict[str, Any]:
    """An object that takes exactly `keys` (each any value unless `props` says more)."""
    props = props or {}
    return {
        "type": "object",
        "properties": {k: props.get(k, {}) for k in keys},
        "additionalProperties": False,
    }


def _one_or_table(keys: tuple[str, ...]) -> dict[str, Any]:
    """A string (the short form) or an inline table of `keys`."""
    return {"anyOf": [{"type": "string"}, _closed(keys)]}


def _campaign() -> dict[str, Any]:
    props: dict[str, Any] = {
        "name": {"type": "string", "pattern": vocab.NAME_RE.pattern},
        "description": {"type": "string"},
        "order": {"enum": list(vocab.ORDERS)},
        "mode": {"enum": list(vocab.RUN_MODES)},
        "hosts_mode": {"enum": ["split", "each"]},
        "cooldown": {"anyOf": [{"type": ["string", "number"]}, _closed(vocab.COOLDOWN_KEYS)]},
        "repeats": {"anyOf": [{"type": "integer"}, _closed(vocab.REPEATS_KEYS)]},
        "racing": {"anyOf": [{"type": "boolean"}, _closed(vocab.RACING_KEYS)]},
        "hosts": {"type": "array", "items": _one_or_table(ENTRY_KEYS)},
    }
    return _closed(vocab.CAMPAIGN_KEYS, props)


def _host() -> dict[str, Any]:
    models = {"enum": list(diskmodels.MODELS)}
    props = {
        "kind": {"enum": list(vocab.HOST_KINDS)},
        "disk_model": models,
        "slog_model": models,
        "l2arc_model": models,
    }
    return _closed(vocab.HOST_KEYS, props)


def _target() -> dict[str, Any]:
    """Every kind's keys are known; a kind takes only its own (the parser refuses another kind's key)."""
    base = _closed(
        vocab.TARGET_KEYS,
        {
            "name": {"type": "string", "pattern": vocab.NAME_RE.pattern},
            "kind": {"enum": list(kind_names())},
            "clients": {"type": "array", "items": _one_or_table(CLIENT_KEYS)},
        },
    )
    base["required"] = ["name", "kind"]
    base["allOf"] = [
        {
            "if": {"properties": {"kind": {"const": k}}, "required": ["kind"]},
            "then": {"propertyNames": {"enum": ["name", "kind", *kinds()[k].table_keys]}},
        }
        for k in kind_names()
    ]
    return base


def _matrix() -> dict[str, Any]:
    """The matrix: each axis a non-empty array."""
    return _closed(vocab.AXES, {a: {"type": "array", "minItems": 1} for a in vocab.AXES})


@functools.cache
def _discovered() -> dict[str, tuple[str, ...]]:
    """`<TABLE>_KEYS` tuples of this package's modules, for top-level tables this module does not build itself."""
    found: dict[str, tuple[str, ...]] = {}
    for mod in pkgutil.iter_modules(_pkg.__path__):
        if mod.name == "jsonschema":
            continue
        module = importlib.import_module(f"{_pkg.__name__}.{mod.name}")
        for top in vocab.TOP_KEYS:
            keys = getattr(module, f"{top.upper()}_KEYS", None)
            if isinstance(keys, tuple) and all(isinstance(k, str) for k in keys):
                found.setdefault(top, keys)
    return found


def _tables() -> dict[str, dict[str, Any]]:
    """The schema of each top-level table, by name."""
    built: dict[str, dict[str, Any]] = {
        "campaign": _campaign(),
        "host": _host(),
        "pool": _closed(vocab.POOL_KEYS),
        "target": _target(),
        "matrix": _matrix(),
        "fio": {"type": "object"},
        "preflight": _closed(
            PREFLIGHT_KEYS, {k: {"enum": list(ACTIONS)} for k in ("scrub", "disk_io", "swap", "load")}
        ),
        "tunables": {"type": "object", "propertyNames": {"pattern": vocab.TUNABLE_RE.pattern}},
    }
    for top, keys in _discovered().items():
        built.setdefault(top, _closed(keys))
    out = {}
    for top in vocab.TOP_KEYS:
        if top == "scale":
            continue
        schema = built.get(top, {"type": ["object", "array"]})  # a table the code has no key list for (yet)
        if top in ARRAY_TABLES:
            schema = {"type": "array", "items": schema}
        elif top in _discovered() and top not in ("campaign", "host", "pool", "preflight"):
            schema = {"anyOf": [schema, {"type": "array", "items": schema}]}
        if top in DESCRIPTIONS:
            schema = {"description": DESCRIPTIONS[top], **schema}
        out[top] = schema
    return out


def campaign_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a campaign file as tomllib reads it."""
    tables = _tables()
    refs = {top: {"$ref": f"#/$defs/{top}"} for top in tables}
    scale = {
        "description": DESCRIPTIONS["scale"],
        "type": "object",
        "additionalProperties": {"type": "object", "properties": refs, "additionalProperties": False},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "tankbench campaign",
        "description": "A tankbench campaign file (TOML). Generated from tankbench's parser: `tankbench schema campaign`.",
        "type": "object",
        "properties": {**refs, "scale": scale},
        "additionalProperties": False,
        "$defs": tables,
    }
