"""Tests that crashed the host (issue 18 item 5): a section in every report and a warning from advise."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

from tankbench.analysis.analyse import analyse_journal
from tankbench.reports.json import analysis_dict
from tankbench.reports.markdown import summary_markdown
from tests.conftest import tankbench
from tests.reportdata import local_journal, section_html

NOTE = "the host failed during the run: lab: ssh: connection closed"


def crashed_journal(tmp_path: Path) -> tuple[str, str]:
    """The real local journal with two crashed attempts added to one test; returns (path, test id)."""
    path = local_journal(tmp_path)
    con = sqlite3.connect(path)
    cols = [r[1] for r in con.execute("PRAGMA table_info(runs)") if r[1] != "id"]
    row = con.execute("SELECT id, test_id FROM runs WHERE status='done' ORDER BY id LIMIT 1").fetchone()
    for attempt in (2, 3):
        picked = ", ".join(
            {"status": "'crashed'", "note": f"'{NOTE}'", "attempt": str(attempt)}.get(c, c) for c in cols
        )
        con.execute(f"INSERT INTO runs ({', '.join(cols)}) SELECT {picked} FROM runs WHERE id = ?", (row[0],))
    con.commit()
    con.close()
    return path, row[1]


def test_crashes_are_a_section_of_the_report_and_advise_warns(tmp_path: Path) -> None:
    path, test_id = crashed_journal(tmp_path)
    a = analyse_journal(path, "auto")
    assert len(a.crashes) == 1
    c = a.crashes[0]
    assert c.test_id == test_id and c.crashes == 2 and c.attempts >= 3 and c.notes == (NOTE,)
    assert a.recommendations[0].kind == "crash" and a.recommendations[0].basis == (test_id,)
    assert a.recommendations[0].text.startswith(f"Avoid {c.config}: its runs crashed the host 2 time(s)")
    md = summary_markdown(a)
    assert "## Tests that crashed the host" in md and f"| 2 of {c.attempts} |" in md
    assert analysis_dict(a)["crashed_host"][0]["crashes"] == 2
    res = tankbench("advise", "--journal", path, "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "crashed the host 2 time(s)" in res.stdout


def test_no_crash_no_section(tmp_path: Path) -> None:
    a = analyse_journal(local_journal(tmp_path), "auto")
    assert a.crashes == () and "crashed the host" not in summary_markdown(a)
    assert json.loads(json.dumps(analysis_dict(a)))["crashed_host"] == []


def test_a_test_guest_that_died_is_named_as_such_not_as_the_host(tmp_path: Path) -> None:
    """A crashed row the runner attributed to the test guest (crash.layer = guest, the host stayed up) is counted
    and worded as the guest's, in the report and in advise; the host's crashes keep their wording."""
    path, test_id = crashed_journal(tmp_path)
    con = sqlite3.connect(path)
    guest_note = "the test guest crashed during the run of this test: its console shows a kernel panic"
    first = con.execute("SELECT min(id) FROM runs WHERE status = 'crashed'").fetchone()[0]
    con.execute(
        "UPDATE runs SET note = ?, checks = ? WHERE id = ?",
        (guest_note, json.dumps({"crash.layer": "guest", "crash.guest": "kernel panic"}), first),
    )
    con.commit()
    con.close()
    a = analyse_journal(path, "auto")
    c = a.crashes[0]
    assert (c.crashes, c.guest_crashes) == (2, 1) and c.notes == (guest_note, NOTE)
    assert c.what == "the host 1 time(s) and the test guest 1 time(s)"
    assert a.recommendations[0].text.startswith(
        f"Avoid {c.config}: its runs crashed the host 1 time(s) and the test guest"
    )
    md = summary_markdown(a)
    assert (
        "## Tests that crashed the host or its test guest" in md and f"| 2 of {c.attempts} (1 the test guest) |" in md
    )
    assert analysis_dict(a)["crashed_host"][0]["guest_crashes"] == 1
    html = section_html(a, "crashes")
    assert "crashed the host or its test guest</h2>" in html and "2 of" in html and "(1 the test guest)" in html
    only_guest = replace(c, guest_crashes=2)
    assert only_guest.what == "the test guest 2 time(s)" and replace(c, guest_crashes=0).what == "the host 2 time(s)"
