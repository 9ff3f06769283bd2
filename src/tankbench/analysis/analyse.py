"""One call from a journal to every conclusion the exporters show."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tankbench.analysis.advice import GoalResult, MixAdvice, Recommendation, evaluate_goal, mix_advice, recommendations
from tankbench.analysis.cases import Dataset, campaign_spec_text, load_dataset
from tankbench.analysis.checks import Warning, emulation_layers, validity_warnings
from tankbench.analysis.claims import Verdict, verdicts
from tankbench.analysis.clients import ClientRow
from tankbench.analysis.crashes import CrashRow, crash_advice, crash_rows
from tankbench.analysis.figures import Figure, figures, shade_heatmaps
from tankbench.analysis.fill import FillRow, fill_rows
from tankbench.analysis.guest import GuestTable, guest_tables
from tankbench.analysis.leaderboard import AxisComparison, Leaderboard, axis_comparisons, case_metrics, leaderboards
from tankbench.analysis.select import Where, select
from tankbench.analysis.settings import Settings, parse_settings
from tankbench.errors import UserError
from tankbench.journal.db import Journal
from tankbench.metrics import ALIASES, RANKABLE, resolve

RANK_BY = ("auto", *RANKABLE)


@dataclass(frozen=True)
class Analysis:
    """The whole result: data, leaderboards, comparisons, warnings, advice. Exporters only read this."""

    dataset: Dataset
    rank_by: str
    leaderboards: tuple[Leaderboard, ...]
    comparisons: tuple[AxisComparison, ...]
    warnings: tuple[Warning, ...]
    recommendations: tuple[Recommendation, ...]
    mix: MixAdvice | None
    goals: tuple[GoalResult, ...]
    figures: tuple[Figure, ...] = ()
    selection: tuple[str, ...] = ()  # --group-by / --where as given, shown on every output
    guests: tuple[GuestTable, ...] = ()  # vm-disk configurations beside the host, per workload (seeds 001/003)
    fill: tuple[FillRow, ...] = ()  # the pool-full experiment's runs (workload = "fill"), never ranked
    #: single runs' detail (analysis.detail.with_run_detail): {test id: (runs.id, 1 Hz samples)} and
    #: {test id: {direction: latency percentiles in ms}} of the last measured run of a few chosen tests
    series: Mapping[str, tuple[int, Mapping[str, Any]]] = field(default_factory=dict)
    percentiles: Mapping[str, Mapping[str, list[float]]] = field(default_factory=dict)
    #: tests whose runs crashed the host (analysis/crashes.py)
    crashes: tuple[CrashRow, ...] = ()
    #: tests whose load came from client hosts, summarised (analysis/clients.py; with_run_detail reads them)
    clients: tuple[ClientRow, ...] = ()
    #: each claim's verdict ([[claim]]s, then [[goal]]s as claims): shown first in every output
    claims: tuple[Verdict, ...] = ()

    @property
    def emulated(self) -> bool:
        return any(w.code == "emulated" for w in self.warnings)

    @property
    def virtualisation(self) -> tuple[str, ...]:
        """Each layer's accelerator, per fingerprint (host, and the test guest where fio ran in one)."""
        return emulation_layers(fp.data for fp in self.dataset.fingerprints.values())


def condemned(warnings: Sequence[Warning]) -> frozenset[str]:
    """The tests an error-level warning names (its own, not a campaign-wide one such as `emulated`, which names no
    test): no recommendation, badge or colour may name them."""
    return frozenset(tid for w in warnings if w.severity == "error" for tid in w.test_ids)


def check_rank_by(rank_by: str) -> str:
    """`auto` or a rankable registry key (aliases such as `corrected` accepted); UserError otherwise."""
    key = "auto" if rank_by == "auto" else resolve(rank_by)
    if key not in RANK_BY:
        raise UserError(
            f"unknown --rank-by {rank_by!r}", f"use one of: {', '.join(RANK_BY)} (aliases: {', '.join(ALIASES)})"
        )
    return key


def _mix_metric(boards: Sequence[Leaderboard], weights: Sequence[tuple[str, float]], key: str) -> str:
    """The mix adds cases up, so it needs one figure: durable when any case of the mix ranks by it (auto)."""
    if key != "auto":
        return key
    names = {c for c, _ in weights}
    return "durable_mibs" if any(lb.metric == "durable_mibs" for lb in boards if lb.case in names) else "mibs"


def analyse_dataset(
    ds: Dataset,
    rank_by: str = "auto",
    mix: tuple[tuple[str, float], ...] | None = None,
    selection: tuple[str, ...] = (),
) -> Analysis:
    """Analyse a loaded dataset; `mix` overrides the campaign's [mix]."""
    key = check_rank_by(rank_by)
    per_case = case_metrics(ds, key)
    warns = validity_warnings(ds)
    bad = condemned(warns)
    boards = leaderboards(ds, key, per_case, bad)
    comps = axis_comparisons(ds, per_case, bad)
    late = any(w.code == "timing-issue" for w in warns)
    weights = mix if mix is not None else ds.settings.mix
    crashed = crash_rows(ds)
    avoid = tuple(Recommendation("crash", text, basis) for text, basis in crash_advice(crashed))
    return Analysis(
        ds,
        key,
        boards,
        comps,
        warns,
        avoid + recommendations(ds, boards, comps, late),
        mix_advice(ds, weights, _mix_metric(boards, weights, key), bad) if weights else None,
        tuple(evaluate_goal(ds, g, bad) for g in ds.settings.goals),
        shade_heatmaps(figures(ds, per_case), {lb.case for lb in boards if lb.shade}),
        selection,
        guest_tables(ds, per_case),
        fill_rows(ds),
        crashes=crashed,
        claims=verdicts(ds, warns),
    )


def open_journal(path: str) -> Journal:
    """Open an existing journal for reading (UserError when missing)."""
    return Journal.open_readonly(path)


def load(
    journal: Journal,
    settings: Settings | None = None,
    group_by: Sequence[str] | None = None,
    where: Sequence[Where] = (),
) -> Dataset:
    """Load the dataset with the settings of the journal's campaign (or the given ones), regrouped by `group_by`
    and filtered by `where` when given."""
    if settings is None:
        settings = parse_settings(campaign_spec_text(journal), f"{journal.path} (campaign)")
    ds = load_dataset(journal, settings)
    if not ds.tests or not any(t.runs for t in ds.tests):
        raise UserError(f"{journal.path}: the journal has no runs", "run a campaign first: tankbench run CAMPAIGN.toml")
    return select(ds, group_by, where) if group_by or where else ds


def analyse_journal(path: str, rank_by: str = "auto", mix: tuple[tuple[str, float], ...] | None = None) -> Analysis:
    """Open, load and analyse a journal file."""
    check_rank_by(rank_by)
    with open_journal(path) as j:
        ds = load(j)
    return analyse_dataset(ds, rank_by, mix)
