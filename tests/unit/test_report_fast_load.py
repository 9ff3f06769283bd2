"""The report's fast read path (Journal.run_input_rows -> cases.view_of, ZFS facts in one query, per-test run
checks) against the reference path it replaced (Journal.runs() with the full JSON, one last_measured_run query per
test, a run_view per row, every (test, run) pair checked), on every fixture journal, indexed or not, and a
fleet host's view: the same Dataset, to the last float, and the same warnings."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tankbench.analysis import cases
from tankbench.analysis.cases import (
    CHECK_KEYS,
    EXTRA_METRIC_KEYS,
    METRIC_KEYS,
    Dataset,
    RunView,
    campaign_spec_text,
    case_name,
    fio_ran_s,
    index_for_reports,
    is_baseline,
    load_dataset,
    run_late,
    timing_limit,
)
from tankbench.analysis.checks import CHECKS, RunCheck, Warning, _warning
from tankbench.analysis.limiters import run_facts, summary_limit
from tankbench.analysis.settings import Settings, parse_settings
from tankbench.analysis.stats import summarise
from tankbench.journal.db import Journal
from tankbench.journal.hostview import HostJournal
from tankbench.metrics import METRICS, Times, applicable, run_values
from tankbench.model import FILL
from tankbench.targets import traits_of

FIXTURES = Path(__file__).parent.parent / "fixtures"
GOLDEN = sorted(FIXTURES.glob("journal-*.sqlite"))


def reference_dataset(j: Journal, settings: Settings) -> Dataset:
    """load_dataset as it was before the fast path: full JSON per run, a dict per row, a query per ZFS test."""
    runs = j.runs(with_samples=False)
    seen = {k for r in runs for k in r.metrics if k in METRIC_KEYS and r.metrics[k] is not None}
    keys = applicable(seen)
    tests = []
    for row in j.tests():
        c = row.canonical
        ramp = float(c.get("ramp", 0.0) or 0.0)
        views = []
        for r in (r for r in runs if r.test_id == row.id):
            m = {k: r.metrics[k] for k in METRIC_KEYS if r.metrics.get(k) is not None}
            extra = {k: r.checks[k] for k in CHECK_KEYS if r.checks.get(k) is not None}
            extra.update((k, m[k]) for k in EXTRA_METRIC_KEYS if k in m)
            values = run_values(m, Times(r.wall_s, r.expected_s, ramp, r.drain_s), keys)
            ran = (
                fio_ran_s(ramp, r.expected_s, extra.get("fio.runtime_s"))
                if extra.get("steadystate.attained")
                else r.expected_s
            )
            excess = None if r.wall_s is None else r.wall_s - ran
            late = run_late(r.status, excess, r.drain_s, timing_limit(extra, r.expected_s, settings))
            if row.params.get("workload") == FILL or row.params.get("rw") in ("read", "randread"):
                late = False  # a fill is size-based; a read's extra wall time is start-up, not lateness
            views.append(
                RunView(
                    r.row_id or 0,
                    r.test_id,
                    r.run_no,
                    bool(r.warmup),
                    r.attempt,
                    r.status,
                    r.started,
                    r.fingerprint_id,
                    r.expected_s,
                    r.wall_s,
                    r.drain_s,
                    values,
                    r.note,
                    extra,
                    late,
                )  # fmt: skip
            )
        meas = [v.values for v in views if v.measured]
        stats: dict[str, Any] = dict.fromkeys(METRICS)
        for k in meas[0] if meas else ():
            col = [x for x in (mv[k] for mv in meas) if x is not None]
            stats[k] = summarise(col) if col else None
        zfs: dict[str, Any] = {}
        last = j.last_measured_run(row.id, with_samples=False)
        if traits_of(row.target_kind).zfs and last is not None:
            zfs = {k: v for k, v in (*last.metrics.items(), *last.checks.items()) if k.startswith(("zfs.", "arc."))}
        target = c.get("target", {})
        facts = None
        if last is not None:
            fp = j.fingerprints().get(last.fingerprint_id)
            props = dict(target.get("props", {}))
            kind = traits_of(row.target_kind)
            facts = run_facts(row.params, props, kind, last.metrics, last.checks, fp.data if fp else {}, last.drain_s)
        limit = summary_limit([v.extra for v in views if v.measured], facts)
        tests.append(
            cases.TestSummary(
                row.id,
                row.number,
                row.name,
                row.target,
                row.target_kind,
                case_name(row.params, settings.case_keys),
                row.params,
                dict(target.get("props", {})),
                dict(c.get("fio", {})),
                float(c.get("runtime", 0.0) or 0.0),
                ramp,
                int(target.get("size", 0) or 0),
                is_baseline(row, settings.baseline),
                row.skip_note,
                tuple(views),
                stats,
                zfs,
                facts,
                limit,
            )  # fmt: skip
        )
    names = tuple(str(c.get("name", "")) for c in j.campaigns())
    return Dataset(j.path, tuple(tests), j.fingerprints(), names, settings)


def reference_run_warnings(check: RunCheck, ds: Dataset) -> Iterator[Warning]:
    """RunCheck.warnings as it was: every (test, run) pair in one list."""
    hits = [(t, r) for t in ds.tests for r in check.runs(t) if check.applies(t, r)]
    msg = check.message.replace("{n}", str(len(hits)))
    if check.detail:
        reasons = "; ".join(f"#{t.number}: {r.extra.get('schedule.reason', '')}" for t, r in hits[:3])
        msg += f" ({reasons}{' …' if len(hits) > 3 else ''})"
    tests = list({t.id: t for t, _ in hits}.values())
    yield from _warning(check.code, check.severity, tests, msg, check.fix, (r.row_id for _, r in hits))


def journals(tmp_path: Path, golden: Path) -> Iterator[Journal]:
    """The fixture as it is (no run_inputs), indexed (run_inputs), and each fleet host's view of it."""
    yield Journal.open_readonly(str(golden))
    path = tmp_path / golden.name
    shutil.copy(golden, path)
    with Journal(str(path)) as j:
        index_for_reports(j)
        hosts = [r[0] for r in j.conn.execute("SELECT DISTINCT host FROM runs")]
    yield Journal.open_readonly(str(path))
    for host in hosts:
        yield HostJournal.for_host(str(path), host, readonly=True)
    # indexed by another tankbench version (a report never re-indexes: it opens the journal read-only): a copy that
    # lacks some keys, one with others in another order and keys nobody reads, and one whose newest runs have no
    # compact row at all
    for n, (mk, ck) in enumerate(
        [
            (METRIC_KEYS[:-5], CHECK_KEYS[3:-3]),
            ((*reversed(METRIC_KEYS), "x.unknown"), ("x.other", *reversed(CHECK_KEYS))),
        ]
    ):
        other = tmp_path / f"other-keys-{n}-{golden.name}"
        shutil.copy(golden, other)
        with Journal(str(other)) as j:
            j.set_input_keys(mk, ck)
            if n == 1:
                with j.conn:
                    j.conn.execute("DELETE FROM run_inputs WHERE run_id > (SELECT max(id) / 2 FROM runs)")
        yield Journal.open_readonly(str(other))


