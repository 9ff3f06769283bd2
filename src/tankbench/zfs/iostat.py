"""Parsing `zpool iostat -Hpv` intervals: the pool's and each vdev class's rates, summarised over a run and as
per-second series (pure; see docs/zfs-metrics.md)."""

from __future__ import annotations

import re
from typing import Any

# ------------------------------------------------------------------ zpool iostat
IOSTAT_FIELDS = ("alloc", "free", "read_ops", "write_ops", "read_bw", "write_bw")
IOSTAT_SECTIONS = ("logs", "cache", "special", "dedup")
_GROUP_RE = re.compile(r"^(mirror|raidz\d?|draid\d?\S*|replacing|spare|root)-\d+$")
_NICE_MULT = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50, "E": 1 << 60}


def _iostat_number(text: str) -> float | None:
    """A column value: "-" -> None, "123" (with -p) or "1.2M" (without) -> a number; ValueError otherwise."""
    if text == "-":
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGTPE]?)", text.strip())
    if not m:
        raise ValueError(text)
    return float(m.group(1)) * _NICE_MULT[m.group(2)]


def _iostat_items(text: str) -> list[tuple[str, int | None, list[float | None]] | None]:
    """(name, indent or None with -H, first six values) per row; None for a blank line.

    Headers, dash separators, timestamps (-T) and truncated or non-numeric rows are dropped.
    """
    items: list[tuple[str, int | None, list[float | None]] | None] = []
    for line in text.splitlines():
        if not line.strip():
            items.append(None)
            continue
        scripted = "\t" in line
        fields = line.split("\t") if scripted else line.split()
        if len(fields) < 7 or fields[1:2] == ["alloc"]:
            continue
        try:
            values = [_iostat_number(f) for f in fields[1:7]]
        except ValueError:
            continue
        indent = None if scripted else len(line) - len(line.lstrip(" "))
        items.append((fields[0].strip(), indent, values))
    return items


def _new_interval(pool: list[float | None]) -> dict[str, Any]:
    stats = {k: v for k, v in zip(IOSTAT_FIELDS, pool) if v is not None}
    empty: dict[str, Any] = {"vdevs": {}, "unassigned": {}, "top": {}}
    return {"pool": stats, **empty, **{s: {} for s in IOSTAT_SECTIONS}}


def _status_index(status: dict[str, Any] | None) -> tuple[dict[str, str], set[str]]:
    """device -> section and the set of top-level vdevs, from parse_zpool_status()'s "tree"."""
    where: dict[str, str] = {}
    tops: set[str] = set()
    for section, vdevs in ((status or {}).get("tree") or {}).items():
        for top, leaves in vdevs.items():
            tops.add(top)
            for name in [top, *leaves]:
                where[name] = section
    return where, tops


def _is_top(name: str, indent: int | None, where: dict[str, str], tops: set[str], open_group: bool) -> bool:
    """Whether an iostat row is a top-level vdev: from zpool status when it knows the name, else from
    the indentation (without -H), else by name: a mirror-N/raidzN-N row is, and so is any row not
    following one in its blank-separated group."""
    if name in tops:
        return True
    if name in where or indent is not None:
        return indent == 2
    return not open_group or bool(_GROUP_RE.match(name))


