"""The report's title and first lines: what was measured, how it ranks, and a banner when the machine was emulated
(results.json: the format, the journal, the campaigns, the ranking)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tankbench import EXPORT_FORMAT, __version__
from tankbench.analysis.checks import emulation_banner
from tankbench.analysis.present import EXPLAIN, metric_label
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import Para, Section, Span


def render(a: Analysis, _: None) -> Section:
    ds = a.dataset
    blocks = []
    if a.emulated:
        banner = emulation_banner(fp.data for fp in ds.fingerprints.values())
        lead = Span("Emulated machine:", "b")
        blocks.append(Para((lead, Span(f" {banner}")), "banner", id="emulated"))
    n_meas = sum(len(t.measured) for t in ds.tests)
    n_warm = sum(1 for t in ds.tests for r in t.runs if r.warmup)
    spans = [
        Span(
            f"{len(ds.tests)} tests in {len(ds.cases())} test cases, {ds.n_runs} runs ({n_meas} measured, {n_warm} "
            "warm-ups shown but not ranked). Journal: "
        ),
        Span(ds.path, "code"),
        Span(". Ranked by "),
        Span(metric_label(a.rank_by), "b", EXPLAIN[a.rank_by]),
        Span("."),
    ]
    if a.selection:
        spans += [Span(" Selection: "), Span("; ".join(a.selection), "code"), Span(".")]
    blocks.append(Para(tuple(spans)))
    title = ", ".join(dict.fromkeys(n for n in ds.campaign_names if n)) or ds.path
    return Section("", f"tankbench report: {title}", tuple(blocks), level=1)


def to_json(a: Analysis, _: None) -> Mapping[str, Any]:
    ds = a.dataset
    return {
        "format_version": EXPORT_FORMAT,
        "tankbench_version": __version__,
        "journal": ds.path,
        "campaigns": list(ds.campaign_names),
        "rank_by": a.rank_by,
        "emulated": a.emulated,
        "virtualisation": list(a.virtualisation),
        "selection": list(a.selection),
    }


def nothing(_: Context) -> None:
    return None


SECTION = SectionSpec("head", 0, nothing, render, to_json)
