"""`tankbench lab …` as a subprocess: help texts, exact error text and exit codes for bad input."""

from __future__ import annotations

import json
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


@pytest.mark.parametrize("sub", ["build", "up", "status", "list", "ssh", "down"])
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


def test_list_with_no_labs_says_so(tmp_path: Path) -> None:
    cp = _run(["lab", "list"], tmp_path)
    assert cp.returncode == 0 and "no labs on this machine" in cp.stdout, cp
    assert json.loads(_run(["lab", "list", "--json"], tmp_path).stdout) == []


def test_a_stale_lab_is_listed_with_the_space_it_holds_and_down_frees_it(tmp_path: Path) -> None:
    """A lab whose qemu is gone (a reboot, a kill -9) keeps its disk images: `lab list` names it stale with what
    they allocated, and `lab down` frees them (the recorded pid is no qemu of ours: nothing is killed)."""
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that was ours and is gone
    d = tmp_path / "tankbench" / "labs" / "old"
    d.mkdir(parents=True)
    config = {"disks": 1, "disk_size": "8G", "slog": False, "memory_mb": 3072, "l2arc": False, "cpus": 2}
    state = {"name": "old", "pid": dead.pid, "ssh_port": 1, "accelerator": "tcg", "config": config, "image_key": "k"}
    (d / "state.json").write_text(json.dumps({**state, "image_dir": "/nowhere", "started_at": 0.0}))
    with open(d / "tbdata0.img", "wb") as f:
        f.truncate(8 << 30)  # sparse: 8 GiB apparent
        f.write(os.urandom(3 << 20))  # 3 MiB allocated
    (tmp_path / "tankbench" / "labs" / "gone").mkdir()  # a lab that went down: keys and console log only
    cp = _run(["lab", "list"], tmp_path)
    assert cp.returncode == 0, cp.stderr
    row = next(line for line in cp.stdout.splitlines() if line.startswith("old "))
    assert row.split()[1:3] == ["stale", "3"] and row.split()[3] == "MiB", row
    assert "1 stale lab(s) hold 3 MiB: `tankbench lab down --name NAME` frees one" in cp.stdout
    assert "(1 lab(s) down" in cp.stdout and "gone" not in cp.stdout.replace("(1 lab(s) down", "")
    assert "gone" in _run(["lab", "list", "--all"], tmp_path).stdout
    listed = {lab["name"]: lab for lab in json.loads(_run(["lab", "list", "--json"], tmp_path).stdout)}
    assert listed["old"]["state"] == "stale" and 3 << 20 <= listed["old"]["held_bytes"] < 4 << 20, listed
    down = _run(["lab", "down", "--name", "old"], tmp_path)
    assert down.returncode == 0 and "was no longer running" in down.stderr, down
    assert not (d / "tbdata0.img").exists()
    assert {lab["name"]: lab["state"] for lab in json.loads(_run(["lab", "list", "--json"], tmp_path).stdout)} == {
        "gone": "down",
        "old": "down",
    }
