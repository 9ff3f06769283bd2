"""Resume at boot (issue 18 item 2): the unit file's text, the refusals, installing and removing only our own unit.

systemd cannot run as PID 1 here, so `systemctl` is a fake at that boundary (FakeSystemctl, recording its calls);
the real systemd is tested in tests/lab/test_resume_boot.py."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tankbench import resumeboot
from tankbench.errors import UserError
from tests.conftest import tankbench

CID = "c38b93d1b5410f2e9a"


class FakeSystemctl:
    """Stands in for `systemctl` (systemd is not PID 1 in CI): records each call, answers 0."""

    def __init__(self, fail: str = "") -> None:
        self.calls: list[list[str]] = []
        self.fail = fail

    def __call__(self, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(args))
        code = 1 if self.fail and args[0] == self.fail else 0
        return subprocess.CompletedProcess(["systemctl", *args], code, "", "Failed to enable unit" if code else "")


def unit(tmp_path: Path, **kw: object) -> resumeboot.ResumeUnit:
    campaign = tmp_path / "my campaign.toml"
    campaign.write_text("[campaign]\n")
    return resumeboot.plan(
        CID,
        "nightly",
        str(campaign),
        str(tmp_path / "res" / "journal.sqlite"),
        ["--confirm", "/dev/disk/by-id/ata-X", "--set", "campaign.runtime=50%"],
        {"PATH": "/usr/bin:/bin", "PYTHONPATH": "/opt/tb", "TANKBENCH_LAB_ACCEL": "tcg", "SECRET_TOKEN": "x"},
    )


def test_unit_text_is_tagged_ordered_and_cannot_loop(tmp_path: Path) -> None:
    u = unit(tmp_path)
    text = resumeboot.unit_text(u)
    lines = text.splitlines()
    assert lines[0] == resumeboot.MARK and lines[1] == f"# tankbench-campaign={CID}"
    assert u.name == "tankbench-resume-c38b93d1b541.service"
    assert "After=local-fs.target zfs-import.target zfs-mount.service network-online.target" in lines
    assert "Restart=on-abnormal" in lines and "StartLimitBurst=3" in lines and "StartLimitIntervalSec=3600" in lines
    assert "WantedBy=multi-user.target" in lines
    exec_start = next(ln for ln in lines if ln.startswith("ExecStart="))
    journal = tmp_path / "res" / "journal.sqlite"
    assert exec_start == (
        f'ExecStart="{os.path.abspath(sys.executable)}" "-m" "tankbench" "run" "{tmp_path}/my campaign.toml" '
        f'"--journal" "{journal}" "--resume-at-boot" "--confirm" "/dev/disk/by-id/ata-X" '
        '"--set" "campaign.runtime=50%%"'
    )
    # path settings are not quoted (systemd takes them verbatim: a quoted one is "not absolute")
    assert f"ConditionPathExists={tmp_path}/my campaign.toml" in lines
    assert f"WorkingDirectory={os.getcwd()}" in lines
    # what it needs to find its Python packages and settings; nothing else of the caller's environment
    assert 'Environment="PYTHONPATH=/opt/tb"' in lines and 'Environment="TANKBENCH_LAB_ACCEL=tcg"' in lines
    assert f'Environment="TANKBENCH_RESUMED_BY={u.name}"' in lines
    assert "SECRET_TOKEN" not in text
    assert f"StandardOutput=append:{tmp_path}/res/resume-at-boot.log" in lines


def test_quoting_keeps_specifiers_and_variables_literal() -> None:
    assert resumeboot._quote('a "b" $HOME 100% \\x') == '"a \\"b\\" $$HOME 100%% \\\\x"'


@pytest.mark.parametrize(
    "kind,fleet,euid,systemd,problem",
    [
        ("ssh", False, 0, True, "needs the campaign to run on this machine (host kind 'ssh')"),
        ("lab", False, 0, True, "needs the campaign to run on this machine (host kind 'lab')"),
        ("local", True, 0, True, "not campaign.hosts"),
        ("local", False, 1000, True, "it needs root"),
        ("local", False, 0, False, "needs systemd as PID 1"),
    ],
)
def test_refusals(kind: str, fleet: bool, euid: int, systemd: bool, problem: str) -> None:
    why = resumeboot.refusal(kind, fleet, euid, systemd)
    assert why is not None and problem in why[0] and why[1]


def test_local_root_systemd_is_accepted() -> None:
    assert resumeboot.refusal("local", False, 0, True) is None


def test_install_then_remove(tmp_path: Path) -> None:
    fake = FakeSystemctl()
    u = unit(tmp_path)
    notes: list[str] = []
    path = resumeboot.install(u, notes.append, unit_dir=tmp_path, systemctl=fake)
    assert path.read_text() == resumeboot.unit_text(u)
    assert fake.calls == [["daemon-reload"], ["enable", u.name]]
    assert "--no-resume-at-boot" in notes[0] and str(path) in notes[0]
    assert resumeboot.remove(CID, notes.append, unit_dir=tmp_path, systemctl=fake)
    assert not path.exists() and fake.calls[2:] == [["disable", u.name], ["daemon-reload"]]
    assert not resumeboot.remove(CID, notes.append, unit_dir=tmp_path, systemctl=fake)  # nothing left to remove


def test_a_unit_we_did_not_write_is_never_touched(tmp_path: Path) -> None:
    fake = FakeSystemctl()
    u = unit(tmp_path)
    theirs = tmp_path / u.name
    theirs.write_text("[Unit]\nDescription=someone else's\n")
    with pytest.raises(UserError, match="not written by tankbench"):
        resumeboot.install(u, print, unit_dir=tmp_path, systemctl=fake)
    assert not resumeboot.remove(CID, print, unit_dir=tmp_path, systemctl=fake)
    assert theirs.read_text() == "[Unit]\nDescription=someone else's\n" and fake.calls == []
    # another campaign's unit is not this campaign's either
    other = resumeboot.unit_text(resumeboot.ResumeUnit("ffff", "other", ("x",), "/", (), "/l"))
    theirs.write_text(other)
    assert resumeboot.is_ours(theirs) and not resumeboot.is_ours(theirs, CID)
    assert not resumeboot.remove(CID, print, unit_dir=tmp_path, systemctl=fake)


def test_a_failed_enable_leaves_no_unit(tmp_path: Path) -> None:
    fake = FakeSystemctl(fail="enable")
    u = unit(tmp_path)
    with pytest.raises(UserError, match="systemctl enable .* failed"):
        resumeboot.install(u, print, unit_dir=tmp_path, systemctl=fake)
    assert not (tmp_path / u.name).exists()


CAMPAIGN = """[campaign]
name = "resume"
runtime = "1s"

