"""From journal rows to per-test summaries grouped into test cases (the input of every other analysis)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

from tankbench.analysis.limiters import LIMIT_CHECK_KEYS, Limit, RunFacts, run_facts, summary_limit
from tankbench.analysis.settings import Settings
from tankbench.analysis.stats import Summary, summarise
from tankbench.bulk import gc_paused
from tankbench.guestconf.fill import FILL_CHECK_KEYS
from tankbench.journal.db import INPUT_COLUMNS, Journal, TestRow
from tankbench.metrics import METRICS, Times, applicable, fio_ran_s, raw_keys, run_values
from tankbench.model import COPY_WORKLOADS, FILL, FIO_JOB_AXES, Fingerprint
from tankbench.model import case_name as case_name  # moved to model (the scheduler names cases too)
from tankbench.targets import KindTraits, traits_of

# The metric and check keys analysis reads for every run (the journal extracts only these: journals get large).
# The figures themselves come from the registry (tankbench.metrics); these extra keys feed per-run validity checks.
# ZFS checks (zfs.*, arc.*) are the same for every run of a test: they are read from its last measured run only.
EXTRA_METRIC_KEYS = ("fio.runtime_s", "sync.end_fsync_s", "zfs.compressratio")
METRIC_KEYS = tuple(dict.fromkeys(raw_keys() + EXTRA_METRIC_KEYS))
CHECK_KEYS = (
    "layout.sparse",
    "layout.allocated_bytes",
    "layout.apparent_bytes",
    "layout.sample_compress_ratio",
    "layout.verified",
    "preflight.dirty_bytes",
    "drain.dirty_end_bytes",
    "drain.incomplete",
    "timing.threshold_s",
    "steadystate.attained",
    "schedule.decision",
    "schedule.reason",
    "cooldown.ended_by",
    "sync.honoured",
    "sync.early_ack",
    "sync.note",
    "sync.early_ack_note",
    "guest.settings_match",
    "guest.settings_mismatch",
    "crash.layer",
    "valid",
    "validity.reasons",
    *LIMIT_CHECK_KEYS,
    *FILL_CHECK_KEYS,
)
WORKLOAD = (*FIO_JOB_AXES, "runtime", "workload", "copy_size")
#: fio patterns that only read: nothing of theirs waits to reach the disks
READ_ONLY = ("read", "randread")


class RunView(NamedTuple):
    """The numbers of one journal row (runs.id = row_id) the report uses; `values` are the registry's figures.
    Immutable like the frozen dataclasses elsewhere, but a NamedTuple: a report builds one per run (100,000s),
    and a frozen dataclass's __init__ costs ~3× as much."""

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
    note: str
    extra: Mapping[str, Any]
    late: bool = False  # finished late (see run_late), decided once at load with the campaign's threshold

    @property
    def excess_s(self) -> float | None:
        return None if self.wall_s is None else self.wall_s - self.expected_s

    @property
    def load1(self) -> float | None:
        return self.values.get("load1")

    @property
    def cpu_pct(self) -> float | None:
        return self.values.get("cpu_pct")

    @property
    def measured(self) -> bool:
        """Counts in rankings: finished, not a warm-up."""
        return self.status == "done" and not self.warmup


def timing_limit(extra: Mapping[str, Any], expected_s: float, settings: Settings) -> float:
    """[report] timing_threshold when set, else the threshold the runner recorded, else the default 10 %."""
    recorded = extra.get("timing.threshold_s")
    if settings.timing_explicit or not isinstance(recorded, int | float):
        return settings.timing_limit(expected_s)
    return float(recorded)


