"""Reading the journal: tests, runs, fingerprints, and the fast path of `report` (only the metric and check keys
it needs, extracted by SQLite, from the compact per-run copy where there is one). `Journal` (journal/db.py) is
these reads and its writes."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from tankbench.model import Fingerprint, Run

_RUN_COLUMNS = (
    "id",
    "test_id",
    "run_no",
    "warmup",
    "attempt",
    "status",
    "started",
    "ended",
    "host",
    "fingerprint_id",
    "expected_s",
    "wall_s",
    "drain_s",
    "metrics",
    "checks",
    "samples",
    "fio_json",
    "exit_status",
    "stderr_tail",
    "note",
)
#: the run columns iter_run_values/run_input_rows give (the heavy JSON and text columns left out)
INPUT_COLUMNS = tuple(c for c in _RUN_COLUMNS if c not in ("samples", "fio_json", "stderr_tail", "metrics", "checks"))


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


def loads(text: str | bytes) -> Any:
    """json.loads, by orjson where it can (3-4x faster on the report's 100,000s of small arrays; same objects),
    by json where orjson refuses what json reads (9e999, integers beyond 64 bits)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def extract_sql(column: str, keys: Sequence[str]) -> tuple[str, list[str]]:
    """SQL for a JSON array of the values of `keys` in a JSON object column (null where absent), and its
    arguments: one multi-path json_extract parses the text once (a single path would return the bare value)."""
    if not keys:
        return "'[]'", []
    if len(keys) == 1:
        return f"json_array(json_extract({column}, ?))", [f'$."{keys[0]}"']
    return f"json_extract({column}, {', '.join('?' * len(keys))})", [f'$."{k}"' for k in keys]


class JournalReads:
    """The journal's reads (a part of Journal, which owns the connection and the writes)."""

    conn: sqlite3.Connection

    def _input_keys(self) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        raise NotImplementedError

    def campaigns(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self.conn.execute("SELECT * FROM campaigns ORDER BY created")]

    def tests(self) -> list[TestRow]:
        """Every test ever planned into this journal, by number."""
        out = []
        for r in self.conn.execute("SELECT * FROM tests ORDER BY number, id"):
            out.append(
                TestRow(
                    r["id"],
                    r["campaign_id"],
                    r["number"],
                    r["name"],
                    r["target"],
                    r["target_kind"],
                    r["test_case"],
                    json.loads(r["canonical"]),
                    r["fio_job"],
                    r["skip_note"],
                )
            )
        return out

    def fingerprints(self) -> dict[str, Fingerprint]:
        return {r["id"]: Fingerprint(json.loads(r["data"])) for r in self.conn.execute("SELECT * FROM fingerprints")}

    def runs(self, test_id: str | None = None, *, with_samples: bool = True) -> list[Run]:
        """Runs in the order they started; `with_samples=False` skips the heavy series and fio JSON."""
        cols = ", ".join(c if with_samples or c not in ("samples", "fio_json") else f"'' AS {c}" for c in _RUN_COLUMNS)
        sql = f"SELECT {cols} FROM runs"
        args: tuple[Any, ...] = ()
        if test_id:
            sql += " WHERE test_id=?"
            args = (test_id,)
        return [self._run(r) for r in self.conn.execute(sql + " ORDER BY id", args)]

    def last_measured_run(self, test_id: str, *, with_samples: bool = True) -> Run | None:
        """The latest finished non-warm-up run of a test (with samples and fio JSON unless told not to)."""
        cols = ", ".join(c if with_samples or c not in ("samples", "fio_json") else f"'' AS {c}" for c in _RUN_COLUMNS)
        r = self.conn.execute(
            f"SELECT {cols} FROM runs WHERE test_id=? AND status='done' AND warmup=0 ORDER BY id DESC LIMIT 1",
            (test_id,),
        ).fetchone()
        return self._run(r) if r is not None else None

    def iter_runs(self, *, with_samples: bool = False) -> Iterator[Run]:
        cols = ", ".join(c if with_samples or c not in ("samples", "fio_json") else f"'' AS {c}" for c in _RUN_COLUMNS)
        for r in self.conn.execute(f"SELECT {cols} FROM runs ORDER BY id"):
            yield self._run(r)

    def iter_run_values(self, metric_keys: Sequence[str], check_keys: Sequence[str]) -> Iterator[dict[str, Any]]:
        """Runs without samples, fio JSON and stderr, with only the named metric and check keys (absent ones left
        out), extracted by SQLite: the fast read path of `report` on journals with 100,000s of runs."""
        names = (*INPUT_COLUMNS, "metrics", "checks")
        return (dict(zip(names, r)) for r in self.run_input_rows(metric_keys, check_keys))

    def run_input_rows(self, metric_keys: Sequence[str], check_keys: Sequence[str]) -> Iterator[tuple[Any, ...]]:
        """What iter_run_values yields, as tuples: the INPUT_COLUMNS, then the metrics and checks dicts (no
        dict per row: `report` reads 100,000s of these)."""
        mk, ck = tuple(metric_keys), tuple(check_keys)
        stored = self._input_keys()
        if stored is not None and stored != (mk, ck):
            yield from self._input_rows_from_other_keys(mk, ck, stored)
            return
        base = INPUT_COLUMNS
        m_sql, m_args = extract_sql("metrics", mk)
        c_sql, c_args = extract_sql("checks", ck)
        sql = f"SELECT {', '.join(base)}, {m_sql}, {c_sql} FROM runs ORDER BY id"
        if stored is not None:
            # the compact per-run copy where there is one (schema 3), the full JSON where not
            cols = ", ".join(f"r.{c}" for c in base)
            sql = (
                f"SELECT {cols}, coalesce(i.metrics, {m_sql.replace('metrics', 'r.metrics', 1)}), "
                f"coalesce(i.checks, {c_sql.replace('checks', 'r.checks', 1)}) "
                "FROM runs r LEFT JOIN run_inputs i ON i.run_id = r.id ORDER BY r.id"
            )
        nb = len(base)
        cur = self.conn.cursor()
        cur.row_factory = None
        for r in cur.execute(sql, (*m_args, *c_args)):
            m = {k: v for k, v in zip(mk, loads(r[nb])) if v is not None}
            c = {k: v for k, v in zip(ck, loads(r[nb + 1])) if v is not None}
            yield (*r[:nb], m, c)

    def _input_rows_from_other_keys(
        self, mk: tuple[str, ...], ck: tuple[str, ...], stored: tuple[tuple[str, ...], tuple[str, ...]]
    ) -> Iterator[tuple[Any, ...]]:
        """run_input_rows of a journal whose compact copy keeps other keys (indexed by another tankbench version,
        which `run` re-indexes and a read-only `report` must not): the keys it keeps from it, only the keys it
        lacks from each run's full JSON (one key: 0.3 s per 100,000 runs; every key: 1.5 s). Same dicts, in the
        asked keys' order."""
        sm, sc = stored
        miss_m, miss_c = tuple(k for k in mk if k not in sm), tuple(k for k in ck if k not in sc)
        parts = [
            ("coalesce(i.metrics, {})", "r.metrics", sm),
            ("coalesce(i.checks, {})", "r.checks", sc),
            ("{}", "r.metrics", miss_m),
            ("{}", "r.checks", miss_c),
        ]
        cols, args = [f"r.{c}" for c in INPUT_COLUMNS], []
        for outer, column, keys in parts:
            sql, a = extract_sql(column, keys)
            cols.append(outer.format(sql))
            args += a
        nb = len(INPUT_COLUMNS)
        cur = self.conn.cursor()
        cur.row_factory = None
        query = f"SELECT {', '.join(cols)} FROM runs r LEFT JOIN run_inputs i ON i.run_id = r.id ORDER BY r.id"
        # where each asked key is in the stored array followed by the extracted one
        at_m = [(k, sm.index(k) if k in sm else len(sm) + miss_m.index(k)) for k in mk]
        at_c = [(k, sc.index(k) if k in sc else len(sc) + miss_c.index(k)) for k in ck]
        for r in cur.execute(query, args):
            m, c = loads(r[nb]) + loads(r[nb + 2]), loads(r[nb + 1]) + loads(r[nb + 3])
            yield (
                *r[:nb],
                {k: v for k, i in at_m if (v := m[i]) is not None},
                {k: v for k, i in at_c if (v := c[i]) is not None},
            )

    def run_facts(self, row_ids: Iterable[int]) -> dict[int, tuple[dict[str, Any], dict[str, Any]]]:
        """{runs.id: (metrics, checks)} of the given runs, in one query (the report's ZFS facts of each test's
        last measured run)."""
        ids = sorted(set(row_ids))
        out: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
        for i in range(0, len(ids), 500):  # SQLite's limit on bound parameters
            chunk = ids[i : i + 500]
            sql = f"SELECT id, metrics, checks FROM runs WHERE id IN ({', '.join('?' * len(chunk))})"
            for rid, m, c in self.conn.execute(sql, chunk):
                out[rid] = (json.loads(m or "{}"), json.loads(c or "{}"))
        return out

    @staticmethod
    def _run(r: sqlite3.Row) -> Run:
        return Run(
            test_id=r["test_id"],
            run_no=r["run_no"],
            warmup=bool(r["warmup"]),
            attempt=r["attempt"],
            status=r["status"],
            started=r["started"],
            ended=r["ended"],
            host=r["host"],
            fingerprint_id=r["fingerprint_id"],
            expected_s=r["expected_s"],
            wall_s=r["wall_s"],
            drain_s=r["drain_s"],
            metrics=json.loads(r["metrics"] or "{}"),
            checks=json.loads(r["checks"] or "{}"),
            samples=json.loads(r["samples"] or "{}"),
            fio_json=r["fio_json"] or "",
            exit_status=r["exit_status"],
            stderr_tail=r["stderr_tail"],
            note=r["note"],
            row_id=r["id"],
        )
