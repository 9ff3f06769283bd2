"""One host's view of a journal that several hosts write (a fleet campaign): reads see only that host's runs."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from tankbench.journal.db import INPUT_COLUMNS, Journal
from tankbench.model import Fingerprint, Run


class HostJournal(Journal):
    """The journal as one host of a fleet sees it: reads return only that host's runs (and fingerprints);
    writes are the Journal's. The single-host runner and the analysis run on it unchanged."""

    only_host = ""

    @classmethod
    def for_host(cls, path: str, host: str, *, readonly: bool = False) -> HostJournal:
        j = cls.open_readonly(path) if readonly else cls(path)
        assert isinstance(j, HostJournal)  # open_readonly builds an instance of cls
        j.only_host = host
        return j

    def runs(self, test_id: str | None = None, *, with_samples: bool = True) -> list[Run]:
        return [r for r in super().runs(test_id, with_samples=with_samples) if r.host == self.only_host]

    def iter_runs(self, *, with_samples: bool = False) -> Iterator[Run]:
        return (r for r in super().iter_runs(with_samples=with_samples) if r.host == self.only_host)

    def last_measured_run(self, test_id: str, *, with_samples: bool = True) -> Run | None:
        done = [r for r in self.runs(test_id, with_samples=with_samples) if r.status == "done" and not r.warmup]
        return done[-1] if done else None

    def run_input_rows(self, metric_keys: Sequence[str], check_keys: Sequence[str]) -> Iterator[tuple[Any, ...]]:
        host = INPUT_COLUMNS.index("host")  # iter_run_values reads these rows too
        return (r for r in super().run_input_rows(metric_keys, check_keys) if r[host] == self.only_host)

    def fingerprints(self) -> dict[str, Fingerprint]:
        used = {r.fingerprint_id for r in self.iter_runs()}
        return {k: v for k, v in super().fingerprints().items() if k in used}


def journal_hosts(journal: Journal) -> list[str]:
    """The fleet's hosts in the order the campaign named them (the `hosts` table, schema 4), else the hosts that
    have runs, in the order they first ran (older journals, single-host campaigns)."""
    c = journal.conn
    if c.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='hosts'").fetchone():
        named = [r[0] for r in c.execute("SELECT name FROM hosts ORDER BY position")]
        if named:
            return named
    return [r[0] for r in c.execute("SELECT host FROM runs GROUP BY host ORDER BY min(id)")]


def fleet_mode(journal: Journal) -> str:
    """`split` or `each` when a fleet campaign wrote this journal, else ''."""
    c = journal.conn
    if not c.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='hosts'").fetchone():
        return ""
    row = c.execute("SELECT mode FROM hosts LIMIT 1").fetchone()
    return str(row[0]) if row else ""
