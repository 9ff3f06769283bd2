"""Load from client hosts in the main report (issue 20): per test whose load came from clients (fio
client/server, a file target's `clients` or an NFS share), each client's mean MiB/s beside all clients', how even
they were, and for a network share what limited the runs. clients.md keeps every run; this is the summary that
index.html, summary.md and results.json show."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tankbench.journal.clientruns import ClientRun

MIB = 1048576.0


def direction(r: ClientRun) -> str:
    """read, write or read+write: the directions this run moved data in."""
    dirs = [d for d in ("read", "write") if any(p.get(f"{d}_bw_bytes", 0) for p in [r.total, *r.per_client.values()])]
    return "+".join(dirs) or "read"


def bw_bytes(figures: Mapping[str, Any], direction: str) -> float:
    """Bytes/s in the given direction(s) ("read", "write", "read+write")."""
    return sum(float(figures.get(f"{d}_bw_bytes", 0.0)) for d in direction.split("+"))


def iops(figures: Mapping[str, Any], direction: str) -> float:
    return sum(float(figures.get(f"{d}_iops", 0.0)) for d in direction.split("+"))


def run_total(r: ClientRun) -> dict[str, float]:
    """The run's all-clients figures: fio's aggregate where it gave one, else the clients' sum."""
    if r.total:
        return {k: float(v) for k, v in r.total.items() if isinstance(v, (int, float))}
    keys = ("read_bw_bytes", "write_bw_bytes", "read_iops", "write_iops")
    return {k: sum(float(f.get(k, 0.0)) for f in r.per_client.values()) for k in keys}


@dataclass(frozen=True)
class ClientRow:
    """One test's client runs, summarised: means over its measured runs (MiB/s)."""

    test_number: int
    test_name: str
    direction: str
    runs: int
    clients: tuple[tuple[str, float], ...]  # (client, mean MiB/s over the runs it took part in)
    total_mibs: float  # mean over runs of all clients' MiB/s
    even: float | None  # slowest client's mean / fastest client's mean (1.0: an even share)
    limit: str  # a network share: what limited the runs most often (network, disks, cpu, unknown); "" otherwise
    why: str  # the reason given for that limit in the last run that named it

    def as_dict(self) -> dict[str, Any]:
        return {
            "test_number": self.test_number,
            "test_name": self.test_name,
            "direction": self.direction,
            "runs": self.runs,
            "clients_mibs": dict(self.clients),
            "all_clients_mibs": self.total_mibs,
            "even": self.even,
            "limit": self.limit or None,
            "why": self.why or None,
        }


def client_rows(runs: Sequence[ClientRun]) -> tuple[ClientRow, ...]:
    """A row per test with client runs, in test order (runs as journal.clientruns.client_runs returns them)."""
    by_test: dict[tuple[int, str], list[ClientRun]] = {}
    for r in runs:
        by_test.setdefault((r.test_number, r.test_name), []).append(r)
    out = []
    for (number, name), test_runs in by_test.items():
        d = direction(test_runs[0])
        per: dict[str, list[float]] = {}
        for r in test_runs:
            for c, f in r.per_client.items():
                per.setdefault(c, []).append(bw_bytes(f, d) / MIB)
        means = tuple((c, math.fsum(v) / len(v)) for c, v in sorted(per.items()))
        total = math.fsum(bw_bytes(run_total(r), d) / MIB for r in test_runs) / len(test_runs)
        top = max((m for _, m in means), default=0.0)
        even = min(m for _, m in means) / top if means and top > 0 else None
        limits = Counter(str(r.net["net.limit"]) for r in test_runs if r.net.get("net.limit"))
        limit = limits.most_common(1)[0][0] if limits else ""
        why = next((str(r.net.get("net.why", "")) for r in reversed(test_runs) if r.net.get("net.limit") == limit), "")
        out.append(ClientRow(number, name, d, len(test_runs), means, total, even, limit, why))
    return tuple(out)
