"""fio's unified_rw_reporting (one "mixed" block in place of read/write/trim) imported and run with its
figures, not as a run of 0 IOPS: real fio 3.33 output (tests/fixtures/README.md), local and --client."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tankbench.fio.parse import metrics_from_fio
from tests.conftest import FIXTURES, tankbench

PUBLIC = FIXTURES / "fio-public"


def raw(name: str) -> dict[str, Any]:
    doc = json.loads((PUBLIC / name).read_text())
    (job,) = doc.get("jobs") or [j for j in doc["client_stats"] if j["jobname"] != "All clients"]
    return dict(job)


@pytest.mark.parametrize(
    "name,where",
    [
        ("local-fio-3.33-unified-1-randread.json", "read"),  # a one-way pattern: its direction
        ("local-fio-3.33-unified-1-randrw.json", "mixed"),  # both ways: the split is unknown
        ("local-fio-3.33-client-unified-1-randrw.json", "mixed"),  # fio --client: client_stats
    ],
)
def test_the_mixed_block_is_the_runs_figures(name: str, where: str) -> None:
    job = raw(name)
    mixed = job["mixed"]
    assert "read" not in job and "write" not in job  # fio wrote only the mixed block
    m = metrics_from_fio(json.loads((PUBLIC / name).read_text()))
    assert m["fio.unified_rw_reporting"] == 1.0
    assert m[f"{where}.iops"] == m["total.iops"] == pytest.approx(mixed["iops"])
    assert m["total.bw_bytes"] == pytest.approx(mixed["bw_bytes"]) and m["total.io_bytes"] == mixed["io_bytes"]
    assert m[f"{where}.lat_p99_ns"] == mixed["clat_ns"]["percentile"]["99.000000"]
    assert m["fio.runtime_s"] == pytest.approx(mixed["runtime"] / 1000)
    assert not [k for k in m if k.startswith(("write.", "trim.", "read." if where == "mixed" else "mixed."))]


def test_both_reads_the_directions_and_not_their_sum_again() -> None:
    job = raw("local-fio-3.33-unified-both-randrw.json")
    m = metrics_from_fio(json.loads((PUBLIC / "local-fio-3.33-unified-both-randrw.json").read_text()))
    assert "fio.unified_rw_reporting" not in m and not [k for k in m if k.startswith("mixed.")]
    assert m["total.iops"] == pytest.approx(job["read"]["iops"] + job["write"]["iops"])
    assert m["total.iops"] == pytest.approx(job["mixed"]["iops"], rel=1e-6)  # fio's mixed is their sum


def test_import_and_results_show_the_figures(tmp_path: Path) -> None:
    journal = tmp_path / "j.sqlite"
    files = sorted(str(p) for p in PUBLIC.glob("local-fio-3.33-*unified*.json"))
    res = tankbench("import", *files, "--journal", str(journal))
    assert res.returncode == 0, res.stderr
    listing = tankbench("results", "--journal", str(journal))
    assert listing.returncode == 0, listing.stderr
    lines = [line.split() for line in listing.stdout.splitlines()[1:] if line.strip()]
    assert len(lines) == 4
    for fields in lines:
        iops, mibs, p99, wall, drain = fields[-6:-1]
        assert float(iops) > 1000 and float(mibs) > 1 and float(p99) > 0, fields  # not 0 IOPS, a p99 in ms
        assert wall == drain == "-", fields  # an imported run has no wall or drain time of tankbench's


def test_the_reports_p99_is_the_mixed_blocks_where_fio_split_nothing() -> None:
    """The registry's p99_ms (every report's p99 column, the leaderboards by p99) reads the mixed block of a
    randrw run that fio did not split — not "not measured" — and the listing and run lines use the same figure."""
    from tankbench.metrics import Times, run_values, worst_p99_ms

    name = "local-fio-3.33-unified-1-randrw.json"
    mixed_p99 = raw(name)["mixed"]["clat_ns"]["percentile"]["99.000000"]
    m = metrics_from_fio(json.loads((PUBLIC / name).read_text()))
    assert not [k for k in m if k.endswith("lat_p99_ns") and not k.startswith("mixed.")]
    values = run_values(m, Times(None, 10.0, 0.0, None), ("p99_ms",))
    assert values["p99_ms"] == worst_p99_ms(m) == pytest.approx(mixed_p99 / 1e6)
    assert worst_p99_ms({"read.iops": 5.0}) is None  # no latency: none, not 0
