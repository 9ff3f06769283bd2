"""Time left: per-run, per-configuration and cooldown costs from priors, learned from the journal."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from tankbench.analysis.stats import t_quantile
from tankbench.campaign.parse import Spec
from tankbench.model import Run, Test
from tankbench.schedule.configs import config_key
from tankbench.schedule.scheduler import Scheduler
from tankbench.targets import kind_of


@dataclass(frozen=True)
class Estimate:
    """Seconds left: at best, most likely (from what the journal taught so far), at worst."""

    low: float
    likely: float
    high: float


#: the classes a run's costs follow (run_class): what fio does decides whether steady state comes early and
#: whether the run leaves dirty data to drain
RUN_CLASSES = ("read", "direct write", "buffered write", "sync write")

#: where steady state (`ss`) ends a run in the window between ramp + ss_ramp + ss_dur (0) and ramp + runtime (1),
#: per class, for a deviation rule (`iops:5%`): measured in the lab on zvol-issues' own machine (hdd-modelled data
#: disk, ssd-modelled log, lz4 + aes-256-gcm). At its real window (ramp 10 s, iops:5 % over 30 s, runtime 90 s;
#: bench/ss-replay, 2026-11-25, 20 full-length runs replayed with fio's own computation): no write of any class
#: attained it (direct 0/4, buffered 0/4, sync 0/8: ZFS writes come in txg bursts and its write throttle stalls
#: them, for 10 s and more on a zvol, so per-second IOPS are never all within 5 %), and reads 1 of 4 (mean 0.86: at
#: an HDD's ~40 IOPS, counting noise alone is ~16 % per second). The earlier scaled window (ramp 1 s, ss_dur 4 s,
#: runtime 12 s; bench/zvol-issues-window) had reads settle in 5 and 4 of 6 runs at 0.52 and 0.48, writes almost
#: never (sync 6 of 24 at 0.91 and 0.84): its few samples per window made 5 % easier to meet, so the real window
#: is the price. The lab's CPU is emulated (TCG) and noisier than a real host's; a real host's journal replaces these
#: per target kind as soon as its runs come in.
SS_FRACTION: Mapping[str, float] = MappingProxyType(
    {"read": 0.85, "direct write": 1.0, "buffered write": 1.0, "sync write": 1.0}
)

#: the same for a slope rule (`iops_slope:`, `bw_slope:`: the rate no longer drifts, however much its seconds
#: spread), which ZFS writes meet far earlier: the same 20 runs (bench/ss-replay) at the strictest limit tried,
#: 0.1 % per second over 30 s, ended reads at 0.12 (4 of 4), direct writes at 0.39 (3 of 4), buffered writes at 0.45
#: (3 of 4) and sync writes at 0.09 (8 of 8). Ending there misstated a run's result against its full window by up to
#: 1.7 % (reads), 7.2 % (direct), 19.7 % (buffered) and 7.1 % (sync writes): the rate of ZFS writes drifts through
#: the window (docs/schedule.md, "Ending ZFS writes early"), so the presets keep the deviation rule.
SS_FRACTION_SLOPE: Mapping[str, float] = MappingProxyType(
    {"read": 0.12, "direct write": 0.4, "buffered write": 0.45, "sync write": 0.1}
)


def ss_fractions(ss: str, priors: Priors) -> Mapping[str, float]:
    """Where a steady-state rule ends each class's runs (priors before the journal has runs): a slope rule's or a
    deviation rule's (`iops:`, `bw:`) table."""
    return priors.ss_fraction_slope if "_slope:" in ss else priors.ss_fraction


def classify(params: Mapping[str, object], props: Mapping[str, str]) -> str:
    """A run's class from its fio axes and its target's properties: reads; sync writes (fio's sync/fsync/
    fdatasync, or sync=always, unless sync=disabled makes ZFS ignore them); direct writes (O_DIRECT, async);
    buffered writes (async, through the page cache / ARC)."""
    if str(params.get("rw", "")) in ("read", "randread"):
        return "read"
    sync = str(params.get("sync", props.get("sync", "")))  # a ZFS axis, or a property of the target
    if sync != "disabled" and (str(params.get("sync_mode", "async")) != "async" or sync == "always"):
        return "sync write"
    return "direct write" if params.get("io") == "direct" else "buffered write"


