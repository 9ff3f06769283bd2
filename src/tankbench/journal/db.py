"""Journal API: campaigns, tests and runs in SQLite (WAL). Analysis and reports read through this."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tankbench.errors import UserError
from tankbench.journal.migrations import migrate
from tankbench.model import Fingerprint, Run, Test

_RUN_COLUMNS = ("id", "test_id", "run_no", "warmup", "attempt", "status", "started", "ended", "host",
                "fingerprint_id", "expected_s", "wall_s", "drain_s", "metrics", "checks", "samples",
                "fio_json", "exit_status", "stderr_tail", "note")


@dataclass(frozen=True)
class TestRow:
    """A test as the journal knows it (the campaign file may have changed since)."""

    id: str
    campaign_id: str
    number: int
    name: str
    target: str
    target_kind: str
    test_case: str
    canonical: dict[str, Any]
    fio_job: str
    skip_note: str

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.canonical.get("params", {}))


class Journal:
    """One SQLite file. Every write is its own transaction, so a kill -9 loses at most the run in flight."""

    def __init__(self, path: str, *, create: bool = True) -> None:
        self.path = path
        if not create and not os.path.exists(path):
            raise UserError(f"no journal at {path}", "run `tankbench run CAMPAIGN` first, or pass --journal PATH")
        if create:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        try:
            self.conn = sqlite3.connect(path, timeout=30, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=FULL")
            self.conn.row_factory = sqlite3.Row
            migrate(self.conn)
        except sqlite3.DatabaseError as e:
            raise UserError(f"{path}: not a tankbench journal ({e})", "pass the .sqlite file that `run` wrote") from e

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writes -----------------------------------------------------------------------------
    def _tx(self, sql: str, args: Iterable[Any] = ()) -> sqlite3.Cursor:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            cur = self.conn.execute(sql, tuple(args))
            self.conn.execute("COMMIT")
            return cur
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def add_campaign(self, campaign_id: str, name: str, spec_path: str, spec_text: str) -> None:
        self._tx("INSERT OR IGNORE INTO campaigns(id, name, spec_path, spec_text, created) VALUES (?,?,?,?,?)",
                 (campaign_id, name, spec_path, spec_text, time.time()))

    def add_tests(self, campaign_id: str, tests: Iterable[Test], jobs: dict[str, str]) -> None:
        """Record the plan (idempotent: a test id is recorded once; its number follows the latest plan)."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for t in tests:
                self.conn.execute(
                    "INSERT INTO tests(id, campaign_id, number, name, target, target_kind, test_case, canonical,"
                    " fio_job) VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT(id) DO UPDATE SET number=excluded.number,"
                    " name=excluded.name, fio_job=excluded.fio_job",
                    (t.id, campaign_id, t.number, t.name, t.target.name, t.target.kind, t.test_case,
                     json.dumps(t.canonical(), sort_keys=True), jobs.get(t.id, "")))
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise

    def set_skip_note(self, test_id: str, note: str) -> None:
        self._tx("UPDATE tests SET skip_note=? WHERE id=?", (note, test_id))

    def add_fingerprint(self, fp: Fingerprint) -> str:
        self._tx("INSERT OR IGNORE INTO fingerprints(id, data) VALUES (?,?)",
                 (fp.id, json.dumps(dict(fp.data), sort_keys=True, default=str)))
        return fp.id

    def begin_run(self, test_id: str, run_no: int, warmup: bool, attempt: int, expected_s: float,
                  host: str) -> int:
        """Insert a `running` row before fio starts, so a crash leaves evidence; return its row id."""
        cur = self._tx("INSERT INTO runs(test_id, run_no, warmup, attempt, status, started, expected_s, host)"
                       " VALUES (?,?,?,?,?,?,?,?)",
                       (test_id, run_no, int(warmup), attempt, "running", time.time(), expected_s, host))
        return int(cur.lastrowid or 0)

    def set_run_pid(self, row_id: int, pid: int) -> None:
        self._tx("UPDATE runs SET pid=? WHERE id=?", (pid, row_id))

    def finish_run(self, row_id: int, run: Run) -> None:
        """Write the frozen result into the row begun by begin_run, in one transaction."""
        self._tx(
            "UPDATE runs SET status=?, ended=?, fingerprint_id=?, wall_s=?, drain_s=?, metrics=?, checks=?,"
            " samples=?, fio_json=?, exit_status=?, stderr_tail=?, note=? WHERE id=?",
            (run.status, run.ended or time.time(), run.fingerprint_id, run.wall_s, run.drain_s,
             json.dumps(dict(run.metrics), sort_keys=True), json.dumps(dict(run.checks), sort_keys=True, default=str),
             json.dumps(dict(run.samples), separators=(",", ":")), run.fio_json, run.exit_status,
             run.stderr_tail, run.note, row_id))

    def mark_crashed(self) -> list[tuple[int, str, int | None, str]]:
        """Turn runs left `running` by a dead process into `crashed`; return (row, test, pid, host) of each."""
        rows = self.conn.execute("SELECT id, test_id, pid, host FROM runs WHERE status='running'").fetchall()
        for r in rows:
            self._tx("UPDATE runs SET status='crashed', ended=?, note=? WHERE id=?",
                     (time.time(), "process died while this run was in progress (found on resume)", r["id"]))
        return [(r["id"], r["test_id"], r["pid"], r["host"]) for r in rows]

    # -- reads ------------------------------------------------------------------------------
    def campaigns(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self.conn.execute("SELECT * FROM campaigns ORDER BY created")]

    def tests(self) -> list[TestRow]:
        """Every test ever planned into this journal, by number."""
        out = []
        for r in self.conn.execute("SELECT * FROM tests ORDER BY number, id"):
            out.append(TestRow(r["id"], r["campaign_id"], r["number"], r["name"], r["target"], r["target_kind"],
                               r["test_case"], json.loads(r["canonical"]), r["fio_job"], r["skip_note"]))
        return out

    def fingerprints(self) -> dict[str, Fingerprint]:
        return {r["id"]: Fingerprint(json.loads(r["data"])) for r in self.conn.execute("SELECT * FROM fingerprints")}

    def runs(self, test_id: str | None = None, *, with_samples: bool = True) -> list[Run]:
        """Runs in the order they started; `with_samples=False` skips the heavy series and fio JSON."""
        cols = ", ".join(c if with_samples or c not in ("samples", "fio_json") else f"'' AS {c}"
                         for c in _RUN_COLUMNS)
        sql = f"SELECT {cols} FROM runs"
        args: tuple[Any, ...] = ()
        if test_id:
            sql += " WHERE test_id=?"
            args = (test_id,)
        return [self._run(r) for r in self.conn.execute(sql + " ORDER BY id", args)]

    def last_measured_run(self, test_id: str, *, with_samples: bool = True) -> Run | None:
        """The latest finished non-warm-up run of a test (with samples and fio JSON unless told not to)."""
        cols = ", ".join(c if with_samples or c not in ("samples", "fio_json") else f"'' AS {c}" for c in _RUN_COLUMNS)
        r = self.conn.execute(f"SELECT {cols} FROM runs WHERE test_id=? AND status='done' AND "
                              "warmup=0 ORDER BY id DESC LIMIT 1", (test_id,)).fetchone()
        return self._run(r) if r is not None else None

    def iter_runs(self, *, with_samples: bool = False) -> Iterator[Run]:
        cols = ", ".join(c if with_samples or c not in ("samples", "fio_json") else f"'' AS {c}"
                         for c in _RUN_COLUMNS)
        for r in self.conn.execute(f"SELECT {cols} FROM runs ORDER BY id"):
            yield self._run(r)

    def iter_run_values(self, metric_keys: Sequence[str], check_keys: Sequence[str]) -> Iterator[dict[str, Any]]:
        """Runs without samples, fio JSON and stderr, with only the named metric and check keys (absent ones left
        out), extracted by SQLite: the fast read path of `report` on journals with 100,000s of runs."""
        base = [c for c in _RUN_COLUMNS if c not in ("samples", "fio_json", "stderr_tail", "metrics", "checks")]
        # one multi-path json_extract per column parses each JSON text once (one call per key parsed it per key)
        ext = [f"json_extract(metrics, {', '.join('?' * len(metric_keys))})" if metric_keys else "'[]'",
               f"json_extract(checks, {', '.join('?' * len(check_keys))})" if check_keys else "'[]'"]
        args = [f'$."{k}"' for k in (*metric_keys, *check_keys)]
        nb, one_m, one_c = len(base), len(metric_keys) == 1, len(check_keys) == 1
        cur = self.conn.cursor()
        cur.row_factory = None
        for r in cur.execute(f"SELECT {', '.join(base + ext)} FROM runs ORDER BY id", args):
            d = dict(zip(base, r))
            vm = [r[nb]] if one_m else json.loads(r[nb] or "[]")  # a single path returns the bare value
            vc = [r[nb + 1]] if one_c else json.loads(r[nb + 1] or "[]")
            d["metrics"] = {k: v for k, v in zip(metric_keys, vm) if v is not None}
            d["checks"] = {k: v for k, v in zip(check_keys, vc) if v is not None}
            yield d

    @staticmethod
    def _run(r: sqlite3.Row) -> Run:
        return Run(
            test_id=r["test_id"], run_no=r["run_no"], warmup=bool(r["warmup"]), attempt=r["attempt"],
            status=r["status"], started=r["started"], ended=r["ended"], host=r["host"],
            fingerprint_id=r["fingerprint_id"], expected_s=r["expected_s"], wall_s=r["wall_s"],
            drain_s=r["drain_s"], metrics=json.loads(r["metrics"] or "{}"), checks=json.loads(r["checks"] or "{}"),
            samples=json.loads(r["samples"] or "{}"), fio_json=r["fio_json"] or "", exit_status=r["exit_status"],
            stderr_tail=r["stderr_tail"], note=r["note"], row_id=r["id"])
