"""Every derived number defined once: key, name, unit, formula, source, and the function computing it.

The runner stores fio's own keys plus `derive()`'s (durable throughput, lateness) and `copy_metrics()`'s; the
report, `results`, `compare` and `advise` recompute every figure from the raw keys with `run_values()`, so a
journal written by an older tankbench (whose stored derived keys meant something else) reads the same way.
`docs/metrics.md` is generated from this registry (`metrics_markdown()`, checked by a unit test).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

MIB = 1024.0 * 1024.0

FIO, COPY, FILL = "fio", "copy", "fill"


class Times(NamedTuple):
    """The clock of one run as tankbench measured it (seconds); None when not measured (imported runs)."""

    wall_s: float | None
    expected_s: float
    ramp_s: float
    drain_s: float | None


Compute = Callable[[Mapping[str, float], Times], "float | None"]


@dataclass(frozen=True)
class Metric:
    """One derived number: how it is named, what unit, which direction is better, and how it is computed."""

    key: str  # the one name: CLI (--rank-by), CSV/XLSX column, JSON key
    name: str  # shown in headings and tables
    unit: str
    higher_is_better: bool | None  # None: neither (a ratio to read, not to rank)
    formula: str
    source: str
    needs: tuple[str, ...]  # journal metric keys it reads
    compute: Compute
    kinds: tuple[str, ...] = (FIO,)  # fio runs, copy runs (cp/rsync/dd), fill runs (pool full), or several
    group: str = "throughput"

    @property
    def label(self) -> str:
        """Heading text with the unit, e.g. "durable MiB/s"."""
        return self.name if not self.unit or self.unit in self.name else f"{self.name} ({self.unit})"

    @property
    def rankable(self) -> bool:
        return self.higher_is_better is not None


def durable_seconds(t: Times) -> float | None:
    """Seconds from the end of ramp-up until the data was on disk: wall − ramp + drain (None without wall)."""
    if t.wall_s is None:
        return None
    return t.wall_s - t.ramp_s + (t.drain_s or 0.0)


def _fio_mibs(m: Mapping[str, float], t: Times) -> float | None:
    v = m.get("total.bw_bytes")
    return None if v is None else v / MIB


def _durable_mibs(m: Mapping[str, float], t: Times) -> float | None:
    io = m.get("copy.bytes", m.get("total.io_bytes"))
    if "copy.bytes" in m:  # a copy has no ramp-up: the whole command counts
        t = t._replace(ramp_s=0.0)
    d = durable_seconds(t)
    return None if io is None or d is None or d <= 0 else io / d / MIB


def _copy_mibs(m: Mapping[str, float], t: Times) -> float | None:
    size = m.get("copy.bytes")
    return None if size is None or t.wall_s is None or t.wall_s <= 0 else size / t.wall_s / MIB


#: fio's directions that carry a completion latency: a unified_rw_reporting run's is "mixed" (fio/parse.py)
P99_KEYS = ("read.lat_p99_ns", "write.lat_p99_ns", "trim.lat_p99_ns", "mixed.lat_p99_ns")


def worst_p99_ms(m: Mapping[str, float]) -> float | None:
    """The worst direction's 99th percentile completion latency in ms; None where fio gave none (not 0)."""
    vals = [v for k in P99_KEYS if (v := m.get(k))]  # a list, not a generator: this runs for every run
    return max(vals) / 1e6 if vals else None


def _p99(m: Mapping[str, float], t: Times) -> float | None:
    return worst_p99_ms(m)


def _key(name: str, scale: float = 1.0) -> Compute:
    def get(m: Mapping[str, float], t: Times) -> float | None:
        v = m.get(name)
        return None if v is None else v * scale

    get.raw_key, get.scale = name, scale  # type: ignore[attr-defined]  # run_values inlines these
    return get


#: the ARC's data counters (demand and prefetch): hits first, then misses
ARC_DATA = (
    "arc.demand_data_hits",
    "arc.prefetch_data_hits",
    "arc.demand_data_misses",
    "arc.prefetch_data_misses",
)


