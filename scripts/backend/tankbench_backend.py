"""Build backend: setuptools, plus the commit the wheel is built from, recorded as package data
(src/tankbench/BUILD_COMMIT) so that `tankbench --version` can name it without a checkout around."""

from __future__ import annotations

import os
import subprocess

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 - the PEP 517 hooks this module does not change

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STAMP = os.path.join(ROOT, "src", "tankbench", "BUILD_COMMIT")


def _git(*args: str) -> str:
    res = subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True, check=False)
    return res.stdout.strip() if res.returncode == 0 else ""


def _stamp() -> None:
    """Write the checkout's commit (with -dirty for uncommitted changes); keep the file of an sdist as it is."""
    commit = _git("rev-parse", "HEAD")
    if not commit:
        return
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
    with open(STAMP, "w", encoding="ascii") as f:
        f.write(commit + ("-dirty" if dirty else "") + "\n")


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):  # type: ignore[no-untyped-def]
    _stamp()
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory, config_settings=None):  # type: ignore[no-untyped-def]
    _stamp()
    return _setuptools.build_sdist(sdist_directory, config_settings)
