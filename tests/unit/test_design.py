"""Screening designs (issue 29): the D-optimal choice respects the matrix's rules, says what it cannot separate,
and the fit finds known effects from the chosen tests only; refine measures the top factors in full."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from tankbench.analysis.factorfit import effects, fit, ranking_certainty
from tankbench.analysis.refine import choose
from tankbench.campaign.expand import expand, expand_matrix, include_ids
from tankbench.campaign.parse import parse_spec
from tankbench.schedule.design import refine_projection, screening, select, step_schedule, step_spec
from tankbench.schedule.doptimal import choose as d_choose
from tankbench.schedule.doptimal import relative_d_efficiency
from tankbench.schedule.factors import Point, point, target_factor

SPEC = """
[campaign]
name = "design-unit"
runtime = "5s"
repeats = {{ min = 1, max = 3, settle = "5%" }}
design = {design}

[pool]
name = "tbunit"
vdevs = ["/dev/disk/by-id/virtio-a"]
log = ["/dev/disk/by-id/virtio-b"]
confirm = ["/dev/disk/by-id/virtio-a", "/dev/disk/by-id/virtio-b"]

[[target]]
name = "fs"
kind = "dataset"
size = "1G"

[[target]]
name = "vol"
kind = "zvol"
size = "1G"

[matrix]
slog = [false, true]
recordsize = ["4k", "default"]
volblocksize = ["8k", "64k"]
compression = ["off", "lz4"]
sync = ["standard", "disabled"]
logbias = ["latency", "throughput"]
rw = ["write", "randread"]
bs = ["4k"]
iodepth = [1, 8]

[[exclude]]
sync = "disabled"
slog = true
[[exclude]]
sync = "disabled"
logbias = "throughput"
[[exclude]]
rw = "randread"
sync = "disabled"

