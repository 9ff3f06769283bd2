"""tankbench: a reproducible storage-benchmark lab for ZFS."""

from __future__ import annotations

import os
import subprocess

__version__ = "0.1.0"


def build_commit() -> str:
    """The commit tankbench runs from: the checkout's (with -dirty for uncommitted changes) when it runs from
    one, else what the build recorded in the wheel (BUILD_COMMIT); "unknown" when neither says."""
    here = os.path.dirname(os.path.abspath(__file__))
    if os.path.exists(os.path.join(here, "..", "..", ".git")):
        try:
            head = subprocess.run(
                ["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
            dirty = subprocess.run(
                ["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.strip()
            return head + ("-dirty" if dirty else "")
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        with open(os.path.join(here, "BUILD_COMMIT"), encoding="ascii") as f:
            return f.read().strip() or "unknown"
    except OSError:
        return "unknown"


def version_line() -> str:
    """`tankbench 0.1.0 (commit 1a2b3c4d5e6f)`: what --version prints."""
    commit = build_commit()
    return f"tankbench {__version__} (commit {commit[:12] + ('-dirty' if commit.endswith('-dirty') else '')})"


#: the layout of tankbench's JSON exports (results.json, compare --json, advise --json): bump it when a key
#: changes meaning or goes away, so a reader can tell which layout it holds
EXPORT_FORMAT = 1