def run_class(test: Test) -> str:
    """The class (RUN_CLASSES) a test's runs are priced by."""
    return classify(test.params, kind_of(test.target).properties(test.target))


#: `repeats.decide`'s prior: the claims' ratios sit this far from their expectations (20 %) until the journal shows
#: how many runs its tests took
DECIDE_DISTANCE = 0.2


@dataclass(frozen=True)
class Priors:
    """Costs assumed before the journal has measured them (seconds)."""

    run_overhead_s: float = 4.0  # agent start, samplers, drain, bookkeeping per run
    config_s: float = 15.0  # create dataset/zvol, add/remove a SLOG, settle udev
    layout_bytes_per_s: float = 100 * 2**20  # laying out a test file (seed 000's HDD wrote ~140 MiB/s)
    #: a typical automatic cooldown before one was measured: the lab's auto cooldowns (docs/schedule.md, "In the
    #: lab") all ended on `disks` after 3.0-3.1 s, idle_for (3 s) after the drain had synced; 4 s with a poll
    cooldown_auto_s: float = 4.0
    run_cv: float = 0.03  # run-to-run coefficient of variation assumed for the CI stopping rule
    guest_boot_s: float = 10.0  # boot a test guest (vm-disk targets), once per `run`: ~9 s under TCG, less with KVM
    guest_config_s: float = 5.0  # hot-plug a guest disk and check it in the guest (per vm-disk configuration)
    #: `repeats.settle`: where between min and max repeats a test most likely ends before the journal says: most
    #: leaderboard neighbours differ by far more than run-to-run noise, so most tests settle after their first run
    settle_spread: float = 0.15
    #: where in the window between ramp + ss_ramp + ss_dur (0) and ramp + runtime (1) steady state ends a run,
    #: per run_class (SS_FRACTION: measured in the lab); was 0.5 for every run ("halfway"), a guess
    ss_fraction: Mapping[str, float] = field(default_factory=lambda: SS_FRACTION)
    #: the same for slope rules (SS_FRACTION_SLOPE: replayed on full-length lab runs)
    ss_fraction_slope: Mapping[str, float] = field(default_factory=lambda: SS_FRACTION_SLOPE)


#: an emulated lab VM (qemu TCG), measured on tests/fixtures/journal-lab-zfs.sqlite: ~9 s per 3 s run beyond
#: fio's wall time (agent, samplers, file checks, drain), ~20 s per new dataset/zvol, layout at ~5 MiB/s; a test
#: guest inside it (nested TCG) was ready after 67 s on a quiet machine, 112-124 s at load ~2 (docs/guest.md; 311 s
#: at load ~7, measured 2026-11-24 with plan's zvol-vs-qcow2 quick form; 48 and 52 s at load 2-3 on 2026-11-25):
#: 67 s, the median of those boots. Layout: compression-cache's quick form laid out its 1G file (2:1 compressible)
#: on the lab's hdd-modelled mirror in 57 s (18 MiB/s, 2026-11-25; the old 5 MiB/s came from a journal before disk
#: models and the agent session): 16 MiB/s. A vm-disk configuration of zvol-vs-qcow2's quick form (a 64M zvol,
#: qcow2 or raw image, laid out, hot-plugged, checked in the guest) took 28-35 s from the previous run's end to its
#: first run at load 2-3: dataset/zvol and layout (15 s + 4 s) leave ~12 s for the hot-plug and the guest's checks
LAB_PRIORS = Priors(
    run_overhead_s=9.0,
    config_s=15.0,
    layout_bytes_per_s=16 * 2**20,
    cooldown_auto_s=4.0,
    guest_boot_s=67.0,
    guest_config_s=12.0,
)


def decide_repeats(rmin: int, rmax: int, alpha: float, cv: float, distance: float = DECIDE_DISTANCE) -> int:
    """Runs of each test `repeats.decide` most likely takes before the journal says: the first n from rmin whose
    interval at the sequential test's nominal level, for a claim between two tests with run-to-run noise `cv`,
    is narrower than `distance` (the ratio 20 % away from its expectation: ln 1.2); rmax when none is."""
    from tankbench.schedule.decide import nominal_level

    level = nominal_level(alpha, rmin, rmax)
    for n in range(max(rmin, 2), rmax + 1):
        if t_quantile(1 - (1 - level) / 2, 2 * n - 2) * cv * math.sqrt(2 / n) <= math.log1p(distance):
            return n
    return rmax