def run_late(status: str, excess_s: float | None, drain_s: float | None, limit: float) -> bool:
    """Finished late: wall − (ramp + runtime) + drain exceeds the threshold, i.e. the data was on disk
    noticeably later than fio's runtime suggests, so fio's MiB/s overstates this run."""
    return status == "done" and excess_s is not None and excess_s + (drain_s or 0.0) > limit


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
    zfs: Mapping[str, Any] = field(default_factory=dict)  # zfs.* / arc.* metrics and checks of the last measured run
    #: what its last measured run recorded, as the limiter rules read it (None: no measured run)
    facts: RunFacts | None = None
    #: what bounded its measured runs (analysis/limiters: the runs' recorded limiter, else its last run's, named now)
    limit: Limit | None = None

    @cached_property
    def traits(self) -> KindTraits:
        """What the test's target kind is (ZFS, a zvol, in a guest, …), asked instead of comparing its name."""
        return traits_of(self.target_kind)

    @cached_property
    def measured(self) -> tuple[RunView, ...]:
        return tuple(r for r in self.runs if r.measured)

    @cached_property
    def done(self) -> tuple[RunView, ...]:
        """Finished runs (warm-ups too), found once for every check on them."""
        return tuple(r for r in self.runs if r.status == "done")

    @cached_property
    def decided(self) -> tuple[RunView, ...]:
        """Runs holding an adaptive decision (`schedule.decision`), found once for every schedule-* check."""
        return tuple(r for r in self.runs if "schedule.decision" in r.extra)

    @property
    def load1(self) -> Summary | None:
        return self.stats.get("load1")

    @property
    def cpu_pct(self) -> Summary | None:
        return self.stats.get("cpu_pct")

    def mean(self, key: str) -> float | None:
        s = self.stats.get(key)
        return None if s is None else s.mean

    def values(self, key: str) -> list[float]:
        s = self.stats.get(key)
        return list(s.values) if s else []

    @property
    def is_copy(self) -> bool:
        return str(self.params.get("workload", "fio")) in COPY_WORKLOADS

    @property
    def reads_only(self) -> bool:
        """An fio test that only reads (read, randread): nothing to make durable, so never late (start-up instead)."""
        return not self.is_copy and str(self.params.get("rw", "")) in READ_ONLY

    @property
    def startup_s(self) -> float | None:
        """A read test's wall time beyond ramp + runtime, averaged over its measured runs: fio's start-up (opening
        and laying out its files under load), not lateness; None for other tests or without wall time."""
        if not self.reads_only:
            return None
        excess = [r.excess_s for r in self.measured if r.excess_s is not None]
        return sum(excess) / len(excess) if excess else None

    @property
    def is_fill(self) -> bool:
        """The pool-full experiment: shown in its own table, never ranked."""
        return self.params.get("workload") == FILL

    @cached_property
    def _axes(self) -> dict[str, Any]:
        out: dict[str, Any] = {"target": self.target, "kind": self.target_kind}
        out.update(self.props)
        out.update(self.params)
        return out

    def axes(self) -> dict[str, Any]:
        """Every axis value of this test by name: params, target props (compression, encryption, …), target
        and kind; params win over props of the same name (a matrix axis overrides the target's setting)."""
        return self._axes

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
        bits += [_bit(k, v) for k, v in sorted(p.items()) if k not in workload]
        return " ".join(b for b in bits if b)

    @cached_property
    def storage_config(self) -> str:
        """The storage setup only (seed 004's configuration): target, its properties and every axis that is not
        part of the workload (recordsize, compression, sync property, logbias, SLOG, layout, tunables…)."""
        bits = [self.target] + [_bit(k, v) for k, v in sorted(self.props.items()) if k not in self.params]
        bits += [_bit(k, v) for k, v in sorted(self.params.items()) if k not in WORKLOAD]
        return " ".join(b for b in bits if b)


