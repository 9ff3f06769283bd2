"""`tankbench lab …` as a subprocess: help texts, exact error text and exit codes for bad input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    return subprocess.run(
        [sys.executable, "-m", "tankbench", *args], capture_output=True, text=True, env=env, timeout=60
    )


@pytest.mark.parametrize("sub", ["build", "up", "status", "ssh", "down"])
def test_every_lab_command_has_help(sub: str, tmp_path: Path) -> None:
    cp = _run(["lab", sub, "--help"], tmp_path)
    assert cp.returncode == 0
    assert "usage: tankbench lab " + sub in cp.stdout
    assert len(cp.stdout.split("\n\n")[1].strip()) > 20  # a description, not just usage


def test_down_unknown_lab(tmp_path: Path) -> None:
    cp = _run(["lab", "down", "--name", "ghost"], tmp_path)
    assert cp.returncode == 2
    assert cp.stderr == ("Error: no lab named 'ghost'\nHint: no lab is up; start one with `tankbench lab up`\n")


def test_ssh_lab_not_up(tmp_path: Path) -> None:
    (tmp_path / "tankbench" / "labs" / "idle").mkdir(parents=True)
    cp = _run(["lab", "ssh", "--name", "idle", "--", "true"], tmp_path)
    assert cp.returncode == 2
    assert cp.stderr == ("Error: lab 'idle' is not up\nHint: start it with `tankbench lab up --name idle`\n")


def test_bad_disk_size(tmp_path: Path) -> None:
    cp = _run(["lab", "up", "--disk-size", "lots"], tmp_path)
    assert cp.returncode == 2
    assert cp.stderr.startswith("Error: invalid disk size 'lots'\nHint: ")
    assert "Traceback" not in cp.stderr


def test_status_json_of_a_lab_that_is_down(tmp_path: Path) -> None:
    cp = _run(["lab", "status", "--json"], tmp_path)
    assert cp.returncode == 1
    assert '"state": "down"' in cp.stdout
