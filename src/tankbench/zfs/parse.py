"""Parsers for OpenZFS command outputs and kstats (pure functions over text; see docs/zfs-metrics.md). `zpool
iostat` is zfs/iostat.py."""

from __future__ import annotations

import re
from typing import Any

# ------------------------------------------------------------------ arcstats
# Counters reported as deltas over a run (absent when the running OpenZFS does not have them).
ARC_COUNTERS = (
    "hits",
    "misses",
    "demand_data_hits",
    "demand_data_misses",
    "demand_metadata_hits",
    "demand_metadata_misses",
    "prefetch_data_hits",
    "prefetch_data_misses",
    "mru_hits",
    "mfu_hits",
    "mru_ghost_hits",
    "mfu_ghost_hits",
    "l2_hits",
    "l2_misses",
)
# Gauges reported as their value after the run.
ARC_GAUGES = ("size", "c_max", "c")


def parse_arcstats(text: str) -> dict[str, int]:
    """Counters from /proc/spl/kstat/zfs/arcstats: two header lines, then `name type data` rows.

    Rows that do not have three fields or an integer value (headers, truncated last line) are skipped,
    so empty or partial input gives an empty or partial dict. Values may be negative (type 3 is int64,
    e.g. memory_available_bytes).
    """
    out: dict[str, int] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) != 3 or not fields[1].isdigit():
            continue
        try:
            out[fields[0]] = int(fields[2])
        except ValueError:
            continue
    return out


def arc_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, float]:
    """ARC metrics for one run: counter deltas (after - before), hit ratio, and gauges after the run.

    A counter missing from either snapshot is left out, and so is one that went backwards (the module
    was reloaded between the snapshots, so the difference means nothing). `arc.hit_ratio` is
    hits / (hits + misses) over the run and is absent when there were no accesses.
    """
    out: dict[str, float] = {}
    for name in ARC_COUNTERS:
        if name in before and name in after and after[name] >= before[name]:
            out[f"arc.{name}"] = float(after[name] - before[name])
    accesses = out.get("arc.hits", 0.0) + out.get("arc.misses", 0.0)
    if "arc.hits" in out and "arc.misses" in out and accesses > 0:
        out["arc.hit_ratio"] = out["arc.hits"] / accesses
    for name in ARC_GAUGES:
        if name in after:
            out[f"arc.{name}"] = float(after[name])
    return out


# ------------------------------------------------------------------ ZIL (synchronous writes)
#: ZIL counters (kstat names without the `zil_` prefix): commits (a flush or sync write asked ZFS to make
#: something durable), log records, and log blocks written to the SLOG or to the main pool (`_write` and
#: `_alloc` exist from OpenZFS 2.2 on; 2.1 has `_count` and `_bytes` only)
ZIL_COUNTERS = (
    "commit_count",
    "commit_writer_count",
    "commit_error_count",
    "commit_stall_count",
    "itx_count",
    "itx_indirect_count",
    "itx_indirect_bytes",
    "itx_copied_count",
    "itx_copied_bytes",
    "itx_needcopy_count",
    "itx_needcopy_bytes",
    "itx_metaslab_normal_count",
    "itx_metaslab_normal_bytes",
    "itx_metaslab_normal_write",
    "itx_metaslab_slog_count",
    "itx_metaslab_slog_bytes",
    "itx_metaslab_slog_write",
)


def kstat_dataset_name(text: str) -> str:
    """The `dataset_name` of a per-dataset kstat (/proc/spl/kstat/zfs/<pool>/objset-0x…), or ""."""
    for line in text.splitlines():
        fields = line.split(None, 2)
        if len(fields) == 3 and fields[0] == "dataset_name":
            return fields[2].strip()
    return ""


def zil_run_delta(before: dict[str, str], after: dict[str, str], dataset: str) -> tuple[dict[str, float], str]:
    """ZIL counter deltas of one run from the kstat files captured before and after it.

    The dataset's own objset kstat (/proc/spl/kstat/zfs/<pool>/objset-0x…, with ZIL counters from OpenZFS 2.2
    on) when it has one: only this test's synchronous writes. Else the pool-wide /proc/spl/kstat/zfs/zil (every
    dataset of every pool). Returns (deltas, "dataset" | "global" | "" when neither was captured).
    """
    for path, text in after.items():
        if "/objset-" in path and kstat_dataset_name(text) == dataset:
            counters = parse_arcstats(text)
            if "zil_commit_count" in counters:
                # a dataset created after the first capture (or an objset id reused by another dataset) starts at 0
                earlier = before.get(path, "")
                same = kstat_dataset_name(earlier) == dataset
                return zil_delta(parse_arcstats(earlier) if same else {}, counters), "dataset"
    for path, text in after.items():
        if path.endswith("/zfs/zil"):
            return zil_delta(parse_arcstats(before.get(path, "")), parse_arcstats(text)), "global"
    return {}, ""


