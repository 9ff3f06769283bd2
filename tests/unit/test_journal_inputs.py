"""The compact per-run copy of what `report` reads (schema 3: `run_inputs`): written with each run, built once
for older journals, never used when it was made for other keys, and the same values as the full JSON."""

from __future__ import annotations

import shutil
from pathlib import Path

from tankbench.analysis.analyse import analyse_dataset, load
from tankbench.analysis.cases import CHECK_KEYS, METRIC_KEYS, index_for_reports
from tankbench.journal.db import Journal
from tankbench.model import Run

FIXTURES = Path(__file__).parent.parent / "fixtures"


def values(j: Journal) -> list[dict[str, object]]:
    return list(j.iter_run_values(METRIC_KEYS, CHECK_KEYS))


def test_old_journals_are_indexed_once_and_read_the_same(tmp_path: Path) -> None:
    for golden in sorted(FIXTURES.glob("journal-*.sqlite")):
        path = tmp_path / golden.name
        shutil.copy(golden, path)
        with Journal.open_readonly(str(path)) as ro:  # as it is (schema < 3): read from the full JSON
            before = values(ro)
            report_before = analyse_dataset(load(ro)).leaderboards
        with Journal(str(path)) as j:
            index_for_reports(j)
            assert j.conn.execute("SELECT count(*) FROM run_inputs").fetchone()[0] == len(before)
            assert values(j) == before
            assert analyse_dataset(load(j)).leaderboards == report_before, golden.name


def test_each_run_writes_its_row_and_a_merge_of_checks_rewrites_it(tmp_path: Path) -> None:
    shutil.copy(FIXTURES / "journal-local-file.sqlite", tmp_path / "j.sqlite")
    with Journal(str(tmp_path / "j.sqlite")) as j:
        index_for_reports(j)
        test_id = j.tests()[0].id
        row = j.begin_run(test_id, 9, False, 1, 3.0, "local")
        assert j.conn.execute("SELECT count(*) FROM run_inputs WHERE run_id=?", (row,)).fetchone()[0] == 0
        run = Run(
            test_id=test_id,
            run_no=9,
            warmup=False,
            attempt=1,
            status="done",
            started=1.0,
            ended=5.0,
            host="local",
            fingerprint_id="fp",
            expected_s=3.0,
            wall_s=3.1,
            metrics={"total.bw_bytes": 1e6, "unrelated.key": 7.0},
            checks={"layout.verified": True},
        )
        j.finish_run(row, run)
        j.merge_run_checks(row, {"schedule.decision": "stop"})
        got = [v for v in values(j) if v["id"] == row][0]
        assert got["metrics"] == {"total.bw_bytes": 1e6} and got["checks"]["layout.verified"] == 1
        if "schedule.decision" in CHECK_KEYS:
            assert got["checks"]["schedule.decision"] == "stop"
        # another tankbench reading other keys does not trust a copy made for these ones
        other = list(j.iter_run_values(("total.bw_bytes", "unrelated.key"), ()))
        assert [v for v in other if v["id"] == row][0]["metrics"] == {"total.bw_bytes": 1e6, "unrelated.key": 7.0}
