"""The report's info lines for the adaptive schedule's `settled` and `reopened` decisions (repeats.settle)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tankbench.analysis.analyse import analyse_journal
from tankbench.journal.db import Journal

FIXTURES = Path(__file__).parent.parent / "fixtures"


def test_settled_and_reopened_decisions_are_info_lines(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite"
    shutil.copy(FIXTURES / "journal-local-file.sqlite", path)
    with Journal(str(path)) as j:
        runs = [r for r in j.runs(with_samples=False) if r.status == "done" and not r.warmup]
        settled, reopened = runs[0], runs[-1]
        assert settled.row_id and reopened.row_id and settled.test_id != reopened.test_id
        j.merge_run_checks(settled.row_id, {"schedule.decision": "settled", "schedule.reason": "place 2 settled"})
        j.merge_run_checks(reopened.row_id, {"schedule.decision": "reopened", "schedule.reason": "in doubt again"})
    warns = {w.code: w for w in analyse_journal(str(path)).warnings}
    w = warns["schedule-settled"]
    assert w.severity == "info" and w.test_ids == (settled.test_id,) and w.run_rows == (settled.row_id,)
    assert "place 2 settled" in w.message
    assert warns["schedule-reopened"].test_ids == (reopened.test_id,)
    assert "in doubt again" in warns["schedule-reopened"].message
