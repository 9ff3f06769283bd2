"""The shape checks of `tankbench import`: refuse, naming the key, fio JSON whose parts have the wrong type or an
impossible value (a hand-edited or foreign file), and entries whose directions contradict their options."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from tankbench.errors import UserError
from tankbench.fio.parse import DIRECTIONS, is_number, one_way


def verifies(opts: Mapping[str, Any]) -> bool:
    """Whether fio's options make a job verify what it wrote (its read pass shows as reads)."""
    return str(opts.get("verify", "0")) not in ("", "0", "none") or str(opts.get("verify_only", "0")) not in ("", "0")


def check_shape(doc: Mapping[str, Any], path: str, hint: str) -> None:
    """Refuse, naming the key, a JSON document whose parts have the wrong type for fio's output (a hand-edited or
    foreign file): the rest of the importer can then read it without guarding every access."""

    def bad(key: str, value: object, want: str) -> UserError:
        shown = json.dumps(value, default=str)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        return UserError(f"{path}: {key} = {shown}: {want} in fio's JSON", hint)

    ts = doc.get("timestamp", 0)
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not 0 <= ts < 1e11:
        raise bad("timestamp", ts, "must be seconds since 1970")
    for name in ("jobs", "client_stats"):
        entries = doc.get(name, [])
        if not isinstance(entries, list):
            raise bad(name, entries, "must be a list of job objects")
        for i, job in enumerate(entries):
            if not isinstance(job, dict):
                raise bad(f"{name}[{i}]", job, "must be a job object")
            opts = job.get("job options", {})
            if not isinstance(opts, dict):
                raise bad(f"{name}[{i}].job options", opts, "must be an object of option names and values")
            _check_directions(job, f"{name}[{i}]", bad)
            err = job.get("error", 0)
            if isinstance(err, bool) or not isinstance(err, int) or not 0 <= err < 1 << 31:
                raise bad(f"{name}[{i}].error", err, "must be an errno (a whole number)")
    glob = doc.get("global options", {})
    if not (isinstance(glob, dict) or (isinstance(glob, list) and all(isinstance(g, dict) for g in glob))):
        raise bad("global options", glob, "must be an object (or, from fio --client, a list of them)")


#: a job's per-direction blocks and, in each, the latency blocks with their tables (fio 2.x µs and 3.x ns names)
_DIRECTION_KEYS = ("read", "write", "trim", "sync", "mixed")
_LATENCY_KEYS = ("lat", "clat", "slat", "lat_ns", "clat_ns", "slat_ns")


def _check_directions(job: Mapping[str, Any], where: str, bad: Callable[[str, object, str], UserError]) -> None:
    for d in _DIRECTION_KEYS:
        block = job.get(d)
        if block is None:
            continue
        if not isinstance(block, dict):
            raise bad(f"{where}.{d}", block, "must be an object of that direction's results")
        for name in _LATENCY_KEYS:
            lat = block.get(name)
            if lat is not None and not isinstance(lat, dict):
                raise bad(f"{where}.{d}.{name}", lat, "must be a latency object")
            for table in ("percentile", "bins"):
                value = (lat or {}).get(table)
                if value is not None and not isinstance(value, dict):
                    raise bad(f"{where}.{d}.{name}.{table}", value, "must be an object")
                for k, v in (value or {}).items():  # the report reads these tables again from the stored JSON
                    if isinstance(v, bool) or not isinstance(v, int | float) or not is_number(k):
                        raise bad(f"{where}.{d}.{name}.{table}.{k}", v, "must be a number keyed by a number")


def check_directions_match(opts: Mapping[str, Any], job: Mapping[str, Any], path: str) -> None:
    """Refuse an entry that did I/O in a direction its one-way rw cannot produce (and no verify pass explains):
    group_reporting folds a group's jobs into one entry with the first job's name and the last job's options, so
    its figures belong to no one option set."""
    rw = str(opts.get("rw", opts.get("readwrite", "")))
    own = one_way(rw)
    if not own:
        return
    allowed = {own, "read"} if verifies(opts) else {own}
    for d in DIRECTIONS:
        block = job.get(d)
        if d in allowed or not isinstance(block, dict) or not (block.get("total_ios") or block.get("io_bytes")):
            continue
        raise UserError(
            f"{path}: job {job.get('jobname', '')!r}: fio reports {d} I/O, which its option rw={rw} cannot do "
            "(fio's group_reporting gives one entry for all the jobs of a group, with the last job's options)",
            "run fio without group_reporting, or with one kind of job per group (stonewall or new_group between them)",
        )
