"""The one error type users see: a message, a hint, exit status 2."""

from __future__ import annotations

import errno


class UserError(Exception):
    """Bad input or a refused action; printed as `Error: …` plus a hint, exit status 2."""

    exit_status = 2

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class SpecError(UserError):
    """A campaign file is malformed; the message names the file, key and value."""

    def __init__(self, path: str, key: str, value: object, problem: str, hint: str = "") -> None:
        where = f"{path}: " if path else ""
        shown = f" = {value!r}" if value is not None else ""
        named = key if key.isprintable() else repr(key)  # a TOML key "rw\n" would split the Error: line
        super().__init__(f"{where}{named}{shown}: {problem}", hint)
        self.path = path
        self.key = key
        self.value = value
        self.problem = problem


class HostError(Exception):
    """A host could not run a command (ssh down, agent missing): a failure of the environment."""


class LocalError(UserError):
    """The machine running tankbench failed under it: a full or read-only filesystem under the journal or the
    report, a journal another process holds locked. `Error:` with the cause and what to do, exit status 3 (a
    failure of the environment, as a host's; `run` again resumes)."""

    exit_status = 3


#: errno values that say the machine's filesystem, not the command's input, is at fault
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
READONLY_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM)


def is_os_fault(e: OSError) -> bool:
    """Whether an OSError is a fault of the machine: a full or read-only filesystem, no permission, an I/O error."""
    return e.errno in (*FULL_ERRNOS, *READONLY_ERRNOS, errno.EIO)


class HostHung(HostError):
    """The host's I/O hangs (issue 34 item 1): a run made no progress for hung_after while its processes waited in the
    kernel for I/O that did not complete. Not a failure of the run: of the machine, which only a reboot ends."""

    def __init__(self, evidence: str) -> None:
        super().__init__(f"the host's I/O hangs: {evidence}")
        self.evidence = evidence
