"""Runs whose load came from client hosts (a target's `clients`): each client's figures and the total, as the
run's checks keep them (`clients.results`, `clients.total`; targets/clients.py writes them)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tankbench.journal.db import Journal


@dataclass(frozen=True)
class ClientRun:
    """One journal run of a client/server test: per-client figures by client name, and the total."""

    test_number: int
    test_name: str
    run_no: int
    host: str
    per_client: dict[str, dict[str, float]]
    total: dict[str, float]
    #: a network share's run: the server's network figures and what limited it (`net.*` checks; {} otherwise)
    net: dict[str, Any] = field(default_factory=dict)


def client_runs(j: Journal) -> list[ClientRun]:
    """Every measured (done, not warm-up) run with per-client figures, in test and run order. Only the runs of
    tests whose target names clients are read (a text search on their checks finds the client runs): a journal
    without such tests costs one look at the tests table, not a scan of every run's checks (CROSS JOIN: SQLite
    keeps that order)."""
    rows = j.conn.execute(
        "SELECT t.number, t.name, r.run_no, r.host, r.checks FROM tests t CROSS JOIN runs r ON r.test_id = t.id "
        "WHERE instr(t.canonical, '\"clients\"') > 0 AND r.status = 'done' AND r.warmup = 0 "
        "AND instr(r.checks, '\"clients.results\"') > 0 ORDER BY t.number, r.run_no, r.id"
    ).fetchall()
    out = []
    for number, name, run_no, host, checks_text in rows:
        checks: dict[str, Any] = json.loads(checks_text)
        per = checks.get("clients.results")
        if not isinstance(per, dict) or not per:
            continue
        net = {k: v for k, v in checks.items() if k.startswith("net.") and k not in ("net.server", "net.clients")}
        total = dict(checks.get("clients.total") or {})
        out.append(ClientRun(int(number), str(name), int(run_no), str(host), per, total, net))
    return out