@pytest.mark.parametrize("golden", GOLDEN, ids=[g.stem for g in GOLDEN])
def test_fast_load_equals_the_reference_path(tmp_path: Path, golden: Path) -> None:
    for j in journals(tmp_path, golden):
        with j:
            settings = parse_settings(campaign_spec_text(j), "x")
            fast, ref = load_dataset(j, settings), reference_dataset(j, settings)
        assert fast.n_runs == ref.n_runs > 0 or isinstance(j, HostJournal)
        for a, b in zip(fast.tests, ref.tests, strict=True):
            assert a == b, (golden.name, a.id)
            for ra, rb in zip(a.runs, b.runs, strict=True):  # in the same order too: exports list them
                assert list(ra.extra) == list(rb.extra) and list(ra.values) == list(rb.values), (golden.name, a.id)
        assert fast == ref
        if golden.name == "journal-lab-zfs.sqlite":  # the batched query of ZFS facts is exercised
            assert any(t.zfs for t in fast.tests)
        for check in CHECKS:
            if isinstance(check, RunCheck):
                assert list(check.warnings(fast)) == list(reference_run_warnings(check, fast)), check.code


def test_many_hits_and_details(tmp_path: Path) -> None:
    """A check that holds for many runs of many tests: same count, rows, tests and the first three reasons."""
    with Journal.open_readonly(str(FIXTURES / "journal-local-file.sqlite")) as j:
        ds = load_dataset(j, parse_settings(campaign_spec_text(j), "x"))
    every = RunCheck("every", "info", "{n} runs", "fix", lambda t, r: True, detail=True)
    odd = RunCheck("odd", "info", "{n} runs", "fix", lambda t, r: r.row_id % 2 == 1, detail=True)
    none = RunCheck("none", "info", "{n} runs", "fix", lambda t, r: False, detail=True)
    for check in (every, odd, none):
        assert list(check.warnings(ds)) == list(reference_run_warnings(check, ds))
    assert list(none.warnings(ds)) == []


@pytest.mark.parametrize("golden", GOLDEN, ids=[g.stem for g in GOLDEN])
def test_compact_json_reads_back_as_the_indented_one(golden: Path) -> None:
    """results.json above 10,000 runs is written by orjson: the same data as json's indented file."""
    from tankbench.analysis.analyse import analyse_journal
    from tankbench.reports.json import analysis_dict, encode

    data = analysis_dict(analyse_journal(str(golden)))
    indented = encode(data, compact=False)
    assert indented == (json.dumps(data, indent=1, default=str) + "\n").encode()  # as before, byte for byte
    assert json.loads(encode(data, compact=True)) == json.loads(indented)
    assert json.loads(encode({"big": 2**70} | data, compact=True))["big"] == 2**70  # json's turn
