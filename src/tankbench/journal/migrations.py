"""Versioned schema. Each migration takes the database from version i to i+1; never edit a landed one."""

from __future__ import annotations

import sqlite3

from tankbench.errors import UserError

MIGRATIONS: list[str] = [
    # 1: campaigns, tests, fingerprints, runs
    """
    CREATE TABLE campaigns (
        id TEXT PRIMARY KEY, name TEXT NOT NULL, spec_path TEXT, spec_text TEXT, created REAL NOT NULL
    );
    CREATE TABLE tests (
        id TEXT PRIMARY KEY, campaign_id TEXT NOT NULL, number INTEGER NOT NULL, name TEXT NOT NULL,
        target TEXT NOT NULL, target_kind TEXT NOT NULL, test_case TEXT NOT NULL,
        canonical TEXT NOT NULL, fio_job TEXT NOT NULL, skip_note TEXT NOT NULL DEFAULT ''
    );
    CREATE TABLE fingerprints (id TEXT PRIMARY KEY, data TEXT NOT NULL);
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        test_id TEXT NOT NULL REFERENCES tests(id),
        run_no INTEGER NOT NULL, warmup INTEGER NOT NULL, attempt INTEGER NOT NULL,
        status TEXT NOT NULL, started REAL NOT NULL, ended REAL, host TEXT NOT NULL DEFAULT '',
        pid INTEGER, fingerprint_id TEXT NOT NULL DEFAULT '',
        expected_s REAL NOT NULL, wall_s REAL, drain_s REAL,
        metrics TEXT NOT NULL DEFAULT '{}', checks TEXT NOT NULL DEFAULT '{}',
        samples TEXT NOT NULL DEFAULT '{}', fio_json TEXT NOT NULL DEFAULT '',
        exit_status INTEGER, stderr_tail TEXT NOT NULL DEFAULT '', note TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX runs_test ON runs(test_id, run_no, warmup);
    """,
    # 2: the host's boot id when a run began: on resume, a changed boot id means the host went down during
    # the run (crashed), the same one means only tankbench was interrupted
    "ALTER TABLE runs ADD COLUMN boot_id TEXT NOT NULL DEFAULT ''",
    # 3: a compact copy of what `report` reads of each run (the metrics registry's inputs and the checks it
    # uses), written with each run: loading 100,000 runs parsed every run's full metrics and checks JSON.
    # `input_keys` names the keys (in order) of the JSON arrays in `run_inputs`; runs without a row (older
    # journals until a writer indexes them, other key sets) are read from the full JSON as before.
    """
    CREATE TABLE input_keys (
        id INTEGER PRIMARY KEY CHECK (id = 1), metric_keys TEXT NOT NULL, check_keys TEXT NOT NULL
    );
    CREATE TABLE run_inputs (run_id INTEGER PRIMARY KEY, metrics TEXT NOT NULL, checks TEXT NOT NULL);
    """,
    # 4: a campaign over several hosts (fleet.py): which hosts, in the campaign's order, and the mode (split or
    # each) that tells the report whether hosts are columns to compare; runs name their host (runs.host) already
    """
    CREATE TABLE hosts (
        name TEXT PRIMARY KEY, position INTEGER NOT NULL, mode TEXT NOT NULL, kind TEXT NOT NULL,
        address TEXT NOT NULL DEFAULT '', added REAL NOT NULL
    );
    CREATE INDEX runs_host ON runs(host);
    """,
    # 5: the steps of a designed campaign (issue 29): a screening's choice of tests per workload, a refine's
    # top factors and fixed levels; `data` is the step's JSON (schedule/design.py, cli/refine.py)
    """
    CREATE TABLE design_steps (
        id INTEGER PRIMARY KEY AUTOINCREMENT, campaign_id TEXT NOT NULL, step TEXT NOT NULL,
        created REAL NOT NULL, data TEXT NOT NULL
    );
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the database to SCHEMA_VERSION; return the version it had before."""
    before = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if before > SCHEMA_VERSION:
        raise UserError(
            f"journal written by a newer tankbench (schema version {before}; this tankbench reads up to "
            f"{SCHEMA_VERSION})",
            "upgrade tankbench to read or extend this journal",
        )
    for version in range(before, SCHEMA_VERSION):
        conn.executescript("BEGIN;" + MIGRATIONS[version] + f"; PRAGMA user_version = {version + 1}; COMMIT;")
    return before
