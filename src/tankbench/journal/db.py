"""Journal API: campaigns, tests and runs in SQLite (WAL). Analysis and reports read through this."""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import time
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from tankbench.errors import UserError
from tankbench.journal.faults import is_fault, journal_fault
from tankbench.journal.migrations import SCHEMA_VERSION, migrate
from tankbench.journal.reads import INPUT_COLUMNS as INPUT_COLUMNS
from tankbench.journal.reads import JournalReads, extract_sql
from tankbench.journal.reads import TestRow as TestRow
from tankbench.model import Fingerprint, Run, Test

_SQLITE_MAGIC = b"SQLite format 3\x00"
_TABLES = {"campaigns", "tests", "fingerprints", "runs"}
_NOT_JOURNAL_HINT = "pass the .sqlite file that `tankbench run` or `tankbench import` wrote"


def _not_journal(path: str, why: str) -> UserError:
    return UserError(f"{path}: not a tankbench journal ({why})", _NOT_JOURNAL_HINT)


def _ro_uri(path: str, immutable: bool) -> str:
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
    return uri + "&immutable=1" if immutable else uri


def _wal_mode_at_rest(path: str) -> bool:
    """Whether the file is a WAL-mode database that no connection has open and that has nothing pending: its
    header says WAL (bytes 18-19 = 2) and no `-wal` lies beside it (a writer keeps its `-wal` until its last
    connection closes; one killed leaves it, with the runs it holds)."""
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        return False
    return head[18:20] == b"\x02\x02" and not os.path.lexists(path + "-wal")


def _connect_ro(path: str) -> sqlite3.Connection:
    """A read-only connection that cannot change a byte of the file nor create one beside it. A plain
    `mode=ro` reader of a WAL journal makes a `-shm` and a `-wal` beside it when none are there, and cannot
    remove them: a journal at rest is read `immutable` (nothing beside it to read, no writer to ignore).
    Otherwise `immutable` only when SQLite cannot open it without (read-only media without the WAL index),
    since immutable readers ignore concurrent writers."""
    last: sqlite3.Error | None = None
    for immutable in (True,) if _wal_mode_at_rest(path) else (False, True):
        conn = sqlite3.connect(_ro_uri(path, immutable), uri=True, timeout=30, isolation_level=None)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError as e:
            conn.close()
            last = e
            if getattr(e, "sqlite_errorname", "") != "SQLITE_CANTOPEN":  # e.g. busy: never read it immutable
                break  # only a WAL journal on read-only media (no -shm can be made there) needs immutable
        except sqlite3.DatabaseError as e:
            conn.close()
            raise _not_journal(path, str(e)) from e
    raise UserError(f"cannot read journal {path}: {last}", "check the file's permissions") from last


def connect_readonly(path: str) -> sqlite3.Connection:
    """A raw read-only connection to a journal that changes nothing beside it either (a copy's source: backup)."""
    return _connect_ro(path)


_PERMISSIONS_HINT = (
    "check the permissions of the file and of its directory: this user must be able to read the file and to "
    "enter every directory above it (ls -ld), or copy the journal somewhere readable"
)


def journal_exists(path: str) -> bool:
    """Whether there is a file at `path`: False only when there is none (ENOENT, ENOTDIR). A directory this user
    may not enter hides the file, but that is not "no journal": UserError naming the permission problem."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as e:
        raise UserError(f"cannot read journal {path}: {e.strerror}", _PERMISSIONS_HINT) from e
    return True


def check_journal_file(path: str) -> sqlite3.Connection:
    """Open an existing file read-only and make sure it is a journal this tankbench can read; UserError if
    not (missing, a directory, empty, not SQLite, another SQLite database, written by a newer tankbench).
    Returns the read-only connection. Never writes to the file."""
    if not journal_exists(path):
        raise UserError(f"no journal at {path}", "run `tankbench run CAMPAIGN` first, or pass --journal PATH")
    if os.path.isdir(path):
        raise UserError(f"{path}: is a directory, not a journal", _NOT_JOURNAL_HINT)
    try:
        with open(path, "rb") as f:
            head = f.read(len(_SQLITE_MAGIC))
    except OSError as e:
        raise UserError(f"cannot read journal {path}: {e.strerror}", _PERMISSIONS_HINT) from e
    if not head:
        raise _not_journal(path, "empty file")
    if head != _SQLITE_MAGIC:
        raise _not_journal(path, "not an SQLite database")
    conn = _connect_ro(path)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.DatabaseError as e:
        conn.close()
        raise _not_journal(path, str(e)) from e
    if not _TABLES <= tables or version < 1:
        conn.close()
        raise _not_journal(path, "an SQLite database without the journal's tables")
    if version > SCHEMA_VERSION:
        conn.close()
        raise UserError(
            f"{path}: journal written by a newer tankbench (schema version {version}; this tankbench "
            f"reads up to {SCHEMA_VERSION})",
            "upgrade tankbench to read or extend this journal",
        )
    return conn


def _create_whole(path: str) -> None:
    """Make a new journal with its whole schema in a file beside `path`, then link it into place: a reader in
    another shell (`show` while `run` starts) never finds the file half made, an SQLite database without the
    journal's tables or at an older schema version. A journal another `run` linked there first is kept (the
    caller opens it, as if it had existed). Raises sqlite3.Error or OSError; a kill -9 can leave the hidden
    `.NAME.new-PID` file, never a half-made journal."""
    d, base = os.path.split(os.path.abspath(path))
    tmp = os.path.join(d, f".{base}.new-{os.getpid()}")
    try:
        conn = sqlite3.connect(tmp, timeout=30, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")  # kept in the header: the journal opens in WAL mode
            migrate(conn)
        finally:
            conn.close()  # the last connection folds the -wal into the file and removes it
        if not _put_in_place(tmp, path):
            check_journal_file(path).close()  # another run's journal, there first: refuse it if foreign
    finally:
        for leftover in (tmp, tmp + "-wal", tmp + "-shm"):
            with suppress(FileNotFoundError):
                os.unlink(leftover)


def _put_in_place(tmp: str, path: str) -> bool:
    """Link `tmp` at `path` (on a filesystem without hard links, rename it), never over a file: False when a
    file was there first."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
            raise
        if os.path.exists(path):
            return False
        os.rename(tmp, path)
    return True