def parse_zpool_iostat(text: str, status: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One dict per interval of `zpool iostat -Hpv -y POOL 1` output (also reads it without -H).

    Each interval: {"pool": stats, "vdevs": {name: stats} (data vdevs, groups and leaves),
    "logs", "cache", "special", "dedup": {name: stats}, "unassigned": {name: stats},
    "top": {section: [top-level vdev names]}}; stats have the keys IOSTAT_FIELDS (ops/s, bytes/s with
    an interval; alloc/free in bytes; a "-" column is left out).

    With -H the pool row starts each interval and section labels are not printed at all: the logs,
    special/dedup and cache groups are only separated by blank lines. Pass `status` (the result of
    parse_zpool_status for the same pool, named the same way, i.e. both with or both without -P)
    to file those rows; without it they land in "unassigned". Without -H the `logs`/`cache` label rows
    and the indentation are used. A last interval with fewer rows than the one before (stream cut
    short) is dropped; rows after a lost (truncated) pool row are skipped until the next pool row.
    """
    where, tops = _status_index(status)
    intervals: list[dict[str, Any]] = []
    pool_name = (status or {}).get("pool")
    cur: dict[str, Any] | None = None
    group, label, open_group = 0, "", False
    for item in _iostat_items(text):
        if item is None:
            group, open_group = (group + 1 if cur else group), False
            continue
        name, indent, values = item
        pool_name = pool_name or name
        if name == pool_name and indent in (None, 0):
            cur = _new_interval(values)
            intervals.append(cur)
            group, label, open_group = 0, "", False
            continue
        if cur is None:
            continue  # stream started mid-interval
        if name in IOSTAT_SECTIONS and all(v is None for v in values):
            label = name  # section label row (without -H only)
            continue
        section = label or where.get(name) or ("data" if group == 0 else "unassigned")
        rows = cur["vdevs" if section == "data" else section]
        if name in rows:
            cur = None  # a row seen twice: this interval's pool row was lost, skip to the next one
            continue
        rows[name] = {k: v for k, v in zip(IOSTAT_FIELDS, values) if v is not None}
        if _is_top(name, indent, where, tops, open_group):
            cur["top"].setdefault(section, []).append(name)
        open_group = open_group or bool(_GROUP_RE.match(name))
    if len(intervals) >= 2 and _row_count(intervals[-1]) < _row_count(intervals[-2]):
        intervals.pop()
    return intervals


def _row_count(interval: dict[str, Any]) -> int:
    return sum(len(interval[k]) for k in ("vdevs", "unassigned", *IOSTAT_SECTIONS))


def _log_writes(interval: dict[str, Any]) -> tuple[float, float] | None:
    """(write ops/s, write bytes/s) summed over top-level log vdevs; None when rows are unassigned
    (-H output read without `status`: whether any of them is a log device is unknown)."""
    if interval["unassigned"]:
        return None
    logs = interval["logs"]
    names = interval["top"].get("logs", [])
    return (sum(logs[n].get("write_ops", 0.0) for n in names), sum(logs[n].get("write_bw", 0.0) for n in names))


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def summarize_iostat(intervals: list[dict[str, Any]]) -> dict[str, float]:
    """Pool-level metrics over the intervals of parse_zpool_iostat (rates, so means over intervals).

    zpool.read_ops_per_s, zpool.write_ops_per_s, zpool.read_bw_bytes, zpool.write_bw_bytes: means of
    the pool row. zpool.log_write_ops_per_s, zpool.log_write_bw_bytes: means of the sum over top-level
    log vdevs (a mirrored log counts once), 0 without log vdevs, absent when unknown (see _log_writes).
    zpool.avg_write_io_bytes: mean write bw / mean write ops, absent without writes. {} for no intervals.
    """
    if not intervals:
        return {}
    out: dict[str, float] = {}
    for field, key in (
        ("read_ops", "read_ops_per_s"),
        ("write_ops", "write_ops_per_s"),
        ("read_bw", "read_bw_bytes"),
        ("write_bw", "write_bw_bytes"),
    ):
        out[f"zpool.{key}"] = _mean([i["pool"].get(field, 0.0) for i in intervals])
    logs = [_log_writes(i) for i in intervals]
    if all(x is not None for x in logs):
        out["zpool.log_write_ops_per_s"] = _mean([x[0] for x in logs if x is not None])
        out["zpool.log_write_bw_bytes"] = _mean([x[1] for x in logs if x is not None])
    if out["zpool.write_ops_per_s"] > 0:
        out["zpool.avg_write_io_bytes"] = out["zpool.write_bw_bytes"] / out["zpool.write_ops_per_s"]
    return out


def iostat_series(intervals: list[dict[str, Any]]) -> dict[str, list[float]]:
    """1 Hz series (one point per interval) of the pool row: zpool_write_ops, zpool_write_bw_bytes,
    zpool_read_ops, zpool_read_bw_bytes, and zpool_log_write_ops (top-level log vdevs; left out when
    unknown, as in summarize_iostat)."""
    out = {
        "zpool_write_ops": [i["pool"].get("write_ops", 0.0) for i in intervals],
        "zpool_write_bw_bytes": [i["pool"].get("write_bw", 0.0) for i in intervals],
        "zpool_read_ops": [i["pool"].get("read_ops", 0.0) for i in intervals],
        "zpool_read_bw_bytes": [i["pool"].get("read_bw", 0.0) for i in intervals],
    }
    logs = [_log_writes(i) for i in intervals]
    if all(x is not None for x in logs):
        out["zpool_log_write_ops"] = [x[0] for x in logs if x is not None]
    return out
