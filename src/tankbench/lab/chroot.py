"""Chroot mechanics of the lab build: mounts in and out, logged commands, trees copied and removed safely, the
progress of each step, and the error a failed step raises."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tankbench.errors import HostError
from tankbench.lab.recipe import Progress


class LabBuildError(HostError):
    """A build step failed; the message names the step, its log and the log's tail."""

    def __init__(self, step: str, log: Path, detail: str = "") -> None:
        tail = detail or tail_of(log)
        super().__init__(f"lab build step '{step}' failed (log: {log}):\n{tail}")
        self.step = step
        self.log = log


def tail_of(path: Path, lines: int = 25) -> str:
    """The last lines of a log file (empty if it does not exist)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _mounts_under(root: Path) -> list[str]:
    """Mount points at or below root, deepest first (from /proc/self/mounts)."""
    prefix = str(root.resolve())
    found = []
    with open("/proc/self/mounts", encoding="utf-8") as f:
        for line in f:
            mp = line.split()[1].replace("\\040", " ")
            if mp == prefix or mp.startswith(prefix + "/"):
                found.append(mp)
    return sorted(found, key=len, reverse=True)


def unmount_all(root: Path) -> None:
    """Unmount everything mounted below a chroot (lazily if busy)."""
    for mp in _mounts_under(root):
        if subprocess.run(["umount", mp], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", mp], capture_output=True)


def remove_tree(root: Path) -> None:
    """rm -rf a chroot, but never while something (e.g. the host's /dev) is still mounted inside it."""
    if not root.exists():
        return
    unmount_all(root)
    if _mounts_under(root):
        raise HostError(f"refusing to delete {root}: still has mounts {_mounts_under(root)}")
    shutil.rmtree(root)


@contextmanager
def mounted(root: Path) -> Iterator[None]:
    """proc, sys, dev and dev/pts mounted in a chroot for the duration; always unmounted afterwards."""
    try:
        for fstype, src, rel in (
            ("proc", "proc", "proc"),
            ("sysfs", "sys", "sys"),
            ("bind", "/dev", "dev"),
            ("bind", "/dev/pts", "dev/pts"),
        ):
            target = root / rel
            target.mkdir(parents=True, exist_ok=True)
            argv = (
                ["mount", "--bind", src, str(target)] if fstype == "bind" else ["mount", "-t", fstype, src, str(target)]
            )
            subprocess.run(argv, check=True, capture_output=True)
        yield
    finally:
        unmount_all(root)


def chroot_argv(root: Path, argv: Sequence[str]) -> list[str]:
    return [
        "chroot",
        str(root),
        "/usr/bin/env",
        "-i",
        "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME=/root",
        "LANG=C.UTF-8",
        "DEBIAN_FRONTEND=noninteractive",
        *argv,
    ]


def run_logged(step: str, argv: Sequence[str], log: Path) -> None:
    with open(log, "ab") as f:
        f.write(("\n$ " + " ".join(argv) + "\n").encode())
        f.flush()
        rc = subprocess.run(list(argv), stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode
    if rc != 0:
        raise LabBuildError(step, log)


def copy_tree(src: Path, dst: Path) -> None:
    remove_tree(dst)
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)


class Steps:
    """Progress lines per step with elapsed seconds."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.t0 = time.monotonic()

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        t = time.monotonic()
        self.progress(f"lab build: {name} …")
        yield
        self.progress(
            f"lab build: {name} done in {time.monotonic() - t:.0f} s (total {time.monotonic() - self.t0:.0f} s)"
        )