def _bit(k: str, v: Any) -> str:
    return f"{k}={v}" if not isinstance(v, bool) else (k if v else f"no {k}")


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
        """Tests grouped by test case; fill tests are not in any (an experiment, not a performance figure)."""
        out: dict[str, list[TestSummary]] = {}
        for t in self.tests:
            if not t.is_fill:
                out.setdefault(t.case, []).append(t)
        return out

    def by_id(self) -> dict[str, TestSummary]:
        return {t.id: t for t in self.tests}

    def present(self) -> tuple[str, ...]:
        """Registry metrics measured in at least one run of this journal, in registry order."""
        have = {k for t in self.tests for k, s in t.stats.items() if s is not None}
        return tuple(k for k in METRICS if k in have)


def run_view(r: Mapping[str, Any], ramp: float, settings: Settings, keys: tuple[str, ...] | None = None) -> RunView:
    """Extract the report's numbers from one journal run row (Journal.iter_run_values); `keys`: the registry
    metrics worth computing (those whose inputs the journal has)."""
    return view_of((*(r.get(c) for c in INPUT_COLUMNS), r["metrics"], r["checks"]), ramp, settings, keys)


_ROW = INPUT_COLUMNS + ("metrics", "checks")
assert _ROW[:7] == ("id", "test_id", "run_no", "warmup", "attempt", "status", "started")
assert _ROW[9:] == ("fingerprint_id", "expected_s", "wall_s", "drain_s", "exit_status", "note", "metrics", "checks")


def view_of(
    r: tuple[Any, ...], ramp: float, settings: Settings, keys: tuple[str, ...] | None = None, may_be_late: bool = True
) -> RunView:
    """run_view of a Journal.run_input_rows tuple (the INPUT_COLUMNS, metrics, checks): `report` builds one per
    run, so no dict per row. The checks dict becomes the view's `extra` (with EXTRA_METRIC_KEYS added);
    `may_be_late` False: never late (a test whose extra wall time is not lateness, see summarise_test)."""
    rid, test_id, run_no, warmup, attempt, status, started, _, _, fp, expected, wall, drain, _, note, m, extra = r
    values = run_values(m, Times(wall, expected, ramp, drain), keys)
    for k in EXTRA_METRIC_KEYS:
        if k in m:
            extra[k] = m[k]
    # against fio's own end when steady state ended it early: a late exit before ramp + runtime is still late
    ran = fio_ran_s(ramp, expected, extra.get("fio.runtime_s")) if extra.get("steadystate.attained") else expected
    excess = None if wall is None else wall - ran
    late = may_be_late and run_late(status, excess, drain, timing_limit(extra, expected, settings))
    return RunView(
        rid,
        test_id,
        run_no,
        bool(warmup),
        attempt,
        status,
        started,
        fp,
        expected,
        wall,
        drain,
        values,
        note,
        extra,
        late,
    )


def is_baseline(row: TestRow, baseline: str) -> bool:
    """Baseline rows: target kind or target name equal to the [report] baseline setting."""
    return baseline in (row.target_kind, row.target)


def summarise_runs(views: Iterable[RunView]) -> dict[str, Summary | None]:
    """Statistics of every registry metric over the measured runs (None: not measured)."""
    meas = [v.values for v in views if v.measured]
    out: dict[str, Summary | None] = dict.fromkeys(METRICS)
    for k in meas[0] if meas else ():
        col = [x for m in meas if (x := m[k]) is not None]
        out[k] = summarise(col) if col else None
    return out


def zfs_facts(row: TestRow, last: tuple[Mapping[str, Any], Mapping[str, Any]] | None) -> dict[str, Any]:
    """The zfs.* and arc.* metrics and checks of a ZFS test's last measured run ({} for other targets);
    `last`: that run's (metrics, checks)."""
    if not traits_of(row.target_kind).zfs or last is None:
        return {}
    return {k: v for k, v in (*last[0].items(), *last[1].items()) if k.startswith(("zfs.", "arc."))}


