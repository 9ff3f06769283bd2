"""From journal rows to per-test summaries grouped into test cases (the input of every other analysis)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tankbench.analysis.settings import Settings
from tankbench.analysis.stats import Summary, summarise
from tankbench.journal.db import Journal, TestRow
from tankbench.model import Fingerprint, test_case_for

MIB = 1024.0 * 1024.0


# The metric and check keys analysis reads (the journal extracts only these: journals get large).
VALUE_KEYS = ("total.bw_bytes", "total.iops", "total.io_bytes", "read.lat_p99_ns", "write.lat_p99_ns",
              "trim.lat_p99_ns", "sys.load1_max", "sys.load1_end", "sys.cpu_user_pct", "sys.cpu_sys_pct")
EXTRA_METRIC_KEYS = ("fio.runtime_s", "arc.hit_ratio", "arc.c_max", "arc.hits", "arc.misses")
METRIC_KEYS = VALUE_KEYS + EXTRA_METRIC_KEYS
CHECK_KEYS = ("layout.sparse", "layout.allocated_bytes", "layout.apparent_bytes", "layout.sample_compress_ratio",
              "layout.verified", "preflight.dirty_bytes", "drain.dirty_end_bytes", "timing.threshold_s",
              "zfs.direct_ignored", "zfs.recordsize", "zfs.volblocksize", "zfs.ashift", "zfs.arc_c_max",
              "zfs.txg_timeout", "zfs.compression", "zfs.direct_forced", "zfs.misaligned", "zfs.partial_record_writes",
              "zfs.working_set_fits_arc", "zfs.working_set_bytes", "zfs.runtime_near_txg", "zfs.block_bytes",
              "steadystate.attained", "schedule.decision", "schedule.reason", "cooldown.ended_by")


@dataclass(frozen=True)
class MetricDef:
    """A rankable metric: label, unit, direction and how it is obtained."""

    key: str
    label: str
    higher_is_better: bool
    formula: str


METRICS: dict[str, MetricDef] = {
    "mibs": MetricDef("mibs", "MiB/s", True,
                      "fio bandwidth of all directions: total.bw_bytes / 2^20, i.e. bytes moved / fio's runtime"),
    "iops": MetricDef("iops", "IOPS", True, "fio total.iops = read.iops + write.iops + trim.iops"),
    "p99": MetricDef("p99", "p99 latency ms", False,
                     "worst direction's 99th percentile completion latency: max(read, write).lat_p99_ns / 10^6"),
    "corrected": MetricDef("corrected", "corrected MiB/s", True,
                           "bytes fio moved / time until they were on disk: total.io_bytes / "
                           "(wall_s - ramp + drain_s) / 2^20 (seed 000's timing issue)"),
}


def run_value(metrics: Mapping[str, float], key: str, wall_s: float | None, ramp: float,
              drain_s: float | None) -> float | None:
    """One run's value of a rankable metric, None when not measured."""
    if key == "mibs":
        v = metrics.get("total.bw_bytes")
        return None if v is None else v / MIB
    if key == "iops":
        return metrics.get("total.iops")
    if key == "p99":
        p = [metrics[k] for k in ("read.lat_p99_ns", "write.lat_p99_ns", "trim.lat_p99_ns") if k in metrics]
        return max(p) / 1e6 if p else None
    if key == "corrected":
        io = metrics.get("total.io_bytes")
        if io is None or wall_s is None:
            return None
        t = wall_s - ramp + (drain_s or 0.0)
        return io / t / MIB if t > 0 else None
    raise KeyError(key)


def all_values(m: Mapping[str, float], wall_s: float | None, ramp: float,
               drain_s: float | None) -> dict[str, float | None]:
    """run_value for every metric at once (the hot loop of large journals)."""
    bw, io = m.get("total.bw_bytes"), m.get("total.io_bytes")
    p = [m[k] for k in ("read.lat_p99_ns", "write.lat_p99_ns", "trim.lat_p99_ns") if k in m]
    t = None if wall_s is None else wall_s - ramp + (drain_s or 0.0)
    return {"mibs": None if bw is None else bw / MIB, "iops": m.get("total.iops"),
            "p99": max(p) / 1e6 if p else None,
            "corrected": io / t / MIB if io is not None and t is not None and t > 0 else None}


@dataclass(frozen=True)
class RunView:
    """The numbers of one journal row (runs.id = row_id) the report uses."""

    row_id: int
    test_id: str
    run_no: int
    warmup: bool
    attempt: int
    status: str
    started: float
    fingerprint_id: str
    expected_s: float
    wall_s: float | None
    drain_s: float | None
    values: Mapping[str, float | None]
    load1: float | None
    cpu_pct: float | None
    note: str
    extra: Mapping[str, Any]

    @property
    def excess_s(self) -> float | None:
        return None if self.wall_s is None else self.wall_s - self.expected_s

    @property
    def measured(self) -> bool:
        """Counts in rankings: finished, not a warm-up."""
        return self.status == "done" and not self.warmup