def likely_claim_runs(sched: Scheduler, alpha: float, cv: float, distance: float = DECIDE_DISTANCE) -> dict[str, int]:
    """Runs of each claim's test `repeats.decide` most likely takes from repeats.min = 1 (`check`): a claim over more
    than NOISE_DF tests, whose once-run tests with the noise of a NOISE_DF-test sample (t at NOISE_DF degrees of
    freedom) give an interval narrower than `distance`, takes one run of each and a second of its sample; any other
    claim decide_repeats's runs of each of its tests. A test in several claims takes the most any of them needs."""
    from tankbench.schedule.decide import NOISE_DF, noise_sample, nominal_level

    s = sched.schedule
    full = decide_repeats(s.repeats_min, s.repeats_max, alpha, cv, distance)
    level = nominal_level(alpha, s.repeats_min, s.repeats_max)
    out: dict[str, int] = {}
    for scope in sched.scopes:
        k = len(scope.tests)
        # pairs of once-run tests: the log ratio of a geometric mean over p pairs (tests shared between pairs
        # count once: at most k/2 independent pairs); a constant claim judges each test's mean alone
        p = min(len(scope.pairs), k // 2) if scope.claim.relative else 0
        width = t_quantile(1 - (1 - level) / 2, NOISE_DF) * cv * (math.sqrt(2 / p) if p else 1.0)
        runs = {t: full for t in scope.tests}
        if k > NOISE_DF and width <= math.log1p(distance) and s.repeats_min == 1:
            runs = {t: 1 for t in scope.tests} | {t: 2 for t in noise_sample(list(scope.tests), NOISE_DF)}
        for t, n in runs.items():
            out[t] = max(out.get(t, 0), min(n, s.repeats_max))
    return out


def describe_priors(p: Priors, settle: bool = False, ss: str = "iops:5%", decide: float | None = None) -> str:
    """The priors an estimate assumes, in words (plan prints them until the journal has measured the costs)."""
    fractions = ss_fractions(ss, p)
    parts = [
        f"{p.run_overhead_s:g} s per run beyond fio (agent, samplers, drain)",
        f"{p.config_s:g} s per new dataset/zvol",
        f"layout at {p.layout_bytes_per_s / 2**20:g} MiB/s",
        f"an automatic cooldown {p.cooldown_auto_s:g} s",
        f"steady state ({'a slope rule' if '_slope:' in ss else 'a deviation rule'}) ending a run at "
        + ", ".join(f"{fractions.get(c, 0.5):.0%} ({c}s)" for c in RUN_CLASSES)
        + " of the way from ramp + ss_dur to ramp + runtime",
        f"run-to-run variation {p.run_cv:.0%}",
    ]
    if settle:
        parts.append(f"tests in doubt going {p.settle_spread:.0%} of the way from min to max repeats")
    if decide is not None:
        parts.append(
            f"a claim {DECIDE_DISTANCE:.0%} away from its expectation decided once its interval (at the sequential "
            f"test's level for a {decide:.0%} error rate) is that narrow"
        )
    return "; ".join(parts)


def priors_for(emulated: bool) -> Priors:
    """Priors for a host: a lab VM under emulation is several times slower at everything but fio's clock."""
    return LAB_PRIORS if emulated else Priors()


def _mean(xs: Sequence[float], default: float) -> float:
    return math.fsum(xs) / len(xs) if xs else default


def expected_repeats(rmin: int, rmax: int, ci: float | None, cv: float) -> int:
    """Repeats the CI rule needs when runs vary with coefficient of variation `cv` (max without a CI)."""
    if ci is None:
        return rmax
    for n in range(max(2, rmin), rmax + 1):
        if t_quantile(0.975, n - 1) * cv / math.sqrt(n) <= ci:
            return n
    return rmax


def _triple(values: Sequence[float], prior: float) -> tuple[float, float, float]:
    """(low, likely, high) of a per-run cost: mean -/+ one sd once measured (at least -25 %/+50 % of the mean
    while fewer than 3 were), half/twice the prior before."""
    if not values:
        return prior * 0.5, prior, prior * 2.0
    mean = _mean(values, prior)
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    if len(values) < 3:
        sd = max(sd, 0.5 * mean)
    return max(0.0, min(mean - sd, 0.75 * mean if len(values) < 3 else mean)), mean, mean + sd


def cost_kind(test: Test) -> str:
    """Costs are learned per target kind (a zvol run costs more than a raw one), copy tests apart."""
    return test.target.kind + ("-copy" if test.is_copy else "")


class Estimator:
    """Learns per-run overhead and fio wall time, per-configuration provisioning/layout (both per target kind)
    and cooldown from journalled runs, and turns what the scheduler has left into a range. Pure: fed with
    observations, never reads the clock itself."""

    def __init__(self, spec: Spec, priors: Priors | None = None) -> None:
        self.spec = spec
        self.priors = priors or Priors()
        self.overheads: dict[str, list[float]] = {}  # seconds per run beyond fio's wall time, without cooldown
        self.config_costs: dict[str, list[float]] = {}  # seconds before the first run of a configuration
        self.walls: dict[str, list[float]] = {}  # fio wall time per measured run / (ramp + runtime)
        self.cooldowns: list[float] = []
        self.repeats_used: list[int] = []  # measured runs of tests the schedule has finished with
        self.setup_done = False  # the runner has set up the target kinds (booted the test guest): no more to pay

    # what one run costs -------------------------------------------------------------------
    def run_time(self, test: Test) -> tuple[float, float, float]:
        """(low, likely, high) fio seconds of one run: steady state can end it after ramp + ss_ramp + ss_dur."""
        s, expected = self.spec.schedule, test.expected_s
        if test.is_copy:
            expected = self.spec.copy_size / self.priors.layout_bytes_per_s
        if test.is_fill:  # not timed by runtime: the guest writes ~2x the room until the pool is full, then reads
            # it back (docs/guest.md: a 40 MiB room took 13-24 s to fill and 9-11 s to verify in the lab)
            expected = max(expected, 3 * self.spec.fill_room / self.priors.layout_bytes_per_s)
        timed = s.ss and not test.is_copy and not test.is_fill
        low = min(expected, self.spec.ramp + s.ss_ramp_s + s.ss_dur_s) if timed else expected
        walls = self.walls.get(cost_kind(test), [])
        if not walls:
            fraction = ss_fractions(s.ss, self.priors).get(run_class(test), 0.5)
            return low, low + (expected - low) * fraction, expected
        w_low, w_likely, w_high = _triple(walls, 1.0)
        return min(low, w_low * expected), w_likely * expected, max(expected, w_high * expected)

    def cooldown_bounds(self) -> tuple[float, float, float]:
        """(low, likely, high) seconds of one cooldown."""
        c = self.spec.cooldown
        if not c.active:
            return 0.0, 0.0, 0.0
        if not c.auto and c.load1 is None and c.dirty_bytes is None:
            return c.fixed_s, c.fixed_s, c.fixed_s
        likely = _mean(self.cooldowns, max(c.fixed_s, self.priors.cooldown_auto_s if c.auto else c.fixed_s))
        return c.fixed_s, min(max(likely, c.fixed_s), c.max_s + c.fixed_s), c.fixed_s + c.max_s

    def config_cost(self, test: Test) -> tuple[float, float, float]:
        """(low, likely, high) seconds to provision and lay out one configuration of the test's kind."""
        kind = kind_of(test.target)
        # copies write their own file and a fill its own disk: nothing is laid out for them
        # (nor for an unwritten layout: a sparse file or a discarded zvol, no data written)
        writes = not (test.is_copy or test.is_fill or test.params.get("layout") == "unwritten")
        layout = test.target.size / self.priors.layout_bytes_per_s if writes else 0.0
        zfs = self.priors.config_s if kind.traits.needs_pool else 0.0
        guest = self.priors.guest_config_s if kind.traits.runs_in_guest else 0.0
        return _triple(self.config_costs.get(cost_kind(test), []), layout + zfs + guest)

    def setup_cost(self, tests: Iterable[Test]) -> tuple[float, float, float]:
        """(low, likely, high) seconds before the first run of a `run`: booting a test guest when a test still
        to run needs one (each `run` boots its own, resumed or not)."""
        if not self.setup_done and any(kind_of(t.target).traits.runs_in_guest for t in tests):
            return _triple([], self.priors.guest_boot_s)
        return 0.0, 0.0, 0.0

    # learning -----------------------------------------------------------------------------
    def observe(self, run: Run, test: Test, gap_s: float, new_config: bool) -> None:
        """One finished run; `gap_s`: seconds from the previous run's end to this one's start (prepare,
        provisioning, cooldown), `new_config`: the run was the first on its configuration."""
        kind = cost_kind(test)
        cooled = float(run.checks.get("cooldown.waited_s", 0.0) or 0.0)
        if "cooldown.waited_s" in run.checks:
            self.cooldowns.append(cooled)
        total = (run.ended or run.started) - run.started
        wall = run.wall_s or 0.0
        extra = max(0.0, total - wall)
        if new_config:
            self.config_costs.setdefault(kind, []).append(max(0.0, gap_s - cooled))
        else:
            extra += max(0.0, gap_s - cooled)
        self.overheads.setdefault(kind, []).append(extra)
        if run.wall_s is not None and run.expected_s > 0 and not run.warmup:
            self.walls.setdefault(kind, []).append(run.wall_s / run.expected_s)

    def learn(self, runs: Sequence[Run], tests: Sequence[Test]) -> None:
        """Learn from journalled runs in start order."""
        by_id = {t.id: t for t in tests}
        seen: set[str] = set()
        prev_end: float | None = None
        for r in sorted(runs, key=lambda r: r.started):
            test = by_id.get(r.test_id)
            if r.status == "running" or r.ended is None or test is None:
                continue
            cfg = config_key(test)
            gap = 0.0 if prev_end is None else max(0.0, r.started - prev_end)
            if gap < 3600:  # a gap of hours is a campaign stopped and resumed later
                self.observe(r, test, gap, cfg not in seen and prev_end is not None)
            seen.add(cfg)
            prev_end = r.ended

    # the range ---------------------------------------------------------------------------
    def estimate(self, sched: Scheduler) -> Estimate:
        """Seconds left for what the scheduler has still to do: at best, likely, at worst."""
        s = self.spec.schedule
        spread = self._spread()
        per_test = (
            likely_claim_runs(sched, s.decide, self.priors.run_cv)
            if s.decide is not None and not s.decide_orders and not self.repeats_used
            else {}
        )
        cd = self.cooldown_bounds()
        total = list(self.setup_cost(st.test for group in sched.groups for st in group if not st.final))
        for group in sched.groups:
            live = [st for st in group if not st.final]
            if not live:
                continue
            if not any(st.obs for st in group):
                for i, v in enumerate(self.config_cost(group[0].test)):
                    total[i] += v
            for st in live:
                lo = max(0, s.repeats_min - st.measured)
                hi = max(0, s.repeats_max - st.measured)
                warm = 1 if sched.needs_warmup(st) else 0
                mid = lo + (hi - lo) * spread
                if st.test.id in per_test:  # check: each claim's test as its claim most likely needs
                    mid = min(hi, max(lo, per_test[st.test.id] - st.measured))
                runs = (lo + warm, mid + warm, hi + warm)
                run = self.run_time(st.test)
                over = _triple(self.overheads.get(cost_kind(st.test), []), self.priors.run_overhead_s)
                for i in range(3):
                    total[i] += runs[i] * (run[i] + over[i] + cd[i])
        low, likely, high = total
        return Estimate(low, min(max(likely, low), high), high)

    def learn_repeats(self, counts: Iterable[int]) -> None:
        """Measured runs of the tests the scheduler has finished with (stopped, maxed or dropped)."""
        self.repeats_used.extend(counts)

    def _spread(self) -> float:
        """Where between min and max repeats an adaptive test most likely ends (0..1): learned from finished
        tests; before any, where the CI rule stops for runs with the prior's coefficient of variation."""
        s = self.spec.schedule
        if not s.adaptive:
            return 0.0
        if self.repeats_used:
            used = _mean([float(n) for n in self.repeats_used], s.repeats_min)
        elif s.settle is not None:
            return self.priors.settle_spread
        elif s.decide is not None:
            used = float(decide_repeats(s.repeats_min, s.repeats_max, s.decide, self.priors.run_cv))
        else:
            used = float(expected_repeats(s.repeats_min, s.repeats_max, s.ci, self.priors.run_cv))
        return min(1.0, max(0.0, (used - s.repeats_min) / (s.repeats_max - s.repeats_min)))
