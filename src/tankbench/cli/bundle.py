"""`tankbench bundle CAMPAIGN|JOURNAL`: one self-contained file of a campaign's results (docs/bundle.md)."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sqlite3
import sys
import tempfile
from typing import Any

from tankbench import __version__, build_commit
from tankbench.cli._common import print_json
from tankbench.cli.report import write_report
from tankbench.errors import UserError
from tankbench.journal.anonymise import Anonymiser, anonymise_journal, describe, user_key
from tankbench.journal.bundle import CAMPAIGN, JOURNAL, REPORT_DIR, SUFFIX, looks_like_bundle, write_bundle
from tankbench.journal.db import Journal, check_journal_file

_SQLITE = b"SQLite format 3\x00"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "bundle",
        help="write one file with a campaign's journal, fingerprints, campaign and report, to share",
        description="Write NAME.tankbench.zip: the journal, every host's fingerprint, the campaign as run and "
        "the report, with a manifest (schema version, tankbench commit, content hash). Anyone opens it with "
        "`tankbench report|results|show BUNDLE` and compares machines with `tankbench compare A B …`, "
        "with no access to the hosts. --anonymise replaces host names, user names, addresses, disk serials "
        "and WWNs by tokens (the same value gets the same token in every bundle you write).",
    )
    p.add_argument("source", metavar="CAMPAIGN|JOURNAL", nargs="?", help="a campaign file or preset, or a journal")
    p.add_argument("--journal", metavar="PATH", help="the journal (default: the campaign's)")
    p.add_argument("-o", "--output", metavar="FILE", help=f"the bundle to write (default: ./NAME{SUFFIX})")
    p.add_argument("--anonymise", "--anonymize", action="store_true", help="replace identifying names by tokens")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    p.add_argument("--json", action="store_true", help="print the manifest as JSON")
    p.set_defaults(func=cmd_bundle)


def _journal_of(args: argparse.Namespace) -> str:
    if args.journal:
        return str(args.journal)
    if not args.source:
        raise UserError("no campaign or journal given", "pass CAMPAIGN, a journal file, or --journal PATH")
    src = str(args.source)
    if looks_like_bundle(src):
        raise UserError(f"{src} is already a bundle", "share it as it is; `tankbench report` opens it")
    try:
        with open(src, "rb") as f:
            if f.read(len(_SQLITE)) == _SQLITE:
                return src
    except OSError:
        pass
    from tankbench.campaign import load_spec
    from tankbench.cli.presets import resolve_campaign
    from tankbench.runner import default_journal_path

    return default_journal_path(load_spec(resolve_campaign(src)))


def _campaigns(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    rows = conn.execute("SELECT id, name, spec_text FROM campaigns ORDER BY created, id").fetchall()
    return [{"id": r[0], "name": r[1], "text": r[2] or ""} for r in rows]


def _manifest_facts(journal: str) -> dict[str, Any]:
    """What the manifest says of a journal: campaigns, hosts, fingerprints, counts (from the copy bundled)."""
    conn = check_journal_file(journal)
    try:
        campaigns = _campaigns(conn)
        fps = {r[0]: json.loads(r[1]) for r in conn.execute("SELECT id, data FROM fingerprints ORDER BY id")}
        hosts = [r[0] for r in conn.execute("SELECT DISTINCT host FROM runs ORDER BY host")]
        n_runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
        n_tests = conn.execute("SELECT count(*) FROM tests").fetchone()[0]
    finally:
        conn.close()
    return {"campaigns": campaigns, "fingerprints": fps, "hosts": hosts, "runs": n_runs, "tests": n_tests}


def _copy(src: str, dest: str) -> None:
    """A consistent copy of a journal (SQLite's backup: safe while `run` writes to it), without a WAL."""
    with sqlite3.connect(f"file:{os.path.abspath(src)}?mode=ro", uri=True) as s, sqlite3.connect(dest) as d:
        s.backup(d)
        d.execute("PRAGMA journal_mode=DELETE")


def build(journal: str, output: str, anonymise: bool) -> tuple[dict[str, Any], list[str]]:
    """Write the bundle of `journal` to `output`; (its manifest, what anonymising replaced as lines)."""
    Journal.open_readonly(journal).close()  # refuses a missing file or one that is not a journal
    with tempfile.TemporaryDirectory(prefix="tankbench-bundling-") as tmp:
        copy = os.path.join(tmp, JOURNAL)
        changed: list[str] = []
        anon_summary: dict[str, int] | None = None
        if anonymise:
            anon = Anonymiser(user_key())
            anonymise_journal(journal, copy, anon)
            changed, anon_summary = describe(anon), anon.summary()
        else:
            _copy(journal, copy)
        facts = _manifest_facts(copy)
        if not facts["runs"]:
            raise UserError(f"{journal}: no runs to bundle", "run the campaign first (`tankbench run CAMPAIGN`)")
        report_dir = os.path.join(tmp, "report")
        _, paths, _ = write_report(copy, report_dir)
        members = {JOURNAL: _read(copy)}
        for c in facts["campaigns"][:1]:
            members[CAMPAIGN] = c["text"].encode()
        for p in sorted(paths):
            members[REPORT_DIR + os.path.relpath(p, report_dir)] = _read(p)
        manifest = {
            "created": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tankbench": {"version": __version__, "commit": build_commit()},
            "source": os.path.basename(journal),
            "anonymised": anon_summary,
            **facts,
        }
        if anonymise:
            manifest["source"] = JOURNAL
        return write_bundle(output, manifest, members), changed


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def cmd_bundle(args: argparse.Namespace) -> int:
    journal = _journal_of(args)
    with Journal.open_readonly(journal) as j:
        names = [c["name"] for c in j.campaigns()]
    output = args.output or f"{(names[0] if names else 'journal')}{SUFFIX}"
    if os.path.isdir(output):
        raise UserError(f"--output {output} is a directory", f"name a file, e.g. {os.path.join(output, 'x' + SUFFIX)}")
    if os.path.exists(output) and not args.force:
        raise UserError(f"{output} exists", "pass --force to replace it, or -o another file")
    parent = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(parent):
        raise UserError(f"cannot write {output}: no directory {parent}", "create it first, or -o another file")
    manifest, changed = build(journal, output, args.anonymise)
    if args.json:
        print_json(manifest)
        return 0
    size = os.path.getsize(output)
    print(
        f"wrote {output} ({size / 1e6:.1f} MB): {manifest['tests']} tests, {manifest['runs']} runs, "
        f"{len(manifest['fingerprints'])} fingerprint(s), report; content hash {manifest['content_hash'][:16]}"
    )
    if args.anonymise:
        print("anonymised (originals are not in the bundle; the key is " + _key_note() + "):")
        print("\n".join(changed) if changed else "  nothing identifying found")
    print(f"open it anywhere with: tankbench report {output}", file=sys.stderr)
    return 0


def _key_note() -> str:
    from tankbench.journal.anonymise import key_path

    return key_path()