@dataclass(frozen=True)
class TestSummary:
    """One test, its runs and the statistics of its measured (non-warm-up, done) runs."""

    id: str
    number: int
    name: str
    target: str
    target_kind: str
    case: str
    params: Mapping[str, Any]
    props: Mapping[str, Any]
    fio_options: Mapping[str, Any]
    runtime: float
    ramp: float
    size: int
    is_baseline: bool
    skip_note: str
    runs: tuple[RunView, ...]
    stats: Mapping[str, Summary | None]
    load1: Summary | None
    cpu_pct: Summary | None

    @property
    def measured(self) -> tuple[RunView, ...]:
        return tuple(r for r in self.runs if r.measured)

    def mean(self, key: str) -> float | None:
        s = self.stats.get(key)
        return None if s is None else s.mean

    def values(self, key: str) -> list[float]:
        s = self.stats.get(key)
        return list(s.values) if s else []

    @property
    def config(self) -> str:
        """The configuration apart from rw and bs: target, io, sync mode, iodepth, numjobs and the other axes
        (ZFS properties such as recordsize, slog, sync)."""
        p = self.params
        bits = [self.target, str(p.get("io", "")), str(p.get("sync_mode", ""))]
        if "iodepth" in p:
            bits.append(f"QD{p['iodepth']}")
        if p.get("numjobs", 1) not in (1, "1"):
            bits.append(f"{p['numjobs']} jobs")
        workload = ("rw", "bs", "io", "sync_mode", "iodepth", "numjobs")
        bits += [f"{k}={v}" if not isinstance(v, bool) else (k if v else f"no {k}")
                 for k, v in sorted(p.items()) if k not in workload]
        return " ".join(b for b in bits if b)


@dataclass(frozen=True)
class Dataset:
    """Everything analysis needs from one journal, loaded once."""

    path: str
    tests: tuple[TestSummary, ...]
    fingerprints: Mapping[str, Fingerprint]
    campaign_names: tuple[str, ...]
    settings: Settings

    @property
    def n_runs(self) -> int:
        return sum(len(t.runs) for t in self.tests)

    def cases(self) -> dict[str, list[TestSummary]]:
        out: dict[str, list[TestSummary]] = {}
        for t in self.tests:
            out.setdefault(t.case, []).append(t)
        return out

    def by_id(self) -> dict[str, TestSummary]:
        return {t.id: t for t in self.tests}


def case_name(params: Mapping[str, Any], keys: tuple[str, ...]) -> str:
    """"write seq 4k" for the default keys (rw, bs); extra keys are appended as key=value."""
    base = test_case_for(params) if {"rw", "bs"} <= set(keys) else ""
    extra = [f"{k}={params.get(k, '-')}" for k in keys if k not in ("rw", "bs")]
    return " ".join([b for b in [base] if b] + extra)


def run_view(r: Mapping[str, Any], ramp: float) -> RunView:
    """Extract the report's numbers from one journal run row (Journal.iter_run_rows)."""
    m = r["metrics"]
    load = m.get("sys.load1_max", m.get("sys.load1_end"))
    cpu = None
    if "sys.cpu_user_pct" in m or "sys.cpu_sys_pct" in m:
        cpu = m.get("sys.cpu_user_pct", 0.0) + m.get("sys.cpu_sys_pct", 0.0)
    wall, drain = r["wall_s"], r["drain_s"]
    values = all_values(m, wall, ramp, drain)
    extra = dict(r["checks"])
    extra.update((k, m[k]) for k in EXTRA_METRIC_KEYS if k in m)
    return RunView(r["id"], r["test_id"], r["run_no"], bool(r["warmup"]), r["attempt"], r["status"], r["started"],
                   r["fingerprint_id"], r["expected_s"], wall, drain, values, load, cpu, r["note"], extra)


def is_baseline(row: TestRow, baseline: str) -> bool:
    """Baseline rows: target kind or target name equal to the [report] baseline setting."""
    return baseline in (row.target_kind, row.target)


def summarise_test(row: TestRow, runs: Iterable[Mapping[str, Any]], settings: Settings) -> TestSummary:
    """Build the TestSummary of one journal test from its runs."""
    c = row.canonical
    ramp = float(c.get("ramp", 0.0) or 0.0)
    views = tuple(run_view(r, ramp) for r in runs)
    meas = [v for v in views if v.measured]
    stats = {k: summarise([x for x in (v.values[k] for v in meas) if x is not None]) for k in METRICS}
    target = c.get("target", {})
    return TestSummary(
        row.id, row.number, row.name, row.target, row.target_kind, case_name(row.params, settings.case_keys),
        row.params, dict(target.get("props", {})), dict(c.get("fio", {})), float(c.get("runtime", 0.0) or 0.0),
        ramp, int(target.get("size", 0) or 0), is_baseline(row, settings.baseline), row.skip_note, views, stats,
        summarise([v.load1 for v in meas if v.load1 is not None]),
        summarise([v.cpu_pct for v in meas if v.cpu_pct is not None]))


def load_dataset(journal: Journal, settings: Settings) -> Dataset:
    """Read tests, runs (without the heavy samples) and fingerprints once."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for r in journal.iter_run_values(METRIC_KEYS, CHECK_KEYS):
        grouped.setdefault(r["test_id"], []).append(r)
    tests = tuple(summarise_test(row, grouped.get(row.id, []), settings) for row in journal.tests())
    names = tuple(str(c.get("name", "")) for c in journal.campaigns())
    return Dataset(journal.path, tests, journal.fingerprints(), names, settings)


def campaign_spec_text(journal: Journal) -> str:
    """The latest campaign TOML stored in the journal ("" when imported without one)."""
    texts = [str(c.get("spec_text") or "") for c in journal.campaigns()]
    return texts[-1] if texts else ""
