"""The figures a journal's factors are fitted to when there is no report's Analysis at hand (`tankbench refine`,
bench/screening): the journal analysed as `tankbench report` would (rank_by auto), so the refine and the report
rank by the same figure. Apart from analysis/factors.py because the analysis imports the report's sections."""

from __future__ import annotations

from tankbench.analysis.analyse import analyse_dataset, load
from tankbench.analysis.factors import Measure, measure_of
from tankbench.journal.db import Journal


def journal_measure(journal: Journal) -> Measure:
    """The Measure of a journal as `tankbench report` ranks it (rank_by auto)."""
    return measure_of(analyse_dataset(load(journal), "auto"))
