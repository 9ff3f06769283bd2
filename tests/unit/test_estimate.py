"""Estimates (issue 11): ranges that count provisioning, layout, drain and cooldown, learned from the journal,
checked against what a real lab campaign took."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from tankbench.campaign import expand, load_spec, parse_spec
from tankbench.cli.plan import estimate
from tankbench.cli.presets import resolve_campaign
from tankbench.journal import Journal
from tankbench.progress import fmt_estimate
from tankbench.schedule.estimate import (
    RUN_CLASSES,
    SS_FRACTION,
    SS_FRACTION_SLOPE,
    Estimate,
    Estimator,
    classify,
    describe_priors,
    expected_repeats,
    priors_for,
    run_class,
)
from tankbench.schedule.scheduler import Scheduler, history_from_runs
from tankbench.zfs.props import zfs_options

FIXTURES = Path(__file__).parent.parent / "fixtures"
SEED_DAYS = 8.8


def lab_runs(tmp_path: Path):  # type: ignore[no-untyped-def]
    """The real lab journal (a copy: opening a journal may convert it to WAL)."""
    shutil.copy(FIXTURES / "journal-lab-zfs.sqlite", tmp_path / "j.sqlite")
    with Journal(str(tmp_path / "j.sqlite"), create=False) as j:
        return j.runs(with_samples=False)


@pytest.mark.parametrize("k", [4, 8, 14, 20, 28])
def test_estimate_learned_so_far_brackets_what_the_lab_campaign_really_took(tmp_path: Path, k: int) -> None:
    spec = load_spec(str(FIXTURES / "journal-lab-zfs.toml"), "quick")
    tests = expand(spec)
    runs = sorted(lab_runs(tmp_path), key=lambda r: r.started)
    seen, rest = runs[:k], runs[k:]
    actual = rest[-1].ended - seen[-1].ended
    sched = Scheduler(tests, spec.schedule, history_from_runs(seen))
    est = Estimator(spec, priors_for(True))
    est.learn(seen, tests)
    e = est.estimate(sched)
    assert sched.remaining().runs_low == len(rest)
    assert e.low <= actual <= e.high * 1.05, (k, e, actual)
    assert abs(e.likely - actual) <= 0.4 * actual or k == 28, (k, e, actual)


def test_fio_time_alone_was_the_dishonest_estimate(tmp_path: Path) -> None:
    """The issue's "ETA 2m16s, took 12m04s": fio time alone is a fraction of what a lab campaign takes."""
    runs = lab_runs(tmp_path)
    took = max(r.ended for r in runs) - min(r.started for r in runs)
    fio_only = sum(r.expected_s for r in runs)
    assert fio_only < 0.25 * took
    spec = load_spec(str(FIXTURES / "journal-lab-zfs.toml"), "quick")
    e, _, learned = estimate(spec, expand(spec), str(tmp_path / "none.sqlite"))
    assert not learned and 0.7 * took <= e.likely <= 1.6 * took, (e, took)


def test_zvol_issues_full_scale_fits_the_seeds_time_on_a_real_host() -> None:
    spec = load_spec(resolve_campaign("zvol-issues"))
    tests = expand(spec)
    e, sched, _ = estimate(spec, tests, "/nonexistent/journal.sqlite", real_host=True)
    assert len(tests) == 2703 and len(sched.groups) == 55  # with the guest copies and the zero re-read
    assert e.likely <= SEED_DAYS * 86400, fmt_estimate(e)
    assert e.low < e.likely < e.high
    old = parse_spec(
        Path(resolve_campaign("zvol-issues"))
        .read_text()
        .replace('runtime = "90s"', 'runtime = "180s"')
        .replace('warmup = "per-config"', "warmup = true")
        .replace('repeats = { min = 1, max = 3, settle = "5%" }', "repeats = 1")
        .replace('cooldown = { auto = true, max = "2m" }', 'cooldown = "2m"')
        .replace('ss = "iops:5%"', 'ss = ""'),
        "old.toml",
    )
    e_old = estimate(old, expand(old), "/nonexistent/journal.sqlite", real_host=True)[0]
    assert e_old.likely > 2 * e.likely * 0.9, "the old schedule (190 s + 2 min per test, a warm-up each)"


