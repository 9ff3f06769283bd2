"""A fleet campaign with hosts_mode = "each" (docs/fleet.md): every host ran every test, so the hosts side by side
(their fingerprints, then each test's figure on every host against the first host), a full report per host in a
directory of its own, and a note that the report around this section pools the hosts' runs per test. Also written
alone as hosts.md."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tankbench.analysis.cases import Dataset, campaign_spec_text, load_dataset
from tankbench.analysis.compare import compare
from tankbench.analysis.present import fmt
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import Cell, Column, Para, Part, Section, Span, Table
from tankbench.analysis.sections.fingerprint import show_key
from tankbench.analysis.settings import parse_settings
from tankbench.journal.hostview import HostJournal, fleet_mode, journal_hosts
from tankbench.metrics import METRICS

#: fingerprint facts shown side by side (what makes machines differ)
SHOWN = (
    "hostname",
    "cpu_model",
    "cpu_count",
    "mem_bytes",
    "kernel",
    "zfs_version",
    "fio_version",
    "device_models",
    "accelerator",
)


@dataclass(frozen=True)
class Hosts:
    """The hosts that have runs, in the campaign's order, with each one's directory and analysis."""

    names: tuple[str, ...]
    slugs: tuple[str, ...]
    reports: tuple[Analysis, ...]


def host_slug(name: str) -> str:
    """A directory name for a host's report: ssh:root@10.0.0.2:2222 -> ssh-root-10.0.0.2-2222."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "host"


def compute(ctx: Context) -> Hosts | None:
    j = ctx.journal
    if j is None or isinstance(j, HostJournal) or fleet_mode(j) != "each":
        return None
    analyse: Callable[[Dataset, Any], Analysis] = ctx.options["analyse"]
    names, reports = [], []
    for name in journal_hosts(j):
        with HostJournal.for_host(j.path, name, readonly=True) as hj:
            if not any(True for _ in hj.iter_runs()):
                continue
            ds = load_dataset(hj, parse_settings(campaign_spec_text(hj), f"{hj.path} (campaign)"))
            reports.append(analyse(ds, hj))
        names.append(name)
    return Hosts(tuple(names), tuple(host_slug(n) for n in names), tuple(reports)) if names else None


def _facts(ds: Dataset) -> dict[str, str]:
    out: dict[str, set[str]] = {}
    for fp in ds.fingerprints.values():
        for k in SHOWN:
            if k in fp.data:
                out.setdefault(k, set()).add(show_key(k, fp.data[k]))
    return {k: ", ".join(sorted(v)) for k, v in out.items()}


def _fingerprints(names: Sequence[str], datasets: Sequence[Dataset]) -> Table:
    facts = [_facts(ds) for ds in datasets]
    rows = [(k, *(f.get(k, "—") for f in facts)) for k in SHOWN if any(k in f for f in facts)]
    return Table((Column("fact", ""), *(Column(n) for n in names)), rows)


def _tests(names: Sequence[str], datasets: Sequence[Dataset]) -> Table:
    comparisons = [compare(datasets[0], ds, force=True) for ds in datasets[1:]]
    rows: dict[str, dict[str, Any]] = {}
    for ci, c in enumerate(comparisons):
        for d in c.deltas:
            name = f"#{d.test_a.number} {d.test_a.name}"
            row = rows.setdefault(d.test_a.id, {"name": name, "metric": d.metric, "a": d.mean_a, "b": {}, "r": {}})
            row["b"][ci] = d.mean_b
            factor = d.mean_b / d.mean_a if d.mean_a and d.mean_b is not None else None
            row["r"][ci] = Cell(factor, f"{factor:.2f}× ({d.verdict})" if factor is not None else d.verdict)
    cols = (
        Column("test"),
        Column("figure"),
        *(Column(n, num=True) for n in names),
        *(Column(f"{n} / {names[0]}") for n in names[1:]),
    )
    body = [
        (
            row["name"],
            METRICS[row["metric"]].label,
            Cell(row["a"], fmt(row["a"])),
            *(Cell(row["b"].get(i), fmt(row["b"].get(i))) for i in range(len(comparisons))),
            *(row["r"].get(i, "—") for i in range(len(comparisons))),
        )
        for row in rows.values()
    ]
    return Table(cols, body)


def render(a: Analysis, h: Hosts | None) -> Section | None:
    if h is None:
        return None
    note = Para(
        (
            Span(
                "Every host ran every test (hosts_mode = each): index.html, summary.md and the other outputs beside "
                "hosts.md pool the hosts' runs per test; each host's own report is in its directory: "
            ),
            *(s for i, slug in enumerate(h.slugs) for s in (Span(", " if i else ""), Span(f"{slug}/", "code"))),
            Span("."),
        )  # fmt: skip
    )
    datasets = [r.dataset for r in h.reports]
    parts = (Part("Fingerprints", (_fingerprints(h.names, datasets),)), Part("Tests", (_tests(h.names, datasets),)))
    return Section("hosts", f"Hosts side by side: {' vs '.join(h.names)}", (note, *parts), sheet="hosts")


def to_json(a: Analysis, h: Hosts | None) -> Mapping[str, Any]:
    if h is None:
        return {}
    return {"hosts": [{"name": n, "report": f"{s}/results.json"} for n, s in zip(h.names, h.slugs)]}


def subreports(a: Analysis, h: Hosts | None) -> Sequence[tuple[str, Analysis]]:
    return tuple(zip(h.slugs, h.reports)) if h else ()


SECTION = SectionSpec("hosts", 15, compute, render, to_json, file="hosts.md", journal=True, subreports=subreports)
