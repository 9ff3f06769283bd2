"""The steady-state window figures every run records (schedule/steady.py, window_figures), which bench/ss-replay
also replays rules with, are fio's own computations: checked against real fio's `criterion` on the window it
reports (fio 3.33, the null engine at a Poisson-paced rate, so the seconds differ)."""

from __future__ import annotations

import json
import subprocess

import pytest

from tankbench.schedule.steady import steady_state_checks, window_figures


def fio_window(criterion: str) -> dict:
    argv = [
        "fio", "--name=ss", "--ioengine=null", "--size=1G", "--rw=randread", "--bs=4k", "--time_based",
        "--runtime=4", f"--ss={criterion}", "--ss_dur=3", "--rate_iops=300", "--rate_process=poisson",
        "--output-format=json",
    ]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout
    return json.loads(out[out.index("{") :])


@pytest.mark.parametrize("criterion,figure", [("iops_slope:0.0001%", "slope_pct"), ("iops:0.0001%", "spread_pct")])
def test_window_figures_are_fios_own(criterion: str, figure: str) -> None:
    for _ in range(3):  # Poisson-paced seconds are alike in rare windows (~1 in 2,000): such a window proves little
        doc = fio_window(criterion)
        block = doc["jobs"][0]["steadystate"]
        samples = block["data"]["iops"]
        if len(set(samples)) > 1:
            break
    assert len(samples) == 3 and len(set(samples)) > 1, samples  # a window whose seconds differ
    fio_says = float(block["criterion"].rstrip("%"))
    mine = window_figures(samples)[figure]
    # fio keeps its window's sums incrementally (steadystate.c), so its mean can be off the reported samples' by a
    # unit or two: 1 % of the figure, far below any limit's meaning
    assert mine == pytest.approx(fio_says, rel=0.01), (samples, block["criterion"])
    assert not block["attained"]  # the limit is far below what a paced run shows
    checks = steady_state_checks(doc)
    assert checks[f"steadystate.window_{figure}"] == mine and checks["steadystate.attained"] is False