def _data_hit_ratio(m: Mapping[str, float], t: Times) -> float | None:
    """100 · data hits / data accesses (demand + prefetch); None without the counters or without data accesses."""
    if ARC_DATA[0] not in m:
        return None
    hits = sum(m.get(k) or 0.0 for k in ARC_DATA[:2])
    total = hits + sum(m.get(k) or 0.0 for k in ARC_DATA[2:])
    return 100.0 * hits / total if total else None


def _ratio(num: str, den: str) -> Compute:
    def get(m: Mapping[str, float], t: Times) -> float | None:
        a, b = m.get(num), m.get(den)
        return None if a is None or not b else a / b

    return get


def _load1(m: Mapping[str, float], t: Times) -> float | None:
    return m.get("sys.load1_max", m.get("sys.load1_end"))


def _cpu(m: Mapping[str, float], t: Times) -> float | None:
    if "sys.cpu_user_pct" not in m and "sys.cpu_sys_pct" not in m:
        return None
    return m.get("sys.cpu_user_pct", 0.0) + m.get("sys.cpu_sys_pct", 0.0)


def _excess(m: Mapping[str, float], t: Times) -> float | None:
    return None if t.wall_s is None else t.wall_s - t.expected_s


def _durable_late(m: Mapping[str, float], t: Times) -> float | None:
    return None if t.wall_s is None else t.wall_s - t.expected_s + (t.drain_s or 0.0)


def _first(*names: str, scale: float = 1.0) -> Compute:
    """The first of several raw keys present (e.g. a counter OpenZFS 2.2 added, then its 2.1 stand-in)."""

    def get(m: Mapping[str, float], t: Times) -> float | None:
        for name in names:
            if name in m:
                return m[name] * scale
        return None

    return get


BOTH = (FIO, COPY)
WALL = "tankbench: wall clock around the fio process (or copy command), drain = `sync`/`zpool sync` after it"

