"""tankbench: a reproducible storage-benchmark lab for ZFS."""

from __future__ import annotations

import functools
from pathlib import Path

from tankbench import gitversion

_HERE = Path(__file__).resolve().parent


@functools.cache
def _stamp() -> tuple[str, str]:
    """(version, commit): the checkout's, live, when tankbench runs from one (a commit or an edit since the
    install changes them); else what the build wrote into the package (VERSION, BUILD_COMMIT)."""
    live = gitversion.from_checkout(_HERE.parent.parent)
    if live is not None:
        return live.version, live.commit

    def read(name: str) -> str:
        try:
            return (_HERE / name).read_text(encoding="ascii").strip()
        except OSError:
            return ""

    return read("VERSION") or gitversion.UNKNOWN, read("BUILD_COMMIT") or "unknown"


def __getattr__(name: str) -> str:
    """`tankbench.__version__`, computed on first use (from a checkout it asks git)."""
    if name == "__version__":
        return _stamp()[0]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def build_commit() -> str:
    """The commit tankbench runs from (with -dirty for uncommitted changes, -unverified when read from another user's
    checkout without git, which cannot say); "unknown" when nothing says."""
    return _stamp()[1]


def version_line() -> str:
    """`tankbench 0.1.dev472+g1a2b3c4d5e6f (commit 1a2b3c4d5e6f)`: what --version prints."""
    commit = build_commit()
    mark = next((m for m in ("-dirty", "-unverified") if commit.endswith(m)), "")
    return f"tankbench {_stamp()[0]} (commit {commit[:12] + mark})"


#: the layout of tankbench's JSON exports (results.json, compare --json, advise --json): bump it when a key
#: changes meaning or goes away, so a reader can tell which layout it holds
EXPORT_FORMAT = 1
