"""`tankbench results`: one row per run, every column (CSV, JSON or a short table)."""

from __future__ import annotations

import argparse
import csv
import os
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from tankbench.analysis.limiters import name_limiter, run_facts
from tankbench.cli._common import open_out, print_json
from tankbench.cli.show import add_journal_args, open_journal
from tankbench.errors import UserError
from tankbench.journal import Journal
from tankbench.journal.db import TestRow
from tankbench.metrics import SUPERSEDED, Times, run_values, worst_p99_ms
from tankbench.model import Fingerprint, Run
from tankbench.reports.csv import safe
from tankbench.targets import traits_of

BASE_COLUMNS = [
    "run_id",
    "test_number",
    "test_id",
    "test_name",
    "test_case",
    "target",
    "target_kind",
    "run_no",
    "warmup",
    "attempt",
    "status",
    "host",
    "fingerprint_id",
    "started",
    "ended",
    "expected_s",
    "wall_s",
    "drain_s",
    "exit_status",
    "note",
    "limit.kind",
    "limit.evidence",
]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "results",
        help="every run with every column",
        description="One row per run with every measured column: fio metrics, wall and drain "
        "time, samplers' summaries, checks and test parameters.",
    )
    add_journal_args(p)
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--csv", nargs="?", const="-", metavar="PATH", help="write CSV to PATH (default: stdout)")
    fmt.add_argument("--json", nargs="?", const="-", metavar="PATH", help="write JSON to PATH (default: stdout)")
    p.set_defaults(func=cmd_results)


def run_limit(r: Run, t: TestRow | None, fps: Mapping[str, Fingerprint]) -> tuple[str, str]:
    """(limit.kind, limit.evidence) of a run: what it recorded, else (older journals, imported fio output) named
    now from its figures; ("", "") for a run that measured nothing."""
    if r.checks.get("limit.kind"):
        return str(r.checks["limit.kind"]), str(r.checks.get("limit.evidence", ""))
    if r.status != "done" or t is None:
        return "", ""
    fp = fps.get(r.fingerprint_id)
    props = dict(t.canonical.get("target", {}).get("props", {}))
    f = run_facts(t.params, props, traits_of(t.target_kind), r.metrics, r.checks, fp.data if fp else {}, r.drain_s)
    limit = name_limiter(f)
    return limit.kind, limit.evidence


def result_rows(journal: Journal) -> list[dict[str, Any]]:
    """Flat rows: base columns, param.*, journal metric keys, the registry's figures (tankbench.metrics: mibs,
    durable_mibs, …), what limited the run (limit.kind, limit.evidence) and check.* columns."""
    tests = {t.id: t for t in journal.tests()}
    fps = journal.fingerprints()
    rows = []
    for r in journal.iter_runs():
        t = tests.get(r.test_id)
        row: dict[str, Any] = {
            "run_id": r.row_id,
            "test_number": t.number if t else None,
            "test_id": r.test_id,
            "test_name": t.name if t else "",
            "test_case": t.test_case if t else "",
            "target": t.target if t else "",
            "target_kind": t.target_kind if t else "",
            "run_no": r.run_no,
            "warmup": r.warmup,
            "attempt": r.attempt,
            "status": r.status,
            "host": r.host,
            "fingerprint_id": r.fingerprint_id,
            "started": r.started,
            "ended": r.ended,
            "expected_s": r.expected_s,
            "wall_s": r.wall_s,
            "drain_s": r.drain_s,
            "exit_status": r.exit_status,
            "note": r.note,
        }
        for k, v in t.params.items() if t else ():
            row[f"param.{k}"] = v
        for k, v in sorted(r.metrics.items()):
            if k not in SUPERSEDED:  # an older tankbench's key whose meaning changed: the registry recomputes it
                row[k] = v
        ramp = float(t.canonical.get("ramp", 0.0) or 0.0) if t else 0.0
        row.update(run_values(r.metrics, Times(r.wall_s, r.expected_s, ramp, r.drain_s)))
        row["limit.kind"], row["limit.evidence"] = run_limit(r, t, fps)
        for k, v in sorted(r.checks.items()):
            row[f"check.{k}"] = v
        rows.append(row)
    return rows


def columns_of(rows: list[dict[str, Any]]) -> list[str]:
    cols = list(BASE_COLUMNS)
    extra: set[str] = set()
    for row in rows:
        extra.update(k for k in row if k not in BASE_COLUMNS)
    return cols + sorted(extra, key=lambda k: (k.startswith("check."), not k.startswith("param."), k))


def _check_out(path: str | None, option: str) -> None:
    """Refuse an output path we cannot write a file to before reading the journal."""
    if path and path != "-" and os.path.isdir(path):
        raise UserError(
            f"{option} {path}: is a directory",
            f"name a file, e.g. {option} {os.path.join(path, 'results' + option.replace('--', '.'))}",
        )


def _open(path: str, option: str) -> TextIO:
    try:
        return open_out(path)
    except OSError as e:
        raise UserError(f"{option} {path}: cannot write: {e.strerror}", "name a file in a writable directory") from e


def cmd_results(args: argparse.Namespace) -> int:
    _check_out(args.csv, "--csv")
    _check_out(args.json, "--json")
    with open_journal(args) as journal:
        rows = result_rows(journal)
    if args.json:
        out = _open(args.json, "--json")
        print_json(rows, out)
        if out is not sys.stdout:
            out.close()
        return 0
    if args.csv:
        out = _open(args.csv, "--csv")
        columns = columns_of(rows)
        writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore")
        # job names and options come from fio files: text a spreadsheet would run as a formula is neutralised
        # exactly as in the report's results.csv
        writer.writerow({c: safe(c) for c in columns})
        writer.writerows({k: safe(v) for k, v in r.items()} for r in rows)
        if out is not sys.stdout:
            out.close()
        return 0
    sys.stdout.write(
        f"{'run':>5} {'#':>4} {'test':40} {'run':>5} {'status':8} {'IOPS':>9} {'MiB/s':>8} "
        f"{'p99 ms':>8} {'wall s':>7} {'drain s':>7}  limit\n"
    )
    for r in rows:
        # the worst direction's (a unified_rw_reporting run's mixed one); "-" where fio gave none, not 0
        worst = worst_p99_ms(r)
        p99 = f"{worst:8.2f}" if worst is not None else f"{'-':>8}"
        run = "warm" if r["warmup"] else str(r["run_no"])
        if r["status"] == "done":
            figures = f"{r.get('total.iops', 0):9.0f} {r.get('total.bw_bytes', 0) / 1048576:8.1f} {p99}"
        else:  # a failed, crashed or timed-out run measured nothing: not "0 IOPS"
            figures = f"{'-':>9} {'-':>8} {'-':>8}"
        # an imported run has no wall or drain time of tankbench's: "-", not 0
        wall = f"{r['wall_s']:7.1f}" if r["wall_s"] is not None else f"{'-':>7}"
        drain = f"{r['drain_s']:7.2f}" if r["drain_s"] is not None else f"{'-':>7}"
        sys.stdout.write(
            f"{r['run_id']:>5} {r['test_number'] or 0:04d} {r['test_name'][:40]:40} {run:>5} {r['status']:8} "
            f"{figures} {wall} {drain}  {r['limit.kind'] or '-'}\n"
        )
    return 0
