"""Record what produced a result: every JSON export says its format version and the tankbench that wrote it, and
a journal written before fingerprints carried the tankbench version and the agent's hash still reads."""

from __future__ import annotations

import json
from pathlib import Path

import tankbench
from tankbench.analysis.analyse import analyse_journal, load
from tankbench.analysis.compare import compare, comparison_dict
from tankbench.cli.advise import advice_dict
from tankbench.journal.db import Journal
from tankbench.reports.write import write_all
from tests.reportdata import local_journal


def test_results_json_and_the_json_outputs_carry_the_format_version(tmp_path: Path) -> None:
    path = local_journal(tmp_path)
    a = analyse_journal(path)
    doc = json.loads(Path(write_all(a, str(tmp_path / "out"))[4]).read_text())
    assert (doc["format_version"], doc["tankbench_version"]) == (tankbench.EXPORT_FORMAT, tankbench.__version__)
    assert list(doc)[:2] == ["format_version", "tankbench_version"], "first, so a reader sees it before the rest"
    assert advice_dict(a)["format_version"] == tankbench.EXPORT_FORMAT
    with Journal.open_readonly(path) as j:
        ds = load(j)
    assert comparison_dict(compare(ds, ds))["format_version"] == tankbench.EXPORT_FORMAT


def test_an_old_journal_without_versions_in_its_fingerprints_still_reads(tmp_path: Path) -> None:
    path = local_journal(tmp_path)
    with Journal.open_readonly(path) as j:
        fps = j.fingerprints()
    assert fps and all("tankbench_version" not in fp.data and "agent_sha256" not in fp.data for fp in fps.values())
    a = analyse_journal(path)
    assert a.leaderboards and not [w for w in a.warnings if w.code == "fingerprints-differ"]