def summarise_test(
    row: TestRow,
    runs: Iterable[tuple[Any, ...]],
    settings: Settings,
    keys: tuple[str, ...] | None = None,
    zfs: Mapping[str, Any] | None = None,
    last: tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]] | None = None,
) -> TestSummary:
    """Build the TestSummary of one journal test from its runs (Journal.run_input_rows tuples); `last`: the
    (metrics, checks, fingerprint) of its last measured run, for the limiter."""
    c = row.canonical
    ramp = float(c.get("ramp", 0.0) or 0.0)
    params = row.params
    # decided once for the test: a fill is size-based (the campaign's runtime says nothing about its time), and a
    # read's extra wall time is start-up, not lateness
    fill = params.get("workload") == FILL
    read = str(params.get("rw", "")) in READ_ONLY and params.get("workload", "fio") == "fio"
    may_be_late = not (fill or read)
    views = tuple([view_of(r, ramp, settings, keys, may_be_late) for r in runs])
    target = c.get("target", {})
    props = dict(target.get("props", {}))
    measured = [v.extra for v in views if v.measured]
    drain = next((v.drain_s for v in reversed(views) if v.measured), None)
    facts = run_facts(row.params, props, traits_of(row.target_kind), *last, drain) if last else None
    return TestSummary(
        row.id,
        row.number,
        row.name,
        row.target,
        row.target_kind,
        case_name(row.params, settings.case_keys),
        row.params,
        props,
        dict(c.get("fio", {})),
        float(c.get("runtime", 0.0) or 0.0),
        ramp,
        int(target.get("size", 0) or 0),
        is_baseline(row, settings.baseline),
        row.skip_note,
        views,
        summarise_runs(views),
        dict(zfs or {}),
        facts,
        summary_limit(measured, facts),
    )


def index_for_reports(journal: Journal) -> None:
    """Have a writable journal keep the compact per-run copy of what load_dataset reads (schema 3: written with
    each run from now on, older runs indexed once): loading then parses small arrays, not every run's JSON."""
    journal.set_input_keys(METRIC_KEYS, CHECK_KEYS)


def load_dataset(journal: Journal, settings: Settings) -> Dataset:
    """Read tests, runs (without the heavy samples) and fingerprints once."""
    with gc_paused():  # 100,000s of tuples and dicts: no cycles for the collector to find
        return _load_dataset(journal, settings)


def _load_dataset(journal: Journal, settings: Settings) -> Dataset:
    grouped: dict[str, list[tuple[Any, ...]]] = {}
    seen: set[str] = set()
    last: dict[str, int] = {}  # test id -> runs.id of its last measured run (Journal.last_measured_run's)
    for r in journal.run_input_rows(METRIC_KEYS, CHECK_KEYS):
        grouped.setdefault(r[1], []).append(r)
        seen.update(r[-2])
        if r[5] == "done" and not r[3]:
            last[r[1]] = r[0]
    keys = applicable(seen)
    rows = journal.tests()
    facts = journal.run_facts(last[t.id] for t in rows if t.id in last)
    fps = journal.fingerprints()
    fp_of = {r[0]: r[9] for runs in grouped.values() for r in runs if r[0] in facts}
    tests = tuple(
        summarise_test(
            row,
            grouped.get(row.id, []),
            settings,
            keys,
            zfs_facts(row, facts.get(last.get(row.id, -1))),
            _last(facts.get(last.get(row.id, -1)), fps.get(fp_of.get(last.get(row.id, -1), ""))),
        )
        for row in rows
    )
    names = tuple(str(c.get("name", "")) for c in journal.campaigns())
    return Dataset(journal.path, tests, fps, names, settings)


def _last(
    facts: tuple[Mapping[str, Any], Mapping[str, Any]] | None, fp: Fingerprint | None
) -> tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]] | None:
    return None if facts is None else (facts[0], facts[1], fp.data if fp is not None else {})


def campaign_spec_text(journal: Journal) -> str:
    """The latest campaign TOML stored in the journal ("" when imported without one)."""
    texts = [str(c.get("spec_text") or "") for c in journal.campaigns()]
    return texts[-1] if texts else ""