[[include]]
target = "vol"
rw = "randread"
layout = "zero"
"""


def spec(design: str = '"screening"', text: str = SPEC):  # type: ignore[no-untyped-def]
    return parse_spec(text.format(design=design), "unit.toml")


def truth(p: Point) -> float:
    """A known response: zvol 0.3x, recordsize 4k 0.5x, sync disabled 1.8x, a SLOG 1.4x only with logbias
    latency (an interaction), iodepth 8 1.2x; compression nothing."""
    y = 100.0
    y *= 0.3 if p.kind == "zvol" else 1.0
    y *= 0.5 if p.params.get("recordsize") == "4k" else 1.0
    y *= 1.8 if p.params.get("sync") == "disabled" else 1.0
    y *= 1.4 if p.params.get("slog") and p.params.get("logbias") == "latency" else 1.0
    y *= 1.2 if p.params.get("iodepth") == 8 else 1.0
    return y


def test_screening_runs_a_fraction_that_obeys_the_rules_and_always_the_includes() -> None:
    s = spec()
    every = expand_matrix(s)
    chosen = expand(s)
    designs = screening(s, every, include_ids(s))
    assert {w.name for w in designs} == {"write seq 4k", "read random 4k"}
    write = next(w for w in designs if w.name == "write seq 4k")
    # 2 kinds x 2 block sizes x 2 compressions x 5 sync/slog/logbias states x 2 iodepths
    assert len(write.candidates) == 80 and write.parameters == 9 and len(write.chosen) == 12
    assert 0.8 < write.d_efficiency <= 1.6
    assert len(chosen) < len(every) / 3
    ids = {t.id for t in chosen}
    assert include_ids(s) <= ids  # the [[include]] (a zero-filled zvol's reads) always runs
    assert [t.number for t in chosen] == sorted(t.number for t in chosen)  # matrix numbers kept
    for t in chosen:  # nothing an [[exclude]] rule dropped comes back
        assert not (
            t.params.get("sync") == "disabled" and (t.params.get("slog") or t.params.get("logbias") == "throughput")
        )
    # the same campaign chooses the same tests
    assert [t.id for t in expand(spec())] == [t.id for t in chosen]


def test_what_the_design_cannot_separate_is_named() -> None:
    s = spec()
    write = next(w for w in screening(s, expand_matrix(s), include_ids(s)) if w.name == "write seq 4k")
    pairs = {(a.a, a.b): a for a in write.aliases}
    # nested (a zvol has no recordsize) and excluded (sync=disabled has no throughput) combinations
    assert not pairs[("kind", "recordsize")].in_matrix
    assert not pairs[("sync", "logbias")].in_matrix
    assert "not separable even in the full matrix" in pairs[("sync", "logbias")].describe()


def test_the_fit_of_the_chosen_tests_finds_the_known_effects() -> None:
    s = spec()
    write = next(w for w in screening(s, expand_matrix(s), include_ids(s)) if w.name == "write seq 4k")
    pts = list(write.candidates)
    rng = random.Random(7)
    values = {p.id: [truth(p) * math.exp(rng.gauss(0, 0.03))] for p in pts if p.id in write.chosen}
    f = fit(pts, values, list(write.factors), target_factor(pts))
    assert f is not None and f.df >= 2
    ranked = effects(f, pts)
    top = [e.factor for e in ranked[:3]]
    assert set(top) == {"kind", "recordsize", "sync"}, [(e.factor, e.ratio) for e in ranked]
    by = {e.factor: e for e in ranked}
    assert by["sync"].best == "disabled" and by["sync"].low <= 1.8 <= by["sync"].high
    assert by["recordsize"].best == "default" and by["recordsize"].low <= 2.0 <= by["recordsize"].high
    assert by["compression"].ratio < 1.1 and not by["compression"].significant
    assert ranking_certainty(f, ranked, pts)[0] in (True, False)
    unmeasured = next(p for p in pts if p.id not in values)
    pred = f.predict(unmeasured)
    assert pred.low <= pred.value <= pred.high


def test_refine_measures_the_top_factors_in_full_and_fixes_the_rest_at_their_best() -> None:
    s = spec()
    write = next(w for w in screening(s, expand_matrix(s), include_ids(s)) if w.name == "write seq 4k")
    pts = list(write.candidates)
    values = {p.id: [truth(p)] for p in pts if p.id in write.chosen}
    values = {k: [v[0], v[0] * 1.01] for k, v in values.items()}  # two runs each: the fit has noise to judge by
    f = fit(pts, values, list(write.factors), target_factor(pts))
    assert f is not None
    r = choose(write.name, f, pts, 3)
    assert set(r.top) == {"kind", "recordsize", "sync"}
    assert r.fixed["compression"] in ("off", "lz4") and r.fixed["iodepth"] == "8"
    # dataset x {4k, default} x {standard, disabled} + zvol x {standard, disabled}
    assert len(r.chosen) == 6
    chosen = [p for p in pts if p.id in r.chosen]
    assert all(p.params.get("iodepth") == 8 for p in chosen)
    # the best test of the matrix is measured by the refine
    best = max(pts, key=truth)
    assert best.id in r.chosen


def test_a_screening_runs_each_test_repeats_min_times() -> None:
    s = spec()
    sched = step_schedule(s.design, s.schedule)
    assert (sched.repeats_min, sched.repeats_max, sched.settle) == (1, 1, None)
    assert step_spec(s).repeats == 1
    ex = spec('"exhaustive"')
    assert step_spec(ex) is ex and len(expand(ex)) == len(expand_matrix(ex))


def test_refine_projection_ranges_over_every_choice_of_top_factors() -> None:
    s = spec()
    every = expand_matrix(s)
    designs = screening(s, every, include_ids(s))
    p = refine_projection(designs, every, 3)
    assert 0 < p.low <= p.likely <= p.high < len(every)
    screened = {i for w in designs for i in w.chosen}
    assert 0 < len(p.tests) < p.likely and not {t.id for t in p.tests} & screened  # what the refine adds


def test_fedorov_exchange_finds_the_orthogonal_half_fraction() -> None:
    """A 2^3 full factorial's D-optimal 4-run design for main effects is a half fraction: D-efficiency 1."""
    import itertools

    import numpy as np

    x = np.array([[1.0, *row] for row in itertools.product((0.0, 1.0), repeat=3)])
    rows = d_choose(x, np.zeros((8, 0)), 4)
    assert len(set(rows)) == 4
    assert relative_d_efficiency(x[rows], x) == pytest.approx(1.0)
    assert np.linalg.matrix_rank(x[rows]) == 4


def test_design_table_options() -> None:
    s = spec('{ step = "screening", top = 2, runs = 16, workload = ["rw", "bs", "iodepth"] }')
    assert (s.design.top, s.design.runs, s.design.workload) == (2, 16, ("workload", "rw", "bs", "iodepth"))
    designs = screening(s, expand_matrix(s), include_ids(s))
    rw_only = spec('{ step = "screening", workload = ["rw"] }')
    assert {w.name for w in screening(rw_only, expand_matrix(rw_only), include_ids(rw_only))} == {
        "fio rw=write",
        "fio rw=randread",
    }
    assert {w.name for w in designs} == {
        "write seq 4k iodepth=1",
        "write seq 4k iodepth=8",
        "read random 4k iodepth=1",
        "read random 4k iodepth=8",
    }
    assert all(len(w.chosen) == min(16, len(w.candidates)) for w in designs if w.name.startswith("write"))
    assert replace(s.design, ids=frozenset()).step == "screening"