[host]
kind = "local"

[[target]]
name = "scratch"
kind = "file"
path = "{tmp}/scratch"
size = "4M"

[matrix]
rw = ["read"]
bs = ["4k"]
"""


def test_run_refuses_here_and_writes_nothing(tmp_path: Path) -> None:
    """This machine (CI) has no systemd as PID 1: `run --resume-at-boot` stops before anything is written."""
    why = resumeboot.refusal("local", False, os.geteuid(), resumeboot.systemd_is_pid1())
    assert why is not None, "this test needs a machine where systemd is not PID 1 (or not root)"
    campaign = tmp_path / "c.toml"
    campaign.write_text(CAMPAIGN.format(tmp=tmp_path))
    work = tmp_path / "cwd"
    work.mkdir()
    res = tankbench("run", str(campaign), "--resume-at-boot", cwd=work)
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith(f"Error: {campaign}: --resume-at-boot {why[0]}"), res.stderr
    assert f"Hint: {why[1]}" in res.stderr and "Traceback" not in res.stderr
    assert os.listdir(work) == [] and not (tmp_path / "scratch").exists()


def test_no_resume_at_boot_with_nothing_installed_says_so(tmp_path: Path) -> None:
    campaign = tmp_path / "c.toml"
    campaign.write_text(CAMPAIGN.format(tmp=tmp_path))
    res = tankbench("run", str(campaign), "--no-resume-at-boot", "--no-report", "-q", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "resume at boot: no unit of this campaign (tankbench-resume-" in res.stderr


def test_flags_exclude_each_other(tmp_path: Path) -> None:
    res = tankbench("run", "x.toml", "--resume-at-boot", "--no-resume-at-boot", cwd=tmp_path)
    assert res.returncode == 2 and "not allowed with argument" in res.stderr


def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    """systemd's own parser (`systemd-analyze verify`, offline) finds no bad setting in the unit: paths with a
    space and a %, quoted arguments, the environment."""
    u = unit(tmp_path)
    u = resumeboot.ResumeUnit(**{**u.__dict__, "log": str(tmp_path / "res" / "log 50%.log")})
    path = tmp_path / u.name
    path.write_text(resumeboot.unit_text(u))
    res = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(path)], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0 and u.name not in res.stderr, res.stderr
