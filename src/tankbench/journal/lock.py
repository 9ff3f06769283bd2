"""One `run` per journal at a time: an flock on `<journal>.lock`, taken only once the journal is known good."""

from __future__ import annotations

import contextlib
import fcntl
import os

from tankbench.errors import LocalError, UserError
from tankbench.journal.db import check_journal_file
from tankbench.journal.faults import is_fault


class JournalLock:
    """`with JournalLock(path):` holds an exclusive flock on `path + ".lock"` (the kernel releases it even after
    kill -9). An existing journal is validated first, so a refused journal leaves no lock file; the lock file is
    removed on exit only if this lock created it, and a pre-existing one is left as it was found."""

    def __init__(self, journal_path: str) -> None:
        self.journal_path = journal_path
        self.path = journal_path + ".lock"
        self.fd = -1
        self.created = False

    def __enter__(self) -> JournalLock:
        if os.path.lexists(self.journal_path):
            check_journal_file(self.journal_path).close()
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        while True:
            self._open()
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._close()
                raise UserError(
                    f"another `tankbench run` is using {self.journal_path}",
                    "wait for it to finish, or pass a different --journal",
                ) from None
            if self._still_linked():
                break
            self._close()  # its holder removed it between our open and our flock: take the new file
        if self.created:
            os.ftruncate(self.fd, 0)
            os.write(self.fd, str(os.getpid()).encode())
        return self

    def __exit__(self, *exc: object) -> None:
        if self.created:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)  # while still locked: a waiter that opened it retries on the new file
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        self._close()

    def _open(self) -> None:
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            self.created = True
        except FileExistsError:
            try:
                self.fd = os.open(self.path, os.O_RDWR)
            except OSError as e:
                raise UserError(
                    f"cannot open the lock file {self.path}: {e.strerror}",
                    "check its permissions, or pass a different --journal",
                ) from e
            self.created = False
        except OSError as e:
            error = LocalError if is_fault(e) else UserError  # a full or read-only filesystem: exit 3, as for a host
            raise error(
                f"cannot create the lock file {self.path}: {e.strerror}",
                "the journal's directory must be writable for `run` (and have room); pass a different --journal",
            ) from e

    def _still_linked(self) -> bool:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False
        own = os.fstat(self.fd)
        return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)

    def _close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
