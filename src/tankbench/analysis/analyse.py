"""One call from a journal to every conclusion the exporters show."""

from __future__ import annotations

from dataclasses import dataclass

from tankbench.analysis.advice import GoalResult, MixAdvice, Recommendation, evaluate_goal, mix_advice, recommendations
from tankbench.analysis.cases import METRICS, Dataset, campaign_spec_text, load_dataset
from tankbench.analysis.checks import Warning, validity_warnings
from tankbench.analysis.leaderboard import AxisComparison, Leaderboard, axis_comparisons, leaderboards
from tankbench.analysis.settings import Settings, parse_settings
from tankbench.errors import UserError
from tankbench.journal.db import Journal

RANK_BY = tuple(METRICS)


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

    @property
    def emulated(self) -> bool:
        return any(w.code == "emulated" for w in self.warnings)


def check_rank_by(rank_by: str) -> str:
    if rank_by not in RANK_BY:
        raise UserError(f"unknown --rank-by {rank_by!r}", f"use one of: {', '.join(RANK_BY)}")
    return rank_by


def analyse_dataset(ds: Dataset, rank_by: str = "mibs",
                    mix: tuple[tuple[str, float], ...] | None = None) -> Analysis:
    """Analyse a loaded dataset; `mix` overrides the campaign's [mix]."""
    key = check_rank_by(rank_by)
    boards = leaderboards(ds, key)
    comps = axis_comparisons(ds, key)
    warns = validity_warnings(ds)
    late = any(w.code == "timing-issue" for w in warns)
    weights = mix if mix is not None else ds.settings.mix
    mix_key = key if key != "p99" else "p99"
    return Analysis(ds, key, boards, comps, warns, recommendations(ds, boards, comps, late),
                    mix_advice(ds, weights, mix_key) if weights else None,
                    tuple(evaluate_goal(ds, g) for g in ds.settings.goals))


def open_journal(path: str) -> Journal:
    """Open an existing journal for reading (UserError when missing)."""
    return Journal.open_readonly(path)


def load(journal: Journal, settings: Settings | None = None) -> Dataset:
    """Load the dataset with the settings of the journal's campaign (or the given ones)."""
    if settings is None:
        settings = parse_settings(campaign_spec_text(journal), f"{journal.path} (campaign)")
    ds = load_dataset(journal, settings)
    if not ds.tests or not any(t.runs for t in ds.tests):
        raise UserError(f"{journal.path}: the journal has no runs", "run a campaign first: tankbench run CAMPAIGN.toml")
    return ds


def analyse_journal(path: str, rank_by: str = "mibs",
                    mix: tuple[tuple[str, float], ...] | None = None) -> Analysis:
    """Open, load and analyse a journal file."""
    check_rank_by(rank_by)
    with open_journal(path) as j:
        ds = load(j)
    return analyse_dataset(ds, rank_by, mix)
