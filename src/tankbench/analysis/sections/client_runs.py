"""clients.md: every run whose load came from client hosts (fio client/server), each client's MiB/s and IOPS
beside all clients', how even the clients were, and for a network share what limited each run."""

from __future__ import annotations

from tankbench.analysis.clients import MIB, bw_bytes, direction, iops, run_total
from tankbench.analysis.present import fmt
from tankbench.analysis.result import Analysis, Context, SectionSpec
from tankbench.analysis.section import MD, Block, Cell, Column, Para, Part, Section, Span, Table
from tankbench.journal.clientruns import ClientRun, client_runs


def compute(ctx: Context) -> tuple[ClientRun, ...]:
    return tuple(client_runs(ctx.journal)) if ctx.journal is not None else ()


def _figures(f: dict[str, float], d: str) -> Cell:
    return Cell(bw_bytes(f, d) / MIB, f"{fmt(bw_bytes(f, d) / MIB)} MiB/s ({fmt(iops(f, d))} IOPS)")


def _runs_table(runs: list[ClientRun], d: str) -> Table:
    names = sorted({c for r in runs for c in r.per_client})
    cols = (Column("run"), Column("host"), *(Column(n) for n in names), Column("all clients"), Column("even"))
    rows = []
    for r in runs:
        bws = [bw_bytes(r.per_client[c], d) for c in names if c in r.per_client]
        cells = [_figures(r.per_client[c], d) if c in r.per_client else "—" for c in names]
        even = f"{min(bws) / max(bws):.2f}" if bws and max(bws) > 0 else "—"
        rows.append((r.run_no, r.host, *cells, _figures(run_total(r), d), even))
    return Table(cols, rows, only=frozenset({MD}))


def _network(runs: list[ClientRun]) -> tuple[Block, ...]:
    """A network share's runs: the server's busiest interface, its link, and what limited each run (why)."""
    rows = [r for r in runs if r.net.get("net.limit")]
    if not rows:
        return ()
    heads = ("run", "server interface", "received MiB/s", "sent MiB/s", "link", "limit", "why")
    body = []
    for r in rows:
        n = r.net
        link = f"{n.get('net.link_mbps')} Mb/s" if n.get("net.link_mbps") else "unknown"
        rx, tx = float(n.get("net.server_rx_mibs", 0)), float(n.get("net.server_tx_mibs", 0))
        body.append((r.run_no, n.get("net.server_interface", ""), rx, tx, link, n["net.limit"], n.get("net.why", "")))
    return (Table(tuple(Column(h) for h in heads), body, only=frozenset({MD})),)


def render(a: Analysis, runs: tuple[ClientRun, ...]) -> Section | None:
    if not runs:
        return None
    by_test: dict[tuple[int, str], list[ClientRun]] = {}
    for r in runs:
        by_test.setdefault((r.test_number, r.test_name), []).append(r)
    parts: list[Block] = [
        Para(
            (
                Span("Each client ran the test's job on its own copy of the target's path at the same time; "),
                Span("all clients", "code"),
                Span(" is their sum (the run's figure in the other reports). MiB/s and IOPS as fio's "),
                Span("client_stats", "code"),
                Span(" give them; even = slowest client / fastest client (1.00: every client got the same share)."),
            ),
            only=frozenset({MD}),
        )
    ]
    for (number, name), test_runs in by_test.items():
        d = direction(test_runs[0])
        blocks = (_runs_table(test_runs, d), *_network(test_runs))
        parts.append(Part(f"#{number} {name} ({d})", blocks, only=frozenset({MD})))
    return Section("client-runs", "Load from client hosts (fio client/server)", tuple(parts), level=1)


SECTION = SectionSpec("client_runs", 81, compute, render, outputs=frozenset(), file="clients.md", journal=True)