REGISTRY: tuple[Metric, ...] = (
    Metric(
        "mibs",
        "fio MiB/s",
        "MiB/s",
        True,
        "total.bw_bytes / 2^20: fio's bandwidth of all directions (bytes moved / fio's own runtime)",
        "fio JSON (`bw_bytes` of read + write + trim)",
        ("total.bw_bytes",),
        _fio_mibs,
    ),
    Metric(
        "durable_mibs",
        "durable MiB/s",
        "MiB/s",
        True,
        "total.io_bytes / (wall_s − ramp_s + drain_s) / 2^20: the bytes fio moved over the time from the end of "
        "ramp-up until they were on disk (seed 000's timing issue); copy tests: copy.bytes / (wall_s + drain_s)",
        f"fio JSON (`io_bytes`) + {WALL}",
        ("total.io_bytes", "copy.bytes"),
        _durable_mibs,
        BOTH,
    ),
    Metric(
        "iops",
        "IOPS",
        "IOPS",
        True,
        "total.iops = read.iops + write.iops + trim.iops",
        "fio JSON (`iops`)",
        ("total.iops",),
        _key("total.iops"),
    ),
    Metric(
        "p99_ms",
        "p99 latency",
        "ms",
        False,
        "max(read, write, trim, mixed).lat_p99_ns / 10^6: the worst direction's 99th percentile completion latency "
        "(mixed: a unified_rw_reporting run's)",
        "fio JSON (`clat_ns.percentile`)",
        P99_KEYS,
        _p99,
        group="latency",
    ),
    Metric(
        "copy_mibs",
        "apparent copy MiB/s",
        "MiB/s",
        True,
        "copy.bytes / wall_s / 2^20: what the copy command appeared to achieve when it returned (data may still "
        "be in RAM; compare durable MiB/s)",
        WALL,
        ("copy.bytes",),
        _copy_mibs,
        (COPY,),
    ),
    Metric(
        "excess_s",
        "late by",
        "s",
        False,
        "wall_s − expected_s where expected_s = ramp + runtime: how late fio finished (seed 000's timing KPI)",
        WALL,
        (),
        _excess,
        group="timing",
    ),
    Metric(
        "durable_late_s",
        "durable late by",
        "s",
        False,
        "wall_s − expected_s + drain_s: seconds past ramp + runtime until the data was on disk (fio's late exit, then "
        "the drain after it; what makes a run late)",
        WALL,
        (),
        _durable_late,
        group="timing",
    ),
    Metric(
        "load1",
        "load1",
        "",
        False,
        "sys.load1_max: highest 1-minute load average sampled at 1 Hz during the run (sys.load1_end when no "
        "maximum was sampled)",
        "tankbench sampler: /proc/loadavg",
        ("sys.load1_max", "sys.load1_end"),
        _load1,
        BOTH,
        "cost",
    ),
    Metric(
        "cpu_pct",
        "CPU %",
        "%",
        False,
        "sys.cpu_user_pct + sys.cpu_sys_pct: host-wide CPU user + system during the run",
        "tankbench sampler: /proc/stat",
        ("sys.cpu_user_pct", "sys.cpu_sys_pct"),
        _cpu,
        BOTH,
        "cost",
    ),
    Metric(
        "logical_write_mibs",
        "logical write MiB/s",
        "MiB/s",
        True,
        "write.bw_bytes / 2^20: what the application wrote per second (fio's write bandwidth)",
        "fio JSON (`write.bw_bytes`)",
        ("write.bw_bytes",),
        _key("write.bw_bytes", 1 / MIB),
        group="zfs",
    ),
    Metric(
        "physical_write_mibs",
        "physical write MiB/s",
        "MiB/s",
        None,
        "dev.write_bw_bytes / 2^20: bytes written per second to the target's disks (the pool's vdevs, incl. "
        "ZIL/SLOG and metadata) while sampled",
        "tankbench sampler: /proc/diskstats of the target's disks",
        ("dev.write_bw_bytes",),
        _key("dev.write_bw_bytes", 1 / MIB),
        BOTH,
        "zfs",
    ),
    Metric(
        "physical_read_mibs",
        "physical read MiB/s",
        "MiB/s",
        None,
        "dev.read_bw_bytes / 2^20: bytes read per second from the target's disks while sampled (near 0 for "
        "reads served by the ARC)",
        "tankbench sampler: /proc/diskstats of the target's disks",
        ("dev.read_bw_bytes",),
        _key("dev.read_bw_bytes", 1 / MIB),
        BOTH,
        "zfs",
    ),
    Metric(
        "physical_per_logical",
        "physical/logical written",
        "×",
        False,
        "zfs.physical_bytes_written / zfs.logical_bytes_written: bytes that reached the disks per byte fio "
        "wrote (< 1: compression; > 1: metadata, ZIL, read-modify-write of partial records)",
        "diskstats (physical) and fio JSON `write.io_bytes` (logical)",
        ("zfs.physical_bytes_written", "zfs.logical_bytes_written"),
        _ratio("zfs.physical_bytes_written", "zfs.logical_bytes_written"),
        BOTH,
        "zfs",
    ),
    Metric(
        "compressratio",
        "compressratio",
        "×",
        None,
        "zfs.compressratio: the dataset's or zvol's compressratio after the run",
        "`zfs get compressratio` after the run",
        ("zfs.compressratio",),
        _key("zfs.compressratio"),
        BOTH,
        "zfs",
    ),
    Metric(
        "arc_hit_ratio",
        "ARC hit %",
        "%",
        None,
        "100 · arc.hits / (arc.hits + arc.misses) during the run: data and metadata together (O_DIRECT reads that "
        "bypass the ARC still hit its metadata); whether reads measured RAM is the ARC data hit %",
        "arcstats before and after the run",
        ("arc.hit_ratio",),
        _key("arc.hit_ratio", 100.0),
        BOTH,
        "zfs",
    ),
    Metric(
        "arc_data_hit_ratio",
        "ARC data hit %",
        "%",
        None,
        "100 · data hits / (data hits + data misses), demand and prefetch, during the run (> 90 % in a read test "
        "whose disks read little: it measured RAM, the `arc` limiter)",
        "arcstats before and after the run",
        ARC_DATA,
        _data_hit_ratio,
        BOTH,
        "zfs",
    ),
    Metric(
        "arc_mru_hits",
        "ARC MRU hits",
        "hits",
        None,
        "arc.mru_hits: ARC hits on blocks seen once (most recently used list) during the run",
        "arcstats before and after the run",
        ("arc.mru_hits",),
        _key("arc.mru_hits"),
        BOTH,
        "zfs",
    ),
    Metric(
        "arc_mfu_hits",
        "ARC MFU hits",
        "hits",
        None,
        "arc.mfu_hits: ARC hits on blocks seen more than once (most frequently used list) during the run; "
        "growing run after run = the ARC learned the working set (seed 002)",
        "arcstats before and after the run",
        ("arc.mfu_hits",),
        _key("arc.mfu_hits"),
        BOTH,
        "zfs",
    ),
    Metric(
        "end_fsync_s",
        "final fsync",
        "s",
        None,
        "sync.end_fsync_s: seconds each job spent, on average, in its final fsync (end_fsync / fsync_on_close) after "
        "its last I/O: fio's job_runtime minus the I/O phase (time based: runtime; size based: the last entry of "
        "the job's 100 ms IOPS log, ± 0.05 s). Long = the writes fio counted were buffered, not yet durable",
        "fio JSON (`job_runtime`) and, size based, fio's per-job IOPS logs",
        ("sync.end_fsync_s",),
        _key("sync.end_fsync_s"),
        group="sync",
    ),
    Metric(
        "zil_commits",
        "ZIL commits",
        "commits",
        None,
        "zil.commit_count: how often ZFS was asked to make writes durable (fsync, O_SYNC/O_DSYNC writes, a guest's "
        "flush) during the run; 0 while the job flushed = the flushes never reached ZFS (sync=disabled, "
        "qemu cache=unsafe)",
        "OpenZFS kstats before and after the run: the dataset's objset-* (2.2+), else the pool-wide zil",
        ("zil.commit_count",),
        _key("zil.commit_count"),
        BOTH,
        "sync",
    ),
    Metric(
        "slog_write_mib",
        "SLOG MiB written",
        "MiB",
        None,
        "zil.itx_metaslab_slog_write / 2^20: ZIL log blocks written to the separate log device during the run "
        "(OpenZFS 2.1: the log records' bytes, zil.itx_metaslab_slog_bytes)",
        "OpenZFS ZIL kstats before and after the run",
        ("zil.itx_metaslab_slog_write", "zil.itx_metaslab_slog_bytes"),
        _first("zil.itx_metaslab_slog_write", "zil.itx_metaslab_slog_bytes", scale=1 / MIB),
        BOTH,
        "sync",
    ),
    Metric(
        "zil_pool_write_mib",
        "ZIL MiB in the pool",
        "MiB",
        None,
        "zil.itx_metaslab_normal_write / 2^20: ZIL log blocks written to the main pool's disks (no SLOG, or the "
        "SLOG was bypassed) during the run (OpenZFS 2.1: zil.itx_metaslab_normal_bytes)",
        "OpenZFS ZIL kstats before and after the run",
        ("zil.itx_metaslab_normal_write", "zil.itx_metaslab_normal_bytes"),
        _first("zil.itx_metaslab_normal_write", "zil.itx_metaslab_normal_bytes", scale=1 / MIB),
        BOTH,
        "sync",
    ),
    Metric(
        "mib_per_host_cpu_s",
        "MiB per host CPU-second",
        "MiB/CPU-s",
        True,
        "guest.bytes_per_host_cpu_s / 2^20: bytes fio moved in a test guest per CPU-second its qemu process used on "
        "the host (user + system): what the virtual disk costs the host",
        "fio JSON in the guest (`io_bytes`) and /proc/<qemu pid>/stat on the host",
        ("guest.bytes_per_host_cpu_s",),
        _key("guest.bytes_per_host_cpu_s", 1 / MIB),
        group="cost",
    ),
)

