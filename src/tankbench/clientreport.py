"""clients.md: the runs whose load came from client hosts (fio client/server), each client's figures beside the
total, and how even the clients were (the slowest client over the fastest)."""

from __future__ import annotations

import os

from tankbench.analysis.clients import MIB, bw_bytes, direction, iops, run_total
from tankbench.journal.clientruns import ClientRun, client_runs
from tankbench.journal.db import Journal
from tankbench.reports.common import fmt


def clients_markdown(runs: list[ClientRun]) -> str:
    """Markdown: one table per test, a row per run with each client's MiB/s (IOPS) and all clients'."""
    lines = [
        "# Load from client hosts (fio client/server)",
        "",
        "Each client ran the test's job on its own copy of the target's path at the same time; `all clients` is "
        "their sum (the run's figure in the other reports). MiB/s and IOPS as fio's `client_stats` give them; "
        "even = slowest client / fastest client (1.00: every client got the same share).",
        "",
    ]
    by_test: dict[tuple[int, str], list[ClientRun]] = {}
    for r in runs:
        by_test.setdefault((r.test_number, r.test_name), []).append(r)
    for (number, name), test_runs in by_test.items():
        names = sorted({c for r in test_runs for c in r.per_client})
        d = direction(test_runs[0])
        lines += [f"## #{number} {name} ({d})", ""]
        lines += [
            "| run | host | " + " | ".join(names) + " | all clients | even |",
            "|---|---|" + "---|" * (len(names) + 2),
        ]
        for r in test_runs:
            cells = []
            bws = []
            for c in names:
                f = r.per_client.get(c)
                if f is None:
                    cells.append("—")
                    continue
                bws.append(bw_bytes(f, d))
                cells.append(f"{fmt(bw_bytes(f, d) / MIB)} MiB/s ({fmt(iops(f, d))} IOPS)")
            total = run_total(r)
            even = f"{min(bws) / max(bws):.2f}" if bws and max(bws) > 0 else "—"
            cells.append(f"{fmt(bw_bytes(total, d) / MIB)} MiB/s ({fmt(iops(total, d))} IOPS)")
            lines.append(f"| {r.run_no} | {r.host} | " + " | ".join(cells) + f" | {even} |")
        lines.append("")
        lines += _network(test_runs)
    return "\n".join(lines)


def _network(runs: list[ClientRun]) -> list[str]:
    """A network share's runs: the server's busiest interface, its link, and what limited each run (why)."""
    rows = [r for r in runs if r.net.get("net.limit")]
    if not rows:
        return []
    lines = [
        "| run | server interface | received MiB/s | sent MiB/s | link | limit | why |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        n = r.net
        link = f"{n.get('net.link_mbps')} Mb/s" if n.get("net.link_mbps") else "unknown"
        lines.append(
            f"| {r.run_no} | {n.get('net.server_interface', '')} | {fmt(float(n.get('net.server_rx_mibs', 0)))} | "
            f"{fmt(float(n.get('net.server_tx_mibs', 0)))} | {link} | {n['net.limit']} | {n.get('net.why', '')} |"
        )
    return [*lines, ""]


def write_clients(j: Journal, out_dir: str) -> list[str]:
    """out_dir/clients.md when the journal has runs with client hosts; the paths written (none otherwise)."""
    runs = client_runs(j)
    if not runs:
        return []
    path = os.path.join(out_dir, "clients.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write(clients_markdown(runs))
    return [path]