_STALE_NOTES = {
    "crashed": "the host went down while this run was in progress (its boot id changed, or is unknown; "
    "found on resume)",
    "interrupted": "tankbench was stopped while this run was in progress; the host stayed up (same boot id; "
    "found on resume)",
}


def stale_run_status(run_boot_id: str, host_boot_id: str) -> str:
    """What a run left `running` was: `interrupted` when the host still has the boot id recorded at its start,
    else `crashed` (the host rebooted, or one of the ids is unknown: count it, as before boot ids were kept)."""
    if run_boot_id and host_boot_id and run_boot_id == host_boot_id:
        return "interrupted"
    return "crashed"


def host_crash_count(runs: Iterable[Run]) -> int:
    """How many of a test's runs took their host down (status `crashed`); `interrupted` runs, where only
    tankbench was killed, do not count. The runner skips a test for good at 2."""
    return sum(1 for r in runs if r.status == "crashed")


class Journal(JournalReads):
    """One SQLite file. Every write is its own transaction, so a kill -9 loses at most the run in flight.

    `Journal(path)` opens for writing (creating a new file, migrating an older one); `Journal.open_readonly(path)`
    opens an existing journal for reading without changing a byte of it. `batch()` makes several writes one
    transaction (an import)."""

    _batch_depth = 0  # > 0 inside batch(): the writes join the batch's transaction

    def __init__(self, path: str, *, create: bool = True) -> None:
        self.path = path
        self.readonly = False
        existed = journal_exists(path)
        if existed:
            check_journal_file(path).close()  # refuse foreign files before anything is written to them
        elif not create:
            raise UserError(f"no journal at {path}", "run `tankbench run CAMPAIGN` first, or pass --journal PATH")
        else:
            try:
                os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            except OSError as e:
                raise journal_fault(path, e, "create") from e
        try:
            if not existed:
                _create_whole(path)
            self.conn = sqlite3.connect(path, timeout=30, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=FULL")
            self.conn.row_factory = sqlite3.Row
            migrate(self.conn)
        except sqlite3.DatabaseError as e:
            if is_fault(e):  # a full or read-only filesystem, a lock held elsewhere: not the file's content
                raise journal_fault(path, e, "open" if existed else "create") from e
            raise _not_journal(path, str(e)) from e
        except OSError as e:  # linking the new journal into place: a full or read-only directory
            raise journal_fault(path, e, "create") from e

    @classmethod
    def open_readonly(cls, path: str) -> Journal:
        """Open an existing journal for reading only (sqlite mode=ro): no schema, no WAL switch, no migration;
        works on read-only media and while a `run` writes to it. UserError when `path` is not a journal."""
        self = cls.__new__(cls)
        self.path = path
        self.readonly = True
        self.conn = check_journal_file(path)
        self.conn.row_factory = sqlite3.Row
        return self

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writes -----------------------------------------------------------------------------
    @contextmanager
    def _write(self) -> Iterator[None]:
        """One write transaction (BEGIN IMMEDIATE ... COMMIT, ROLLBACK on any exception); inside `batch()` the
        batch's transaction is the one."""
        if self._batch_depth:
            yield
            return
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:  # a COMMIT that failed (disk full) has rolled back already
                    with suppress(sqlite3.Error):  # the error that stopped it is the one to tell
                        self.conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as e:
            if is_fault(e):
                raise journal_fault(self.path, e) from e
            raise

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Several writes as one transaction, all or none: a kill -9 or an error part-way leaves the journal as it
        was (`tankbench import` of many files; importing again then adds nothing twice)."""
        with self._write():
            self._batch_depth += 1
            try:
                yield
            finally:
                self._batch_depth -= 1

    def _tx(self, sql: str, args: Iterable[Any] = ()) -> sqlite3.Cursor:
        with self._write():
            cur = self.conn.execute(sql, tuple(args))
            return cur

    def add_campaign(self, campaign_id: str, name: str, spec_path: str, spec_text: str) -> None:
        self._tx(
            "INSERT OR IGNORE INTO campaigns(id, name, spec_path, spec_text, created) VALUES (?,?,?,?,?)",
            (campaign_id, name, spec_path, spec_text, time.time()),
        )

    def add_tests(self, campaign_id: str, tests: Iterable[Test], jobs: dict[str, str]) -> None:
        """Record the plan (idempotent: a test id is recorded once; its number follows the latest plan)."""
        with self._write():
            for t in tests:
                self.conn.execute(
                    "INSERT INTO tests(id, campaign_id, number, name, target, target_kind, test_case, canonical,"
                    " fio_job) VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT(id) DO UPDATE SET number=excluded.number,"
                    " name=excluded.name, fio_job=excluded.fio_job",
                    (
                        t.id,
                        campaign_id,
                        t.number,
                        t.name,
                        t.target.name,
                        t.target.kind,
                        t.test_case,
                        json.dumps(t.canonical(), sort_keys=True),
                        jobs.get(t.id, ""),
                    ),
                )

    def add_design_step(self, campaign_id: str, step: str, data: Mapping[str, Any]) -> int:
        """Record a design step (a screening's or a refine's choice of tests); returns its row id."""
        cur = self._tx(
            "INSERT INTO design_steps(campaign_id, step, created, data) VALUES (?,?,?,?)",
            (campaign_id, step, time.time(), json.dumps(data, sort_keys=True)),
        )
        return int(cur.lastrowid or 0)

    def design_steps(self) -> list[dict[str, Any]]:
        """Every design step in the order it was recorded: id, campaign_id, step, created and its data."""
        if not self._has_table("design_steps"):  # a read-only journal of an older schema
            return []
        rows = self.conn.execute("SELECT id, campaign_id, step, created, data FROM design_steps ORDER BY id")
        return [dict(r, data=json.loads(r["data"])) for r in rows]

    def _has_table(self, name: str) -> bool:
        row = self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone()
        return row is not None

    def set_hosts(self, mode: str, hosts: Sequence[tuple[str, str, str]]) -> None:
        """Record a fleet campaign's hosts (name, kind, address) in its order, and its mode (schema 4)."""
        with self._write():
            self.conn.execute("DELETE FROM hosts")
            for i, (name, kind, address) in enumerate(hosts):
                self.conn.execute(
                    "INSERT INTO hosts(name, position, mode, kind, address, added) VALUES (?,?,?,?,?,?)",
                    (name, i, mode, kind, address, time.time()),
                )

    def set_input_keys(self, metric_keys: Sequence[str], check_keys: Sequence[str]) -> None:
        """Declare which metric and check keys the compact per-run table `run_inputs` keeps (what `report`
        reads); when they differ from the stored ones, re-index every run once, in one transaction."""
        if self._input_keys() == (tuple(metric_keys), tuple(check_keys)):
            return
        with self._write():
            self.conn.execute(
                "INSERT OR REPLACE INTO input_keys(id, metric_keys, check_keys) VALUES (1, ?, ?)",
                (json.dumps(list(metric_keys)), json.dumps(list(check_keys))),
            )
            self.conn.execute("DELETE FROM run_inputs")
            self._index_runs("")

    def _input_keys(self) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """The key lists of `run_inputs` (None: none declared, or a journal older than schema 3)."""
        try:
            row = self.conn.execute("SELECT metric_keys, check_keys FROM input_keys WHERE id=1").fetchone()
        except sqlite3.OperationalError:  # read-only journal of schema < 3: no such table
            return None
        return None if row is None else (tuple(json.loads(row[0])), tuple(json.loads(row[1])))

    def _index_runs(self, where: str, args: Sequence[Any] = ()) -> None:
        """(Re)write the `run_inputs` rows of the runs matching `where` (inside the caller's transaction)."""
        keys = self._input_keys()
        if keys is None:
            return
        m_sql, m_args = extract_sql("metrics", keys[0])
        c_sql, c_args = extract_sql("checks", keys[1])
        self.conn.execute(
            f"INSERT OR REPLACE INTO run_inputs(run_id, metrics, checks) SELECT id, {m_sql}, {c_sql} FROM runs"
            + (f" WHERE {where}" if where else ""),
            (*m_args, *c_args, *args),
        )

    def set_skip_note(self, test_id: str, note: str) -> None:
        self._tx("UPDATE tests SET skip_note=? WHERE id=?", (note, test_id))

    def add_fingerprint(self, fp: Fingerprint) -> str:
        self._tx(
            "INSERT OR IGNORE INTO fingerprints(id, data) VALUES (?,?)",
            (fp.id, json.dumps(dict(fp.data), sort_keys=True, default=str)),
        )
        return fp.id

    def begin_run(
        self, test_id: str, run_no: int, warmup: bool, attempt: int, expected_s: float, host: str, *, boot_id: str = ""
    ) -> int:
        """Insert a `running` row before fio starts, so a crash leaves evidence; return its row id. `boot_id` is
        the host's /proc/sys/kernel/random/boot_id, which tells a host crash from a killed tankbench on resume."""
        cur = self._tx(
            "INSERT INTO runs(test_id, run_no, warmup, attempt, status, started, expected_s, host,"
            " boot_id) VALUES (?,?,?,?,?,?,?,?,?)",
            (test_id, run_no, int(warmup), attempt, "running", time.time(), expected_s, host, boot_id),
        )
        return int(cur.lastrowid or 0)

    def set_run_pid(self, row_id: int, pid: int) -> None:
        self._tx("UPDATE runs SET pid=? WHERE id=?", (pid, row_id))

    def finish_run(self, row_id: int, run: Run) -> None:
        """Write the frozen result into the row begun by begin_run (and its `run_inputs` row), in one transaction."""
        self._tx_indexed(
            row_id,
            "UPDATE runs SET status=?, ended=?, fingerprint_id=?, wall_s=?, drain_s=?, metrics=?, checks=?,"
            " samples=?, fio_json=?, exit_status=?, stderr_tail=?, note=? WHERE id=?",
            (
                run.status,
                run.ended or time.time(),
                run.fingerprint_id,
                run.wall_s,
                run.drain_s,
                json.dumps(dict(run.metrics), sort_keys=True),
                json.dumps(dict(run.checks), sort_keys=True, default=str),
                json.dumps(dict(run.samples), separators=(",", ":")),
                run.fio_json,
                run.exit_status,
                run.stderr_tail,
                run.note,
                row_id,
            ),
        )

    def merge_run_checks(self, row_id: int, checks: dict[str, Any]) -> None:
        """Add checks to a finished run (e.g. the schedule's decision about its test, made after it ended)."""
        row = self.conn.execute("SELECT checks FROM runs WHERE id=?", (row_id,)).fetchone()
        merged = dict(json.loads(row["checks"] or "{}")) if row else {}
        merged.update(checks)
        self._tx_indexed(
            row_id, "UPDATE runs SET checks=? WHERE id=?", (json.dumps(merged, sort_keys=True, default=str), row_id)
        )

    def stale_run(self, row_id: int) -> tuple[str, str, str]:
        """(status, boot id, note) of a run row ("", "", "" when there is none)."""
        r = self.conn.execute("SELECT status, boot_id, note FROM runs WHERE id=?", (row_id,)).fetchone()
        return (r["status"], r["boot_id"] or "", r["note"] or "") if r else ("", "", "")

    def set_run_note(self, row_id: int, note: str) -> None:
        """Replace a finished run's note (a crash found on resume, with what the crashed kernel said)."""
        self._tx_indexed(row_id, "UPDATE runs SET note=? WHERE id=?", (note, row_id))

    def _tx_indexed(self, row_id: int, sql: str, args: Iterable[Any]) -> None:
        """One transaction: a change to a run's row, and its `run_inputs` row rewritten to match."""
        with self._write():
            self.conn.execute(sql, tuple(args))
            self._index_runs("id=?", (row_id,))

    def mark_crashed(self, boot_ids: Mapping[str, str] | None = None) -> list[tuple[int, str, int | None, str]]:
        """Close the runs a dead process left `running`: `crashed` when their host rebooted since (or that is
        unknown), `interrupted` when `boot_ids[host]` is still the boot id the row recorded (only tankbench
        died; such runs do not count toward skipping a test). Return (row, test, pid, host) of each."""
        rows = self.conn.execute("SELECT id, test_id, pid, host, boot_id FROM runs WHERE status='running'").fetchall()
        for r in rows:
            status = stale_run_status(r["boot_id"], (boot_ids or {}).get(r["host"], ""))
            self._tx(
                "UPDATE runs SET status=?, ended=?, note=? WHERE id=?",
                (status, time.time(), _STALE_NOTES[status], r["id"]),
            )
        return [(r["id"], r["test_id"], r["pid"], r["host"]) for r in rows]