FILL_SOURCE = "the fill pass in the guest (fio JSON), qemu over QMP (pauses), `zfs get available` (ZFS)"


def _fill(key: str, raw: str, name: str, unit: str, formula: str, scale: float = 1.0) -> Metric:
    """A number of the pool-full experiment: neither better nor worse, never ranked (not a performance figure)."""
    return Metric(key, name, unit, None, formula, FILL_SOURCE, (raw,), _key(raw, scale), (FILL,), "fill")


#: the pool-full experiment (workload = "fill", guestconf/fill.py): sizes of a write until the pool is full, not
#: throughput; they never enter leaderboards
FILL_METRICS = (
    _fill(
        "fill_before_stop_mib",
        "fill.bytes_before_stop",
        "written before the stop",
        "MiB",
        "fill.bytes_before_stop / 2^20: bytes written before qemu first paused the VM (qemu's wr_bytes of the "
        "disk) or the guest first got an error (fio's io_bytes); all of them when neither happened",
        1 / MIB,
    ),
    _fill(
        "fill_written_mib",
        "fill.bytes_written",
        "written",
        "MiB",
        "fill.bytes_written / 2^20: fio's io_bytes of the fill pass",
        1 / MIB,
    ),
    _fill(
        "fill_verified_mib",
        "fill.verified_bytes",
        "verified",
        "MiB",
        "fill.verified_bytes / 2^20: bytes the verify pass read back and checked (fio verify_only, crc32c)",
        1 / MIB,
    ),
    _fill(
        "fill_pauses",
        "fill.pauses",
        "pauses",
        "",
        "fill.pauses: times qemu stopped the VM on an I/O error (werror policy)",
    ),
    _fill(
        "fill_paused_s",
        "fill.paused_s",
        "paused",
        "s",
        "fill.paused_s: seconds the VM stood paused, summed over the pauses",
    ),
    _fill(
        "fill_host_errors",
        "fill.host_io_errors",
        "host I/O errors",
        "",
        "fill.host_io_errors: write errors qemu got from the host for the disk (QMP BLOCK_IO_ERROR events)",
    ),
    _fill(
        "fill_room_mib",
        "fill.room_bytes",
        "room",
        "MiB",
        "fill.room_bytes / 2^20: `available` of the campaign's root dataset once the ballast was in place",
        1 / MIB,
    ),
    _fill(
        "fill_available_before_mib",
        "fill.pool_available_before",
        "available before",
        "MiB",
        "fill.pool_available_before / 2^20: `available` before the experiment (after a zpool sync)",
        1 / MIB,
    ),
    _fill(
        "fill_available_after_mib",
        "fill.pool_available_after",
        "available after",
        "MiB",
        "fill.pool_available_after / 2^20: `available` after the ballast and the filled disk were destroyed",
        1 / MIB,
    ),
)
REGISTRY = REGISTRY + FILL_METRICS
METRICS: dict[str, Metric] = {m.key: m for m in REGISTRY}
RANKABLE = tuple(m.key for m in REGISTRY if m.rankable and m.group in ("throughput", "latency"))
ALIASES = {"corrected": "durable_mibs", "durable": "durable_mibs", "p99": "p99_ms"}
# Keys an older tankbench stored under a name whose meaning changed: never shown as if current.
SUPERSEDED = {"timing.corrected_bw_bytes": "io/wall (not durable): use durable_mibs"}