def test_expected_repeats_follow_the_ci_rule() -> None:
    assert expected_repeats(2, 10, 0.05, 0.03) == 4  # t(3) * 0.03 / 2 = 0.048
    assert expected_repeats(2, 3, 0.05, 0.03) == 3
    assert expected_repeats(2, 10, 0.05, 0.005) == 2
    assert expected_repeats(2, 10, None, 0.03) == 10


def test_format_of_a_range() -> None:
    assert fmt_estimate(Estimate(600, 610, 620)) == "10m10s"
    text = fmt_estimate(Estimate(3 * 86400, 8 * 86400, 20 * 86400))
    assert text.startswith("72h") and "likely 192h" in text and "8.0 days" in text


def test_progress_line_shows_runs_and_eta_as_ranges() -> None:
    import io

    from tankbench.progress import Progress

    out = io.StringIO()
    p = Progress(0, stream=out)
    p.runs_left = lambda: (8, 16)
    p.estimate = lambda: Estimate(100.0, 300.0, 900.0)
    p.start(1, 4, 1, "file-a-read-4k", "run 1/4", 5.0)
    line = out.getvalue()
    assert "(run 1/8–16, ETA 1m40s–15m00s (likely 5m00s))" in line, line
    p.finish("done", "x")
    p.runs_left = lambda: (3, 3)
    p.estimate = lambda: Estimate(60.0, 61.0, 62.0)
    p.start(2, 4, 2, "file-a-write-4k", "run 1/4", 5.0)
    assert "(run 2/4, ETA 1m01s)" in out.getvalue().splitlines()[-1]


def test_a_test_guest_boot_is_counted_once_per_run_until_it_has_booted() -> None:
    spec = load_spec(resolve_campaign("zvol-vs-qcow2"), "quick")
    tests = expand(spec)
    est = Estimator(spec, priors_for(True))
    # nested TCG: ready after 48-67 s quiet or at load 2-3, 112-124 s at load ~2 (docs/guest.md), 311 s at load ~7
    p = est.priors
    assert est.setup_cost(tests) == (p.guest_boot_s / 2, p.guest_boot_s, p.guest_boot_s * 2) == (33.5, 67.0, 134.0)
    assert est.setup_cost(t for t in tests if t.target.kind == "zvol") == (0.0, 0.0, 0.0)  # host runs only
    sched = Scheduler(tests, spec.schedule, {})
    before = est.estimate(sched)
    est.setup_done = True  # the runner booted the guest: the progress line's ETA stops counting it
    after = est.estimate(sched)
    assert before.likely - after.likely == pytest.approx(67.0) and before.high - after.high == pytest.approx(134.0)
    # each vm-disk configuration pays a hot-plug and checks in the guest, beside ZFS provisioning and layout
    guest = next(t for t in tests if t.target.kind == "vm-disk" and not t.is_fill)
    host = next(t for t in tests if t.target.kind == "zvol")
    assert est.config_cost(guest)[1] - est.config_cost(host)[1] == pytest.approx(p.guest_config_s) == 12.0


def test_an_unwritten_layout_costs_no_layout_time() -> None:
    """compression-cache's unwritten file is a sparse file (a zvol: discarded): nothing is written before its
    runs, so its configuration costs provisioning only; the written file pays its size at the layout rate."""
    spec = load_spec(resolve_campaign("compression-cache"), "quick")
    est = Estimator(spec, priors_for(True))
    by_layout = {t.params["layout"]: t for t in expand(spec)}
    holes, written = by_layout["unwritten"], by_layout["compressible:50%"]
    p = est.priors
    assert est.config_cost(holes)[1] == pytest.approx(p.config_s)
    assert est.config_cost(written)[1] == pytest.approx(p.config_s + written.target.size / p.layout_bytes_per_s)


