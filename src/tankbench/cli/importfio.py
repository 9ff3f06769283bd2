"""`tankbench import`: foreign fio JSON results into a journal, so they can be reported and compared."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tankbench.analysis.cases import index_for_reports
from tankbench.errors import UserError
from tankbench.fio.importer import import_files, parse_facts, read_fio_file
from tankbench.journal.db import Journal


def register(sub: Any) -> None:
    p = sub.add_parser(
        "import",
        help="import fio JSON result files into a journal",
        description="Add fio --output-format=json or json+ results (fio 2.1 to 3.4x, local or --client; UTF-8, "
        "or UTF-16 with a BOM) to a journal: one test per distinct job (rw, bs, iodepth, direct, sync, "
        "target, other options) and one run per job and file. A job's parallel entries (numjobs without "
        "group_reporting, each --client host) are one run: IOPS and bandwidth summed, latency pooled "
        "(percentiles exact from json+ histograms, else marked approximate). Each file gets its own "
        "fingerprint (fio version, client hosts). Wall time, samplers and layout checks are unknown for "
        "imported runs; the report says so.",
    )
    p.add_argument("files", nargs="+", metavar="FILE.json", help="fio JSON output files")
    p.add_argument("--journal", required=True, metavar="J", help="journal file (created if missing)")
    p.add_argument(
        "--fingerprint",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a fact about the system that ran fio, e.g. accelerator=tcg, kernel=6.12, zfs_version=2.3.2 (repeatable)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    facts = parse_facts(args.fingerprint)
    for path in args.files:  # validate every file before writing anything
        read_fio_file(path)
    if not args.files:
        raise UserError("no files to import", "pass fio JSON files")
    with Journal(args.journal, create=True) as j:
        index_for_reports(j)
        skipped: dict[str, int] = {}
        done = import_files(j, args.files, facts, skipped)
    for path, n in skipped.items():
        print(f"{path}: skipped {n} job result{'s' if n != 1 else ''} already imported", file=sys.stderr)
    tests = {t.id for t, _ in done}
    print(f"imported {len(done)} runs of {len(tests)} tests into {args.journal}")
    if not done:
        print("nothing new: every job result in these files was already imported", file=sys.stderr)
    return 0