def resolve(key: str) -> str | None:
    """The registry key of a name or alias ("corrected" -> "durable_mibs"); None when unknown."""
    key = ALIASES.get(key, key)
    return key if key in METRICS else None


def raw_keys(keys: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The journal metric keys the given metrics (default: all) read."""
    out: dict[str, None] = {}
    for m in REGISTRY:
        if keys is None or m.key in keys:
            out.update(dict.fromkeys(m.needs))
    return tuple(out)


def applicable(present: set[str] | frozenset[str]) -> tuple[str, ...]:
    """Registry metrics whose inputs occur among the journal keys `present` (or that need none)."""
    return tuple(m.key for m in REGISTRY if not m.needs or any(k in present for k in m.needs))


def run_kind(raw: Mapping[str, float]) -> str:
    """Which kind of run journalled these metrics: copy (copy.bytes), fill (fill.bytes_written) or fio."""
    return COPY if "copy.bytes" in raw else FILL if "fill.bytes_written" in raw else FIO


def run_values(raw: Mapping[str, float], times: Times, keys: tuple[str, ...] | None = None) -> dict[str, float | None]:
    """Every (or the given) registry metric of one run; None where it does not apply or was not measured."""
    out: dict[str, float | None] = {}
    for k, f, rk, sc in _plan(keys, run_kind(raw)):
        if rk is not None:  # a plain key times a scale: inlined, this loop runs for every run of every journal
            v = raw.get(rk)
            out[k] = None if v is None or f is None else v * sc
        elif f is None:
            out[k] = None
        else:
            out[k] = f(raw, times)
    return out


@lru_cache(maxsize=32)
def _plan(keys: tuple[str, ...] | None, kind: str) -> tuple[tuple[str, Compute | None, str | None, float], ...]:
    """(key, compute or None where it does not apply to this kind of run, plain raw key, its scale) of the
    metrics to compute."""
    return tuple(
        (
            m.key,
            m.compute if kind in m.kinds else None,
            getattr(m.compute, "raw_key", None),
            float(getattr(m.compute, "scale", 1.0)),
        )
        for m in (REGISTRY if keys is None else [METRICS[k] for k in keys])
    )


def fio_ran_s(ramp_s: float, expected_s: float, fio_runtime_s: float | None) -> float:
    """How long fio meant to run: ramp + runtime, or ramp + fio's own runtime when that ended earlier (steady
    state attained). Wall time beyond it is a late exit, even when fio exited before ramp + runtime."""
    if fio_runtime_s is None or fio_runtime_s <= 0:
        return expected_s
    return min(expected_s, ramp_s + fio_runtime_s)


# -- what the runner stores ----------------------------------------------------------------------------------


def derive(
    raw: Mapping[str, float], *, wall_s: float, expected_s: float, ramp_s: float, drain_s: float, is_copy: bool
) -> dict[str, float]:
    """The derived keys tankbench journals beside fio's own, by the registry's definitions:
    `timing.excess_s` (wall − ramp − runtime) and `timing.durable_bw_bytes` (bytes/s until durable).
    Copy runs get theirs from copy_metrics(); nothing here for them."""
    if is_copy:
        return {}
    t = Times(wall_s, expected_s, ramp_s, drain_s)
    out = {"timing.excess_s": round(wall_s - expected_s, 4)}
    durable = _durable_mibs(raw, t)
    if durable is not None:
        out["timing.durable_bw_bytes"] = durable * MIB
    return out


def copy_metrics(size: int, wall: float, drain: float) -> dict[str, float]:
    """A copy test's keys: bytes, seconds, apparent and durable bytes/s. No fio keys (total.*, write.*): a copy
    is not an fio job, and its apparent speed is not fio's bandwidth."""
    durable = wall + drain
    return {
        "copy.bytes": float(size),
        "copy.seconds": wall,
        "copy.durable_seconds": durable,
        "copy.apparent_bw_bytes": size / wall if wall > 0 else 0.0,
        "copy.durable_bw_bytes": size / durable if durable > 0 else 0.0,
    }