def zil_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, float]:
    """`zil.<counter>` deltas over a run; a counter that went backwards (the module was reloaded) is left out."""
    out: dict[str, float] = {}
    for name in ZIL_COUNTERS:
        key = f"zil_{name}"
        if key in after and after[key] >= before.get(key, 0):
            out[f"zil.{name}"] = float(after[key] - before.get(key, 0))
    return out


# ------------------------------------------------------------------ zfs get / zpool get
def _get_rows(text: str) -> list[list[str]]:
    """Rows of `zfs get`/`zpool get` output: tab-separated with -H, whitespace-aligned without it."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if "\t" in line:
            rows.append(line.split("\t"))
            continue
        fields = line.split(None, 3)
        if fields[:3] == ["NAME", "PROPERTY", "VALUE"]:
            continue
        rows.append(fields)
    return [r for r in rows if len(r) >= 3]


def parse_zfs_get(text: str) -> dict[str, dict[str, str]]:
    """dataset -> property -> value from `zfs get -Hp -o name,property,value[,source] ...`.

    Also reads `zpool get -Hp -o name,property,value,source all POOL` (pool -> property -> value) and
    the column-aligned output without -H (header skipped; values with spaces are only safe with -H).
    Values are kept as text ("-" stays "-"; with -p sizes are plain byte counts).
    """
    out: dict[str, dict[str, str]] = {}
    for row in _get_rows(text):
        out.setdefault(row[0], {})[row[1]] = row[2]
    return out


def zfs_get_sources(text: str) -> dict[str, dict[str, str]]:
    """dataset -> property -> source ("local", "default", "inherited from tank", "-") from the same
    output as parse_zfs_get when it was asked for the source column; properties without one are left out.
    """
    out: dict[str, dict[str, str]] = {}
    for row in _get_rows(text):
        if len(row) >= 4:
            out.setdefault(row[0], {})[row[1]] = row[3]
    return out


# ------------------------------------------------------------------ zpool status
STATUS_SECTIONS = ("logs", "cache", "spares", "special", "dedup")
_SCAN_ACTIVE_RE = re.compile(r"\b(scrub|resilver)\b.*\bin progress\b")


def _config_rows(lines: list[str]) -> list[tuple[int, str]]:
    """(indent, name) for each device row of the `config:` block, header row excluded."""
    rows: list[tuple[int, str]] = []
    inside = False
    for line in lines:
        if line.strip() == "config:":
            inside = True
            continue
        if not inside:
            continue
        if line.strip() and not line.startswith("\t"):
            break  # "errors:" or the next field ends the block
        body = line[1:].rstrip()
        if not body or body.split()[0] == "NAME":
            continue
        rows.append((len(body) - len(body.lstrip(" ")), body.split()[0]))
    return rows


def _status_tree(rows: list[tuple[int, str]]) -> dict[str, dict[str, list[str]]]:
    """section -> top-level vdev -> its leaf devices (a plain disk is its own only leaf).

    A row is a leaf when the next row is not indented deeper; top-level vdevs sit at indent 2.
    """
    tree: dict[str, dict[str, list[str]]] = {"data": {}}
    section, top = "data", ""
    for i, (indent, name) in enumerate(rows):
        if indent == 0:
            if i > 0 and name in STATUS_SECTIONS:
                section = name
                tree.setdefault(section, {})
            continue  # the pool row or a section header
        if indent == 2:
            top = name
            tree[section][top] = []
        next_indent = rows[i + 1][0] if i + 1 < len(rows) else -1
        if next_indent <= indent and top:
            tree[section][top].append(name)
    return tree


def parse_zpool_status(text: str) -> dict[str, Any]:
    """Pool, state, active scan and leaf devices per section from `zpool status [-P] POOL`.

    Returns {"pool", "state", "scan_active": "scrub"|"resilver"|None, "data", "logs", "cache",
    "spares", "special", "dedup", "errors", "tree"}. Device lists hold leaf devices only (mirror-0,
    raidz1-0 and other grouping rows are left out), with full paths when the output came from -P;
    "tree" maps section -> top-level vdev -> leaves (what parse_zpool_iostat needs to read -H output).
    A paused or finished scrub is not active. Only the first pool of the output is read.
    """
    lines = text.splitlines()
    fields: dict[str, str] = {}
    for line in lines:
        m = re.match(r"^\s*(pool|state|scan|errors):\s?(.*)$", line)
        if m is None:
            continue
        if m.group(1) == "pool" and "pool" in fields:
            break  # the next pool
        fields.setdefault(m.group(1), m.group(2).strip())
    scan = _SCAN_ACTIVE_RE.search(fields.get("scan", ""))
    tree = _status_tree(_config_rows(lines))
    out: dict[str, Any] = {
        "pool": fields.get("pool"),
        "state": fields.get("state"),
        "scan_active": scan.group(1) if scan else None,
        "errors": fields.get("errors", ""),
        "tree": tree,
    }
    for section in ("data",) + STATUS_SECTIONS:
        out[section] = [leaf for leaves in tree.get(section, {}).values() for leaf in leaves]
    return out


# ------------------------------------------------------------------ version
_VERSION_RE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def zfs_version(text: str) -> tuple[int, int, int] | None:
    """(major, minor, patch) of the kernel module from /sys/module/zfs/version ("2.3.2-2~bpo12+2")
    or `zfs version` output ("zfs-2.3.2-2~bpo12+2\\nzfs-kmod-2.3.2-2~bpo12+2").

    The zfs-kmod line wins over the userland line: the module decides how I/O is served. None when
    no version number is found (empty text, module not loaded).
    """
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    kmod = [ln for ln in lines if ln.startswith("zfs-kmod-")]
    for line in kmod + lines:
        m = _VERSION_RE.search(line.removeprefix("zfs-kmod-").removeprefix("zfs-"))
        if m:
            return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    return None


# ------------------------------------------------------------------ txgs
TXG_COLUMNS = (
    "txg",
    "birth",
    "state",
    "ndirty",
    "nread",
    "nwritten",
    "reads",
    "writes",
    "otime",
    "qtime",
    "wtime",
    "stime",
)


def parse_txgs(text: str) -> list[dict[str, Any]]:
    """Rows of /proc/spl/kstat/zfs/POOL/txgs: one dict per txg with the TXG_COLUMNS keys.

    state is a letter (O open, Q quiescing, W waiting for sync, S syncing, C committed); every other
    column is an int (times in ns, sizes in bytes). Columns are located by the header row, so extra or
    reordered columns are tolerated; rows that are short or not numeric (a truncated read) are skipped.
    """
    header: list[str] | None = None
    rows: list[dict[str, Any]] = []
    for line in text.splitlines():
        fields = line.split()
        if fields[:1] == ["txg"]:
            header = fields
            continue
        if header is None or len(fields) != len(header):
            continue
        raw = dict(zip(header, fields))
        try:
            row: dict[str, Any] = {k: (raw[k] if k == "state" else int(raw[k])) for k in TXG_COLUMNS}
        except (KeyError, ValueError):
            continue
        rows.append(row)
    return rows


def last_committed_txg(rows: list[dict[str, Any]]) -> int:
    """Highest committed (state C) txg in a snapshot, 0 if none: the `before_last_txg` for txg_summary."""
    return max((r["txg"] for r in rows if r["state"] == "C"), default=0)


def txg_summary(before_last_txg: int, rows: list[dict[str, Any]]) -> dict[str, float]:
    """Txg metrics for a run from the txgs snapshot taken after it.

    Only txgs committed (state C) after `before_last_txg` count: zfs.txgs_synced (how many),
    zfs.txg_ndirty_max_bytes (largest dirty data of one txg), zfs.txg_sync_time_max_s (longest
    stime, ns -> s) and zfs.txg_written_bytes (sum of nwritten). All 0 when none committed.
    """
    synced = [r for r in rows if r["state"] == "C" and r["txg"] > before_last_txg]
    return {
        "zfs.txgs_synced": float(len(synced)),
        "zfs.txg_ndirty_max_bytes": float(max((r["ndirty"] for r in synced), default=0)),
        "zfs.txg_sync_time_max_s": max((r["stime"] for r in synced), default=0) / 1e9,
        "zfs.txg_written_bytes": float(sum(r["nwritten"] for r in synced)),
    }


def pool_ashift(vdev_props: dict[str, dict[str, str]]) -> int | None:
    """The largest ashift of a pool's vdevs from parse_zfs_get() of
    `zpool get -Hp -o name,property,value,source ashift POOL all-vdevs` (OpenZFS >= 2.2).

    The pool property `zpool get ashift POOL` is 0 ("auto") unless set at creation, so it cannot be used;
    the root vdev (root-0) also reports 0. None when no vdev reports a positive ashift.
    """
    values = [int(p["ashift"]) for p in vdev_props.values() if p.get("ashift", "").isdigit()]
    return max((v for v in values if v > 0), default=None)


# ------------------------------------------------------------------ module parameters
def parse_module_params(text: str) -> dict[str, str]:
    """name -> value from `grep -H . /sys/module/zfs/parameters/*` ("/sys/.../zfs_txg_timeout:5");
    the name is the file's basename, the value everything after the first colon."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        path, sep, value = line.partition(":")
        if sep and path.strip():
            out[path.strip().rsplit("/", 1)[-1]] = value.strip()
    return out