def test_progress_in_a_log_file_is_plain_lines_each_with_its_time() -> None:
    """Issue 18 item 6: read later from a log file, every line says when it was written; nothing is rewritten."""
    import io
    import re

    from tankbench.progress import Progress

    out = io.StringIO()
    p = Progress(2, stream=out)
    p.start(1, 2, 1, "file-a-read-4k", "run 1/1", 5.0)
    p.finish("done", "100 IOPS")
    p.note("host: lab\nsecond line")
    lines = out.getvalue().splitlines()
    assert len(lines) == 4 and "\r" not in out.getvalue() and "\033" not in out.getvalue()
    assert all(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ", line) for line in lines), lines
    assert lines[1].endswith("    done: 100 IOPS") and lines[3].endswith(" second line")


def test_a_fill_is_priced_by_its_room_not_by_runtime_and_lays_nothing_out() -> None:
    """A fill test writes its own disk until the pool is full and reads it back: its configuration lays out
    nothing, and its run takes ~3x the room at the layout rate (a 40 MiB room: 22-35 s in the lab), not runtime."""
    spec = load_spec(resolve_campaign("zvol-vs-qcow2"), "quick")
    tests = expand(spec)
    est = Estimator(spec, priors_for(True))
    fill = next(t for t in tests if t.is_fill)
    fio = next(t for t in tests if t.target.kind == "vm-disk" and not t.is_fill)
    p = est.priors
    assert est.config_cost(fill)[1] == pytest.approx(p.config_s + p.guest_config_s)
    assert est.config_cost(fio)[1] == pytest.approx(
        p.config_s + p.guest_config_s + fio.target.size / p.layout_bytes_per_s
    )
    room_s = 3 * spec.fill_room / p.layout_bytes_per_s
    assert room_s > fill.expected_s and est.run_time(fill) == pytest.approx((room_s, room_s, room_s))


def test_runs_are_priced_by_class_reads_sync_direct_and_buffered_writes() -> None:
    """zvol-issues' matrix by class: sync writes dominate; fio's sync options under sync=disabled are ignored by
    ZFS (buffered or direct writes then), sync=always makes every write a sync write."""
    spec = load_spec(resolve_campaign("zvol-issues"))
    counts = Counter("copy" if t.is_copy else run_class(t) for t in expand(spec))
    assert counts == {"sync write": 1512, "buffered write": 492, "direct write": 492, "read": 134, "copy": 73}
    assert classify({"rw": "randread", "sync_mode": "async"}, {}) == "read"
    assert classify({"rw": "write", "io": "direct", "sync_mode": "fsync", "sync": "disabled"}, {}) == "direct write"
    assert classify({"rw": "write", "io": "buffered", "sync_mode": "async"}, {"sync": "always"}) == "sync write"
    assert classify({"rw": "randwrite", "io": "buffered", "sync_mode": "async"}, {}) == "buffered write"


def test_steady_state_ends_a_run_where_the_lab_measured_it_per_class() -> None:
    """Before the journal has a run of the kind, a timed run is priced at its class's fraction of the window
    between ramp + ss_dur and ramp + runtime (bench/ss-replay at the real window: writes never settle)."""
    spec = load_spec(resolve_campaign("zvol-issues"))
    est = Estimator(spec, priors_for(False))
    by_class = {}
    for t in expand(spec):
        if not t.is_copy and t.target.kind == "zvol":
            by_class.setdefault(run_class(t), t)
    s = spec.schedule
    for cls, t in by_class.items():
        low, likely, high = est.run_time(t)
        assert low == spec.ramp + s.ss_ramp_s + s.ss_dur_s and high == t.expected_s
        assert likely == pytest.approx(low + SS_FRACTION[cls] * (high - low)), cls
    # at the real window no write of any class settled (bench/ss-replay), and one read in four did
    assert SS_FRACTION["read"] < SS_FRACTION["sync write"] == SS_FRACTION["direct write"] == 1.0
    assert SS_FRACTION["buffered write"] == 1.0
    text = describe_priors(est.priors)
    assert all(f"({c}s)" in text for c in RUN_CLASSES) and "halfway" not in text


def test_a_slope_rule_is_priced_by_where_slope_rules_ended_the_labs_full_runs() -> None:
    """`ss = "iops_slope:…"` ends ZFS writes far earlier than a deviation rule (bench/ss-replay): priced by its own
    table (SS_FRACTION_SLOPE), and plan's priors say which rule they are for."""
    text = Path(resolve_campaign("zvol-issues")).read_text().replace('ss = "iops:5%"', 'ss = "iops_slope:0.1%"')
    spec = parse_spec(text, "zvol-issues.toml")
    est = Estimator(spec, priors_for(False))
    s = spec.schedule
    seen = set()
    for t in expand(spec):
        if t.is_copy or run_class(t) in seen:
            continue
        seen.add(run_class(t))
        low, likely, high = est.run_time(t)
        assert low == spec.ramp + s.ss_ramp_s + s.ss_dur_s and high == t.expected_s
        assert likely == pytest.approx(low + SS_FRACTION_SLOPE[run_class(t)] * (high - low)), run_class(t)
    assert seen == set(RUN_CLASSES)
    assert all(SS_FRACTION_SLOPE[c] < SS_FRACTION[c] for c in RUN_CLASSES if c != "read")
    assert "(a slope rule)" in describe_priors(est.priors, ss=s.ss) and "(a deviation rule)" in describe_priors(
        est.priors
    )
    slope_h = estimate(spec, expand(spec), "/nonexistent/journal.sqlite", real_host=True)[0].likely / 3600
    preset = load_spec(resolve_campaign("zvol-issues"))
    preset_h = estimate(preset, expand(preset), "/nonexistent/journal.sqlite", real_host=True)[0].likely / 3600
    assert slope_h < 0.8 * preset_h, (slope_h, preset_h)


def test_which_lever_buys_what_on_zvol_issues_as_the_docs_table_says() -> None:
    """docs/schedule.md's table: the preset's writes run to the cap, so only a shorter window with fewer
    repeats brings the real-host estimate under 48 h; each --set row is cheaper than the one before."""
    text = Path(resolve_campaign("zvol-issues")).read_text()

    def likely_h(*subs: tuple[str, str]) -> float:
        t = text
        for old, new in subs:
            assert old in t
            t = t.replace(old, new)
        spec = parse_spec(t, "zvol-issues.toml")
        return estimate(spec, expand(spec), "/nonexistent/journal.sqlite", real_host=True)[0].likely / 3600

    max2 = ("max = 3, settle", "max = 2, settle")
    short = [('runtime = "90s"', 'runtime = "30s"'), ('ss_dur = "30s"', 'ss_dur = "20s"')]
    preset, window, both = likely_h(), likely_h(*short), likely_h(*short, max2)
    assert preset > likely_h(max2) > likely_h(short[0]) > window > both
    assert preset > 48 >= both, (preset, window, both)


def test_the_lab_measurement_campaign_is_zvol_issues_machine_and_axes_scaled() -> None:
    """bench/zvol-issues-window.toml, which the SS_FRACTION priors were measured with: the preset's modelled disks,
    properties and pool shape, every class of run on three configurations, the window 7.5x shorter."""
    bench = load_spec(str(Path(__file__).parents[2] / "bench" / "zvol-issues-window.toml"))
    preset = load_spec(resolve_campaign("zvol-issues"))
    tests = expand(bench)
    assert len(tests) == 30 and {run_class(t) for t in tests} == set(RUN_CLASSES)
    assert Counter(run_class(t) for t in tests) == {"read": 6, "direct write": 6, "buffered write": 6, "sync write": 12}
    b, p = bench.host.lab_machine, preset.host.lab_machine
    assert (b.disk_model, b.slog_model) == (p.disk_model, p.slog_model) == ("hdd", "ssd")
    fs = next(t for t in tests if t.target.kind == "dataset")
    assert dict(zfs_options(fs.target).props) == {"compression": "lz4", "encryption": "aes-256-gcm"}
    assert bench.schedule.ss == preset.schedule.ss == "iops:5%"
    assert preset.runtime / bench.runtime == 7.5 and preset.schedule.ss_dur_s / bench.schedule.ss_dur_s == 7.5


def test_the_real_window_campaign_is_zvol_issues_machine_at_its_own_window() -> None:
    """bench/ss-window.toml, which SS_FRACTION and SS_FRACTION_SLOPE rest on: the preset's modelled disks, pool shape
    and properties, its ramp and runtime unscaled, no steady-state rule (every run lasts the window), fio's IOPS
    logged each second, every class of run."""
    bench = load_spec(str(Path(__file__).parents[2] / "bench" / "ss-window.toml"))
    preset = load_spec(resolve_campaign("zvol-issues"))
    tests = expand(bench)
    assert Counter(run_class(t) for t in tests) == {"read": 4, "direct write": 4, "buffered write": 4, "sync write": 8}
    b, p = bench.host.lab_machine, preset.host.lab_machine
    assert (b.disk_model, b.slog_model) == (p.disk_model, p.slog_model) == ("hdd", "ssd")
    assert (bench.ramp, bench.runtime) == (preset.ramp, preset.runtime) == (10.0, 90.0)
    assert bench.schedule.ss == "" and preset.schedule.ss == "iops:5%"
    assert dict(bench.fio) == {"write_iops_log": "ivl", "write_bw_log": "ivl", "log_avg_msec": 1000}
    assert all(dict(zfs_options(t.target).props) == {"compression": "lz4", "encryption": "aes-256-gcm"} for t in tests)
