"""The report of a fleet campaign with hosts_mode = "each": one full report per host, and hosts.md, which puts
the hosts side by side: their fingerprints, then every test's figure on each host against the first host."""

from __future__ import annotations

import os
import re
from typing import Any

from tankbench.analysis.analyse import analyse_dataset, load
from tankbench.analysis.cases import Dataset
from tankbench.analysis.compare import compare
from tankbench.analysis.detail import with_run_detail
from tankbench.journal.hostview import HostJournal, journal_hosts
from tankbench.metrics import METRICS
from tankbench.reports.common import fmt
from tankbench.reports.write import write_all

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


def host_slug(name: str) -> str:
    """A directory name for a host's report: ssh:root@10.0.0.2:2222 -> ssh-root-10.0.0.2-2222."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "host"


def _facts(ds: Dataset) -> dict[str, str]:
    out: dict[str, set[str]] = {}
    for fp in ds.fingerprints.values():
        for k in SHOWN:
            if k in fp.data:
                out.setdefault(k, set()).add(str(fp.data[k]))
    return {k: ", ".join(sorted(v)) for k, v in out.items()}


def hosts_markdown(names: list[str], datasets: list[Dataset]) -> str:
    """Markdown: fingerprints side by side, then each test on every host with its ratio to the first host."""
    lines = [f"# Hosts side by side: {' vs '.join(names)}", "", "## Fingerprints", ""]
    lines += ["| | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    facts = [_facts(ds) for ds in datasets]
    for k in SHOWN:
        if any(k in f for f in facts):
            lines.append(f"| {k} | " + " | ".join(f.get(k, "—") for f in facts) + " |")
    lines += ["", "## Tests", ""]
    head = "| test | figure | " + " | ".join(names) + " | " + " | ".join(f"{n} / {names[0]}" for n in names[1:]) + " |"
    lines += [head, "|---|---|" + "---|" * (2 * len(names) - 1)]
    comparisons = [compare(datasets[0], ds, force=True) for ds in datasets[1:]]
    rows: dict[str, dict[str, Any]] = {}
    for ci, c in enumerate(comparisons):
        for d in c.deltas:
            row = rows.setdefault(
                d.test_a.id,
                {"name": f"#{d.test_a.number} {d.test_a.name}", "metric": d.metric, "a": d.mean_a, "b": {}, "r": {}},
            )
            row["b"][ci] = d.mean_b
            row["r"][ci] = (
                f"{d.mean_b / d.mean_a:.2f}× ({d.verdict})" if d.mean_a and d.mean_b is not None else d.verdict
            )
    for row in rows.values():
        values = [fmt(row["a"])] + [fmt(row["b"].get(i)) for i in range(len(comparisons))]
        ratios = [row["r"].get(i, "—") for i in range(len(comparisons))]
        lines.append(f"| {row['name']} | {METRICS[row['metric']].label} | " + " | ".join(values + ratios) + " |")
    lines.append("")
    return "\n".join(lines)


def write_host_reports(journal_path: str, out_dir: str) -> list[str]:
    """One report per host in out_dir/<host>/ and out_dir/hosts.md comparing them; return the paths written."""
    with HostJournal.open_readonly(journal_path) as j:
        names = journal_hosts(j)
    paths: list[str] = []
    names_with_runs, datasets = [], []
    for name in names:
        with HostJournal.for_host(journal_path, name, readonly=True) as hj:
            if not any(True for _ in hj.iter_runs()):
                continue
            ds = load(hj)
            paths += write_all(with_run_detail(analyse_dataset(ds, "auto"), hj), os.path.join(out_dir, host_slug(name)))
        names_with_runs.append(name)
        datasets.append(ds)
    if len(datasets) >= 1:
        os.makedirs(out_dir, exist_ok=True)
        md = os.path.join(out_dir, "hosts.md")
        with open(md, "w", encoding="utf-8") as f:
            f.write(hosts_markdown(names_with_runs, datasets))
        paths.insert(0, md)
    return paths
