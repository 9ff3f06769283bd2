"""Faults of the machine running tankbench, under its journal (issue 34 item 4): a filesystem that is full or
read-only, a journal another process holds locked, an I/O error. Each becomes a LocalError (`Error:` with the
cause and what to do, exit status 3) instead of SQLite's two chained tracebacks; the run in flight stays
`running` in the journal, so the next `run` finds it, marks it `interrupted` and runs it again."""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from tankbench.errors import FULL_ERRNOS, READONLY_ERRNOS, LocalError

#: SQLite's primary result codes that say the machine, not the journal's content, is at fault
_FULL = ("SQLITE_FULL",)
_READONLY = ("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH")
_BUSY = ("SQLITE_BUSY", "SQLITE_LOCKED")
_IOERR = ("SQLITE_IOERR",)

RESUME = "finished runs are kept; the run in flight is marked for a rerun and `tankbench run` again resumes"


def _kind(e: BaseException) -> str:
    """full / readonly / busy / ioerr, or "" when the error is not a fault of the machine."""
    if isinstance(e, sqlite3.Error):
        name = str(getattr(e, "sqlite_errorname", "") or "")
        for kind, names in (("full", _FULL), ("readonly", _READONLY), ("busy", _BUSY), ("ioerr", _IOERR)):
            if any(name == n or name.startswith(n + "_") for n in names):
                return kind
        text = str(e)
        if "disk is full" in text:
            return "full"
        if "readonly database" in text or "unable to open database" in text:
            return "readonly"
        return "busy" if "database is locked" in text else ""
    if isinstance(e, OSError):
        if e.errno in FULL_ERRNOS:
            return "full"
        if e.errno in READONLY_ERRNOS:
            return "readonly"
        return "ioerr" if e.errno == errno.EIO else ""
    return ""


def is_fault(e: BaseException) -> bool:
    """Whether an error is a fault of the machine (full, read-only, locked, I/O error), not a bug."""
    return bool(_kind(e))


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB" if n < 1 << 30 else f"{n / (1 << 30):.1f} GiB"


def _where(path: str) -> tuple[str, str]:
    """(the existing directory the path is in, what its filesystem says: free space, read-only)."""
    d = os.path.dirname(os.path.abspath(path)) or "/"
    while not os.path.isdir(d) and d != "/":
        d = os.path.dirname(d)
    try:
        st = os.statvfs(d)
    except OSError:
        return d, ""
    free = _mib(st.f_bavail * st.f_frsize)
    ro = ", mounted read-only" if st.f_flag & os.ST_RDONLY else ""
    return d, f"{free} free on its filesystem{ro}"


def journal_fault(path: str, e: BaseException, doing: str = "write") -> LocalError:
    """The LocalError for a fault met while `doing` (write, create, open) the journal at `path`."""
    d, fs = _where(path)
    said = f"{e}" + (f"; {fs}" if fs else "")
    kind = _kind(e)
    if kind == "full":
        return LocalError(
            f"cannot {doing} the journal {path}: the filesystem under it is full ({said})",
            f"free space in {d} (or give the journal room elsewhere: --journal PATH), then run the same command "
            f"again: {RESUME}",
        )
    if kind == "readonly":
        return LocalError(
            f"cannot {doing} the journal {path}: the file or its directory is not writable ({said})",
            f"make {d} writable (remount it read-write, check its permissions), or pass --journal PATH on a "
            f"writable filesystem; {RESUME}",
        )
    if kind == "busy":
        return LocalError(
            f"cannot {doing} the journal {path}: another process holds it locked ({e})",
            "find it with `fuser -v " + path + "` (an sqlite3 shell, a backup tool, another tankbench) and let it "
            f"finish or end it, then run the same command again; {RESUME}",
        )
    return LocalError(
        f"cannot {doing} the journal {path}: {said}",
        f"check the disk under {d} (dmesg, smartctl); {RESUME}",
    )


def output_fault(path: str, e: OSError, what: str, hint: str) -> LocalError:
    """The LocalError for a fault met while writing an output (`what`: the report, a CSV) at `path`."""
    d, fs = _where(path)
    cause = e.strerror or str(e)
    return LocalError(f"cannot write {what} {path}: {cause}" + (f" ({fs})" if fs else ""), f"{hint} (in {d})")


@contextmanager
def writing(path: str, what: str, hint: str) -> Iterator[None]:
    """Turn a fault met while writing an output under `path` (a full or read-only filesystem) into LocalError."""
    try:
        yield
    except OSError as e:
        if not is_fault(e):
            raise
        raise output_fault(str(e.filename or path), e, what, hint) from e
