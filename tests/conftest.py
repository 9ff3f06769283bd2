"""Shared test helpers: run the CLI as a subprocess, the way a user would."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


#: the longest test files, longest first (each boots nested test guests or a lab of its own): scripts/test runs
#: pytest-xdist with two workers, one file per worker at a time, in this order, so the two longest start at once
#: on different workers and the short files fill in around them
LONG_FIRST = (
    "tests/lab/test_vmdisk.py",
    "tests/lab/test_presets.py",
    "tests/lab/test_guest_layers.py",
    "tests/lab/test_zfs_campaign.py",
    "tests/lab/test_guest.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first; the others keep their order (a stable sort)."""
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).relative_to(ROOT).as_posix(), len(rank)))


def zfs_fixture(name: str) -> str:
    """Text of a real OpenZFS output captured in the lab (tests/fixtures/zfs/)."""
    return (FIXTURES / "zfs" / name).read_text()


def tankbench(
    *args: str, cwd: str | os.PathLike[str] | None = None, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `python -m tankbench ARGS` and capture its output."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "tankbench", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )


@pytest.fixture
def cli():
    return tankbench


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def loopdev(tmp_path: Path) -> Iterator[str]:
    """A real loop device over a 64 MiB file, detached afterwards (only the one we attached)."""
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(64 << 20)
    dev = sh("losetup", "--find", "--show", str(img))
    try:
        yield dev
    finally:
        subprocess.run(["umount", str(tmp_path / "mnt")], capture_output=True)
        subprocess.run(["losetup", "-d", dev], check=True)


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A private directory with a short path (ssh control sockets must fit in ~100 bytes; pytest-xdist's tmp_path
    is long enough that code under test would fall back to its own short directory instead)."""
    d = Path(tempfile.mkdtemp(prefix="tb", dir="/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def tiny_initramfs(tmp: Path, userland: Path | None = None) -> Path:
    """A test guest initramfs built from stand-ins (a 2-byte "busybox" and "fio", no modules), optionally with a
    userland tree; its path."""
    from tankbench.guest import initramfs

    (tmp / "m").mkdir()
    (tmp / "m" / "modules.dep").write_text("")
    (tmp / "b").write_bytes(b"bb")
    out = tmp / "i.img"
    initramfs.build_initramfs(
        out,
        busybox=tmp / "b",
        fio=tmp / "b",
        init=b"x",
        modules_dir=tmp / "m",
        kernel_abi="k",
        modules=[],
        userland=userland,
    )
    return out
