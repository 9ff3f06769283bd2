"""scripts/setup installs what running needs, and the tests' tools only with --test; on Proxmox VE it uses Proxmox's
own qemu and never asks apt for Debian's conflicting qemu-system-x86. dpkg-query and apt-get are stand-ins (fakes
named as such, on PATH): the real ones would change this machine."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = (
    "fio qemu-system-x86 qemu-utils debootstrap e2fsprogs openssh-client util-linux kmod xz-utils zstd cpio procps "
    "rsync fdisk python3 python3-venv ca-certificates"
).split()
TESTS = ["chromium", "fonts-dejavu-core", "openssh-server", "pipx"]


def run_setup(tmp_path: Path, installed: list[str], *args: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run a copy of scripts/setup in a checkout whose .venv is up to date; returns (result, what apt-get got)."""
    (tmp_path / "scripts").mkdir(exist_ok=True)
    shutil.copy2(ROOT / "scripts" / "setup", tmp_path / "scripts" / "setup")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True, exist_ok=True)
    (venv / "tankbench").write_text("#!/bin/sh\n")
    (venv / "tankbench").chmod(0o755)
    want = hashlib.sha256((tmp_path / "pyproject.toml").read_bytes()).hexdigest()[:16]
    (tmp_path / ".venv" / ".tankbench-stamp").write_text(want + ("+test" if "--test" in args else "") + "\n")
    fake = tmp_path / "fakebin"
    fake.mkdir(exist_ok=True)
    (fake / "dpkg-query").write_text(
        "#!/bin/sh\n# fake dpkg-query: the packages in $FAKE_INSTALLED are installed\n"
        "for last; do :; done\n"
        'for p in $FAKE_INSTALLED; do [ "$p" = "$last" ] && { printf "install ok installed"; exit 0; }; done\nexit 1\n'
    )
    (fake / "apt-get").write_text(
        f'#!/bin/sh\n# fake apt-get: records its arguments\necho "$@" >> {tmp_path}/apt.log\n'
    )
    for f in ("dpkg-query", "apt-get"):
        (fake / f).chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}", FAKE_INSTALLED=" ".join(installed))
    res = subprocess.run(
        ["bash", str(tmp_path / "scripts" / "setup"), *args], capture_output=True, text=True, env=env, timeout=60
    )
    log = tmp_path / "apt.log"
    return res, log.read_text() if log.exists() else ""


def test_the_first_command_installs_what_running_needs_and_the_test_command_the_rest(tmp_path: Path) -> None:
    res, apt = run_setup(tmp_path, [p for p in RUNTIME if p != "fio"])
    assert res.returncode == 0, res.stderr
    installs = [line.split() for line in apt.splitlines() if " install " in f" {line} "]
    assert installs and installs[0][-1] == "fio" and not set(TESTS) & set(installs[0]), apt
    (tmp_path / "t").mkdir()
    res, apt = run_setup(tmp_path / "t", RUNTIME, "--test")
    assert res.returncode == 0, res.stderr
    installs = [line.split() for line in apt.splitlines() if " install " in f" {line} "]
    assert installs and set(installs[0]) >= set(TESTS), apt


def test_proxmox_uses_its_own_qemu_and_never_installs_debians(tmp_path: Path) -> None:
    pve = [p for p in RUNTIME if p not in ("qemu-system-x86", "qemu-utils")] + ["pve-qemu-kvm"]
    res, apt = run_setup(tmp_path, pve)
    assert res.returncode == 0, res.stderr
    assert apt == "", f"apt-get was called: {apt}"
    assert "Proxmox VE" in res.stderr and "pve-qemu-kvm" in res.stderr and "conflict" in res.stderr
    res, apt = run_setup(tmp_path, [p for p in pve if p != "fio"])
    assert res.returncode == 0, res.stderr
    assert "fio" in apt and "qemu-system-x86" not in apt and "qemu-utils" not in apt, apt


def test_an_unknown_option_is_refused(tmp_path: Path) -> None:
    res, _ = run_setup(tmp_path, RUNTIME, "--bogus")
    assert res.returncode == 2 and res.stderr.startswith("Error: ") and "Hint:" in res.stderr
