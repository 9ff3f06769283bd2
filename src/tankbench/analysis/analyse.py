"""One call from a journal to every conclusion the exporters show."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tankbench.analysis.cases import Dataset, campaign_spec_text, load_dataset
from tankbench.analysis.checks import validity_warnings
from tankbench.analysis.leaderboard import axis_comparisons, case_metrics, condemned, leaderboards
from tankbench.analysis.result import Analysis, Context
from tankbench.analysis.sections import registry
from tankbench.analysis.select import Where, select
from tankbench.analysis.settings import Settings, parse_settings
from tankbench.errors import UserError
from tankbench.journal.db import Journal
from tankbench.metrics import ALIASES, RANKABLE, resolve

RANK_BY = ("auto", *RANKABLE)


def check_rank_by(rank_by: str, option: str = "--rank-by") -> str:
    """`auto` or a rankable registry key (aliases such as `corrected` accepted); UserError naming the `option` the
    value came from otherwise."""
    key = "auto" if rank_by == "auto" else resolve(rank_by)
    if key not in RANK_BY:
        raise UserError(
            f"unknown {option} {rank_by!r}", f"use one of: {', '.join(RANK_BY)} (aliases: {', '.join(ALIASES)})"
        )
    return key


def analyse_dataset(
    ds: Dataset,
    rank_by: str = "auto",
    mix: tuple[tuple[str, float], ...] | None = None,
    selection: tuple[str, ...] = (),
    journal: Journal | None = None,
) -> Analysis:
    """Analyse a loaded dataset: the leaderboards, then every report section's data (analysis/sections/);
    `mix` overrides the campaign's [mix]; with the `journal`, the sections that read single runs have theirs."""
    key = check_rank_by(rank_by)
    per_case = case_metrics(ds, key)
    warns = validity_warnings(ds)
    bad = condemned(warns)  # tests with an error-level warning of their own: never first place, winner or best
    core = Analysis(
        dataset=ds,
        rank_by=key,
        leaderboards=leaderboards(ds, key, per_case, bad),
        comparisons=axis_comparisons(ds, per_case, bad),
        warnings=warns,
        selection=selection,
    )
    specs = registry()

    def again(sub: Dataset, sub_journal: Journal | None) -> Analysis:  # a part of the journal (a fleet's host)
        return analyse_dataset(sub, key, mix, (), sub_journal)

    core = replace(core, options={"mix": mix, "per_case": per_case, "analyse": again}, sections=specs)
    ctx = Context(core, journal, core.options, {s.name: s for s in specs})
    return replace(core, parts={s.name: ctx.part(s) for s in specs})


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