# -- docs ----------------------------------------------------------------------------------------------------


def metrics_markdown() -> str:
    """docs/metrics.md: the registry as a table (regenerate with `python -m tankbench.metrics > docs/metrics.md`)."""
    lines = [
        "# Metrics",
        "",
        "<!-- generated from src/tankbench/metrics.py by `python -m tankbench.metrics "
        "> docs/metrics.md`; a unit test checks that this file matches -->",
        "",
        "Every derived number tankbench shows is defined once, in `tankbench.metrics.REGISTRY`. The key is the "
        "one name used by `--rank-by`, `compare --metric`, CSV/XLSX columns and JSON keys. Figures are "
        "recomputed from the raw journal keys in every output, so journals of older versions read the same.",
        "",
        "| key | name | unit | better | formula | source | runs |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in REGISTRY:
        better = {True: "higher", False: "lower", None: "—"}[m.higher_is_better]
        lines.append(
            f"| `{m.key}` | {m.name} | {m.unit or '—'} | {better} | {m.formula} | {m.source} | {', '.join(m.kinds)} |"
        )
    lines += [
        "",
        "Aliases accepted on the command line: " + ", ".join(f"`{a}` = `{k}`" for a, k in ALIASES.items()) + ".",
        "",
        "Journal keys of older versions that are never shown as current figures: "
        + "; ".join(f"`{k}` ({why})" for k, why in SUPERSEDED.items())
        + ".",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(metrics_markdown(), end="")
