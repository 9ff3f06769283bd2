"""bench/report measures what `tankbench report` does: the same outputs from the same journal (the journal's path and
the version string aside), so its figures are the report's cost and not a path of its own."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import tankbench

BENCH = Path(__file__).resolve().parents[2] / "bench" / "report"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("bench_report", str(BENCH))
    spec = importlib.util.spec_from_loader("bench_report", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _normalised(path: Path, journal: Path) -> str:
    text = path.read_text(encoding="utf-8")
    text = text.replace(str(journal), "JOURNAL").replace(journal.name, "JOURNAL")
    return re.sub(r"tankbench [0-9][^ )\"`]*( \(commit [^)]*\))?", "tankbench VERSION", text)


def test_bench_report_writes_what_tankbench_report_writes(bench: ModuleType, tmp_path: Path) -> None:
    journal = tmp_path / "SYNTHETIC-journal.sqlite"
    bench.synthesise(str(journal), 300)
    times = bench.measure(str(journal), str(tmp_path / "bench"))
    assert set(times) == set(bench.STEPS) and all(w >= 0 and c >= 0 for w, c in times.values()), times
    before = journal.read_bytes()
    res = tankbench("report", "--journal", str(journal), "--out", str(tmp_path / "report"))
    assert res.returncode == 0, res.stderr
    assert journal.read_bytes() == before, "report opens the journal read-only"
    for name in ("index.html", "summary.md", "results.csv", "results.json"):
        ours, theirs = _normalised(tmp_path / "bench" / name, journal), _normalised(tmp_path / "report" / name, journal)
        assert ours == theirs, name
