"""Decide, then stop (`repeats.decide`, and `tankbench check`): a test runs again only while a claim it belongs to,
or its place in its leaderboard, is undecided at the campaign's error rate; up to repeats.max.

The sequential test is a *repeated confidence interval* with Pocock's constant boundary (Jennison and Turnbull,
"Interim analyses: the repeated confidence interval approach", JRSS B 51, 1989; Pocock, Biometrika 64, 1977): the
runs are looked at after every round, from repeats.min (one run has no noise of its own: it borrows its claim's pooled
noise, measured on a sample of the claim's tests when it has many: waiting_and_held) to repeats.max, and each
look's interval is taken at the nominal level that makes the chance of *any* look's interval missing the true ratio
equal to the stated error rate. The nominal level is computed for the campaign's own looks (information growing
as n = min..max runs) by the recursive integration of Armitage, McPherson and Rowe, once per campaign; for equally
spaced looks it gives Pocock's published constants (2.178 for 2 looks, 2.413 for 5, 2.555 for 10). A claim (or an order) decided at that level stays decided; the report's 95 % interval then decides it
too, being narrower. Why this test and not another: docs/schedule.md, "Decide, then stop".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from tankbench.campaign.claims import Claim, axes_of_test, pairs
from tankbench.campaign.claims import covered as covered_rows
from tankbench.campaign.judge import TestValues, judge_constant, judge_pairs
from tankbench.campaign.schema import Design, Schedule, Spec
from tankbench.model import Test, case_name

#: beyond this many looks the boundary is Bonferroni's (alpha / looks): conservative, and cheap to compute
MAX_EXACT_LOOKS = 30


@lru_cache(maxsize=64)
def nominal_level(alpha: float, first: int, last: int) -> float:
    """The confidence level each look uses so that looks after first..last runs keep the overall error at alpha
    (Pocock's constant boundary for those information times); 1 - alpha with a single look."""
    looks = list(range(max(first, 2), max(last, 2) + 1))
    if len(looks) <= 1:
        return 1.0 - alpha
    if len(looks) > MAX_EXACT_LOOKS:
        return 1.0 - alpha / len(looks)
    c = pocock_constant(alpha, tuple(looks))
    from scipy.special import ndtr

    return float(1.0 - 2.0 * (1.0 - ndtr(c)))


def stay_probability(c: float, looks: tuple[int, ...], points: int = 601) -> float:
    """P(|Z_k| <= c at every look) for Z_k = S_n / sqrt(n), S a sum of iid standard normals observed after
    looks[k] runs: the recursive numerical integration of Armitage, McPherson and Rowe (JRSS A 132, 1969) on a
    grid, a density carried from one look to the next through the normal increments between them."""
    import numpy as np
    from scipy.special import ndtr

    half = c * math.sqrt(looks[0])
    x = np.linspace(-half, half, points)
    sd = math.sqrt(looks[0])
    dens: Any = np.exp(-0.5 * (x / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
    for prev, n in zip(looks, looks[1:]):
        step = math.sqrt(n - prev)
        half = c * math.sqrt(n)
        y = np.linspace(-half, half, points)
        kernel = np.exp(-0.5 * ((y[:, None] - x[None, :]) / step) ** 2) / (step * math.sqrt(2 * math.pi))
        dens = np.trapezoid(kernel * dens[None, :], x, axis=1)
        x = y
    if len(looks) == 1:
        return float(ndtr(c) - ndtr(-c))
    return float(np.trapezoid(dens, x))


def pocock_constant(alpha: float, looks: tuple[int, ...]) -> float:
    """c with P(max_k |Z_k| > c) = alpha for Z_k the standardised mean after looks[k] runs."""
    from scipy.optimize import brentq
    from scipy.special import ndtri

    lo = float(ndtri(1 - alpha / 2))  # one look: the fixed-sample quantile
    hi = float(ndtri(1 - alpha / (2 * len(looks))))  # Bonferroni over the looks: never exceeded
    return float(brentq(lambda c: 1.0 - stay_probability(c, looks) - alpha, lo, hi, xtol=1e-4))


@dataclass(frozen=True)
class ClaimScope:
    """A claim and the tests (ids) that decide it: its matched pairs, or for a constant claim its tests."""

    claim: Claim
    pairs: tuple[tuple[str, str], ...]
    tests: tuple[str, ...]


def scopes(claims: Sequence[Claim], tests: Sequence[Test], case_keys: tuple[str, ...]) -> list[ClaimScope]:
    """Which tests decide each claim (fill tests decide none)."""
    live = [t for t in tests if not t.is_fill]
    rows = [(axes_of_test(t), case_name(t.params, case_keys)) for t in live]
    out = []
    for c in claims:
        idx = covered_rows(c, rows)
        prs = tuple((live[a].id, live[b].id) for a, b in pairs(c, rows)) if c.relative else ()
        out.append(ClaimScope(c, prs, tuple(live[i].id for i in idx)))
    return out


def claim_tests(claims: Sequence[Claim], tests: Sequence[Test], case_keys: tuple[str, ...]) -> set[str]:
    """The ids of every test some claim is judged on: what `tankbench check` runs."""
    return {tid for s in scopes(claims, tests, case_keys) for tid in s.tests}


Values = Callable[[str, str], tuple[float, ...]]  # (test id, metric) -> measured values


def judge_scope(scope: ClaimScope, values: Values, numbers: Mapping[str, int], level: float) -> str:
    """The claim's verdict at `level` from the runs so far (holds / does not hold / undecided)."""
    c = scope.claim

    def tv(tid: str) -> TestValues:
        return TestValues(tid, numbers.get(tid, 0), values(tid, c.metric))

    if c.relative:
        return judge_pairs(c.expect, [(tv(a), tv(b)) for a, b in scope.pairs], level).verdict
    return judge_constant(c.expect, c.metric, [tv(t) for t in scope.tests], level).verdict


def claim_verdicts(
    scopes_: Sequence[ClaimScope], values: Values, numbers: Mapping[str, int], level: float
) -> dict[str, str]:
    """{claim name: its verdict at `level`} from the runs so far."""
    return {s.claim.name: judge_scope(s, values, numbers, level) for s in scopes_}


#: a claim over more tests than this measures its run-to-run noise on a sample: this many of its tests run a second
#: time (the pooled noise then has this many degrees of freedom), the rest once, until the claim needs more
NOISE_DF = 6


def noise_sample(candidates: Sequence[str], need: int) -> list[str]:
    """`need` tests spread evenly over `candidates` (plan order): the sample that measures a claim's noise."""
    k = len(candidates)
    return [candidates[(i * k) // need] for i in range(need)] if 0 < need <= k else list(candidates)


def waiting_and_held(
    scopes_: Sequence[ClaimScope],
    verdicts: Mapping[str, str],
    counts: Callable[[str, str], int],
    runnable: Collection[str],
) -> tuple[dict[str, list[str]], set[str]]:
    """Which tests run again for an undecided claim ({test id: its undecided claims}), and which wait (held) while
    a sample of the claim's tests measures the noise: a claim over more than NOISE_DF tests whose measured values
    give fewer than NOISE_DF degrees of freedom of run-to-run noise re-runs only a sample of its once-measured
    tests, spread over them, until the pooled noise has NOISE_DF (the judge lends it to the tests with one run);
    then, if the claim is still undecided, all of them. `counts(test id, metric)` is a test's measured values;
    `runnable` the tests that may run again (active, below repeats.max)."""
    waiting: dict[str, list[str]] = {}
    held: set[str] = set()
    for s in scopes_:
        if verdicts.get(s.claim.name) != "undecided":
            continue
        n = {t: counts(t, s.claim.metric) for t in s.tests}
        df = sum(max(0, v - 1) for v in n.values())
        run_again = list(s.tests)
        if len(s.tests) > NOISE_DF and df < NOISE_DF:
            single = [t for t in s.tests if n[t] == 1 and t in runnable]
            if len(single) >= NOISE_DF - df:
                # the claim's own sample first (a resumed campaign goes on with it), others spread over the rest
                first = [t for t in noise_sample(list(s.tests), NOISE_DF) if t in single]
                rest = [t for t in single if t not in first]
                pick = (first + noise_sample(rest, max(0, NOISE_DF - df - len(first))))[: NOISE_DF - df]
                run_again = pick + [t for t in s.tests if n[t] == 0]
                held |= set(s.tests) - set(run_again)
        for tid in run_again:
            waiting.setdefault(tid, []).append(s.claim.name)
    return waiting, held - set(waiting)


def decided_evidence(names: Sequence[str], verdicts: Mapping[str, str], level: float) -> dict[str, Any]:
    """What a `decided` decision journals: the test's claims and their verdicts, and the nominal level."""
    return {"claims": {n: verdicts.get(n, "") for n in names}, "level": level}


#: `check`'s default error rate, and the most repeats it allows a test by default (two measure the noise, a third
#: narrows it)
CHECK_ALPHA = 0.05
CHECK_MAX = 3


def check_schedule(schedule: Schedule, alpha: float = CHECK_ALPHA, rmax: int | None = None) -> Schedule:
    """The schedule `tankbench check` runs a campaign's claims with: decide the claims alone at `alpha`, one run of
    each test at least (a claim's noise from a second run of all its tests, or of a sample of them when it has
    more than NOISE_DF: waiting_and_held), up to the campaign's repeats.max (at least CHECK_MAX) or `rmax`."""
    top = rmax if rmax is not None else max(schedule.repeats_max, CHECK_MAX)
    return replace(
        schedule,
        repeats_min=1,
        repeats_max=top,
        ci=None,
        settle=None,
        racing=False,
        decide=alpha,
        decide_orders=False,
    )


def check_spec(spec: Spec, tests: Sequence[Test], alpha: float = CHECK_ALPHA, rmax: int | None = None) -> Spec:
    """The campaign as `check` runs it: only the tests of the matrix (`tests`) that decide its claims, whatever its
    design chose, with check_schedule."""
    ids = claim_tests(spec.report.claims, tests, spec.report.case_keys)
    return replace(spec, schedule=check_schedule(spec.schedule, alpha, rmax), only=frozenset(ids), design=Design())