def _journal_with_screening(path: str, refine: bool) -> None:
    """A journal as `run` (screening) and `refine` leave it, the runs' throughput from `truth`."""
    import time

    from tankbench.cli._design import screening_record
    from tankbench.journal.db import Journal
    from tankbench.model import Run

    s = spec()
    every = expand_matrix(s)
    designs = screening(s, every, include_ids(s))
    ran = {i for w in designs for i in w.chosen}
    with Journal(path) as j:
        j.add_campaign(s.campaign_id, s.name, s.path, s.text)
        j.add_design_step(
            s.campaign_id, "screening", screening_record(s, designs, {"campaign": "unit.toml", "options": []})
        )
        if refine:
            from tankbench.analysis.refine import choose as refine_choose

            data = []
            for w in designs:
                pts = list(w.candidates)
                f = fit(
                    pts,
                    {p.id: [truth(p), truth(p) * 1.02] for p in pts if p.id in w.chosen},
                    list(w.factors),
                    target_factor(pts),
                )
                if f is not None:
                    data.append(refine_choose(w.name, f, pts, 3).as_dict())
            j.add_design_step(s.campaign_id, "refine", {"top": 3, "workloads": data})
            ran |= {i for w in data for i in w["chosen"]}
        tests = [t for t in every if t.id in ran]
        j.add_tests(s.campaign_id, tests, {})
        for t in tests:
            for n, wobble in ((1, 1.0), (2, 1.02)):
                row = j.begin_run(t.id, n, False, 1, 5.0, "unit")
                bw = truth(point(t)) * wobble * (1 << 20)
                j.finish_run(
                    row, Run(t.id, n, False, 1, "done", time.time(), time.time(), metrics={"total.bw_bytes": bw})
                )


def test_factor_report_of_a_screening_and_refine_journal(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tankbench.analysis.factors import factor_report
    from tankbench.journal.db import Journal

    path = str(tmp_path / "j.sqlite")
    _journal_with_screening(path, refine=True)
    with Journal.open_readonly(path) as j:
        rep = factor_report(j)
    assert rep is not None and rep.steps == ("screening", "refine")
    w = next(x for x in rep.workloads if x.name == "write seq 4k")
    assert w.candidates == 80 and 12 <= w.measured < 30 and w.runs == 2 * w.measured
    assert {e.factor for e in w.effects[:3]} == {"kind", "recordsize", "sync"}
    assert "factors have an effect at 95 %" in w.certainty()
    reasons = {s.reason for s in w.skipped}
    assert len(w.skipped) == w.candidates - w.measured
    assert any(r.startswith("not in the screening design; refine fixed") for r in reasons), reasons
    assert any("sync × logbias" in a and "not separable in the matrix itself" in a for a in w.aliases)
    # the winner is measured: the best test of the matrix (dataset, default records, sync disabled, iodepth 8)
    assert "sync-disabled" in w.best_measured and w.best_measured_mib_s == pytest.approx(
        100 * 1.8 * 1.2 * 1.01, rel=0.02
    )
    for p in w.predicted:  # predicted cells carry an interval and are never the named winner
        assert p.low <= p.mib_s <= p.high and p.name != w.best_measured


def test_factor_report_of_a_screening_only(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tankbench.analysis.factors import factor_report
    from tankbench.journal.db import Journal

    path = str(tmp_path / "j.sqlite")
    _journal_with_screening(path, refine=False)
    with Journal.open_readonly(path) as j:
        rep = factor_report(j)
    assert rep is not None and rep.steps == ("screening",)
    w = next(x for x in rep.workloads if x.name == "write seq 4k")
    assert w.measured == 12 and all(s.reason.startswith("not in the screening design (") for s in w.skipped)


def test_zvol_issues_screening_and_refine_fit_a_tenth_of_the_seeds_time_on_a_real_host() -> None:
    """Issue 29: `plan zvol-issues --set campaign.design=screening` and its refine step, together <= 21 h likely on
    a real host (the seed's batch took 211 h; the exhaustive preset ~108 h)."""
    from tankbench.campaign.overrides import Overrides
    from tankbench.campaign.parse import load_spec
    from tankbench.cli._design import design_lines
    from tankbench.cli.plan import estimate
    from tankbench.cli.presets import resolve_campaign

    s = step_spec(
        load_spec(resolve_campaign("zvol-issues"), overrides=Overrides(sets=(("campaign.design", "screening"),)))
    )
    full = expand_matrix(s)
    tests = select(s, full, include_ids(s))
    est = estimate(s, tests, "/nonexistent/journal.sqlite")[0]
    real = estimate(s, tests, "/nonexistent/journal.sqlite", real_host=True)[0]
    lines, data = design_lines(s, full, tests, est, real, "/nonexistent/journal.sqlite", estimate)
    refine = data["refine"]["estimate_real_host"]["likely_s"]
    assert len(tests) < 2703 / 10 and data["refine"]["tests_likely"] < 2703 / 20
    assert real.likely + refine <= 21 * 3600, lines
    assert any(line.startswith("Step 2, refine") for line in lines) and lines[-1].startswith("Both steps, likely")
