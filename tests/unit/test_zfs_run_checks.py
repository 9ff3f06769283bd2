"""direct_io_confirm and run_validity on the real runs of tests/fixtures/journal-lab-zfs.sqlite (OpenZFS 2.3.2
in the lab): the prediction from version/properties against what each run measured."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest

from tankbench.zfs.checks import direct_io_confirm, run_validity
from tests.conftest import FIXTURES


def lab_runs() -> dict[tuple[str, int], tuple[dict[str, Any], dict[str, float], dict[str, Any]]]:
    """(test name, run_no) -> (params, metrics, checks) of every non-warm-up run, read-only."""
    uri = f"file:{FIXTURES / 'journal-lab-zfs.sqlite'}?mode=ro&immutable=1"
    conn = sqlite3.connect(uri, uri=True)
    try:
        rows = conn.execute(
            "SELECT t.name, r.run_no, t.canonical, r.metrics, r.checks FROM runs r "
            "JOIN tests t ON t.id = r.test_id WHERE r.warmup = 0"
        ).fetchall()
    finally:
        conn.close()
    return {(n, rn): (json.loads(c)["params"], json.loads(m), json.loads(ch)) for n, rn, c, m, ch in rows}


RUNS = lab_runs()


@pytest.mark.parametrize("run", [1, 2])
def test_zvol_reads_confirm_direct_ignored(run: int) -> None:
    """zvol: O_DIRECT still goes through the ARC; every read was an ARC hit and the disks read nothing."""
    _, m, c = RUNS[("zfs-zvol-randread-4k-async", run)]
    assert c["zfs.direct_ignored"] is True
    out = direct_io_confirm(c["zfs.direct_ignored"], m)
    assert out["zfs.direct_measured"] == "arc" and out["zfs.direct_arc_read_share"] == 1.0
    assert out["zfs.direct_confirmed"] is True and out["zfs.reads_from_memory"] is True
    assert out["zfs.direct_mismatch_note"] == ""


@pytest.mark.parametrize("name", ["zfs-fs-randread-4k-4k-async", "zfs-fs-randread-4k-def-async"])
def test_dataset_reads_on_2_3_confirm_direct_honoured(name: str) -> None:
    """OpenZFS 2.3.2 datasets: reads bypass the ARC (a few % counted there) and reach the disks."""
    for run in (1, 2):
        _, m, c = RUNS[(name, run)]
        out = direct_io_confirm(c["zfs.direct_ignored"], m)
        assert c["zfs.direct_ignored"] is False and out["zfs.direct_measured"] == "bypass"
        assert out["zfs.direct_arc_read_share"] < 0.1 and out["zfs.direct_confirmed"] is True
        assert out["zfs.reads_from_memory"] is False


def test_a_wrong_prediction_is_called_out_both_ways() -> None:
    """The same real measurements against the opposite prediction: a version table that is wrong (an
    OpenZFS that ignores O_DIRECT on a dataset, or a zvol that honours it) shows up as a mismatch."""
    _, zvol_m, _ = RUNS[("zfs-zvol-randread-4k-async", 1)]
    out = direct_io_confirm(False, zvol_m)
    assert out["zfs.direct_confirmed"] is False
    assert "100% of 3447 reads were counted by the ARC" in out["zfs.direct_mismatch_note"]
    assert "the disks read 0% of what fio read" in out["zfs.direct_mismatch_note"]
    _, ds_m, _ = RUNS[("zfs-fs-randread-4k-4k-async", 1)]
    out = direct_io_confirm(True, ds_m)
    assert out["zfs.direct_confirmed"] is False and "O_DIRECT looks honoured" in out["zfs.direct_mismatch_note"]


def test_write_tests_and_unknown_predictions_are_not_judged() -> None:
    """ARC counters do not count writes; no prediction (raw disk) means nothing to confirm."""
    _, m, c = RUNS[("zfs-zvol-write-4k-async", 1)]
    assert direct_io_confirm(c["zfs.direct_ignored"], m) == {}
    _, raw_m, raw_c = RUNS[("baseline-randread-4k-raw-disk-async", 1)]
    assert direct_io_confirm(raw_c.get("zfs.direct_ignored"), raw_m) == {}


def test_every_lab_run_is_a_valid_measurement() -> None:
    for key, (params, _, checks) in RUNS.items():
        assert run_validity(params, checks) == [], key


def test_properties_that_did_not_take_make_a_run_invalid() -> None:
    params, _, checks = RUNS[("zfs-fs-write-4k-4k-async", 1)]
    bad = dict(checks, **{"zfs.props_match": False, "zfs.props": dict(checks["zfs.props"], recordsize="131072")})
    (reason,) = run_validity(params, bad)
    assert reason.startswith("properties did not take: expected {") and "'recordsize': '131072'" in reason


@pytest.mark.parametrize(
    "name,present,says",
    [
        ("zfs-fs-write-4k-4k-async", True, "slog axis is off but the pool had log device"),
        ("zfs-slog-fs-write-4k-4k-async", False, "slog axis is on but the pool had no log device"),
    ],
)
def test_a_slog_state_that_contradicts_the_axis_makes_a_run_invalid(name: str, present: bool, says: str) -> None:
    params, _, checks = RUNS[(name, 1)]
    assert run_validity(params, dict(checks, **{"zfs.slog_present": present})) == [f"the test's {says} during the run"]


def test_a_scrub_during_the_run_makes_it_invalid() -> None:
    params, _, checks = RUNS[("zfs-zvol-write-4k-fsync", 2)]
    assert run_validity(params, dict(checks, **{"zfs.scan_active": "scrub"})) == [
        "a scrub was running on the pool when the run ended"
    ]


def test_a_size_valued_property_is_compared_in_bytes_and_every_settable_one_is_reported() -> None:
    """special_small_blocks = "16k" is 16384 to `zfs get -p`: every run of a campaign setting it was marked "not a
    valid measurement: properties did not take", and the dataset's own value was not among those the note listed
    (found in the lab with a special vdev)."""
    from tankbench.drivers.zfs_metrics import _zfs_value
    from tankbench.zfs.props import REPORTED, SETTABLE

    assert _zfs_value("special_small_blocks", "16k") == "16384"
    assert _zfs_value("recordsize", "1M") == "1048576" and _zfs_value("volblocksize", "8k") == "8192"
    assert _zfs_value("dnodesize", "auto") == "auto" and _zfs_value("copies", "2") == "2"
    assert set(SETTABLE) <= set(REPORTED)
