"""What qemu did with the guest's I/O errors during one request, as the controller recorded it (pure).

The controller (guest/controller.py) watches QMP while a request with `on_pause` runs: every time qemu stops
the VM on an I/O error (the disk's `werror` policy) it runs a host command, resumes the VM and records the
pause; every BLOCK_IO_ERROR event is counted by (node, operation, action, reason). These frozen values are
those records parsed, so nothing downstream reads the controller's JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: qemu's write-error policies (the device property `werror`); `auto` takes the block backend's default
WERROR_VALUES = ("enospc", "stop", "report", "ignore")
#: what `auto` means for a `-device` on a `-blockdev` node: blk_new() sets on_write_error = ENOSPC
#: (block/block-backend.c, qemu 7.2), and the device keeps it (hw/block/block.c blkconf_apply_backend_options)
WERROR_AUTO = "enospc"


def effective_werror(prop: str) -> str:
    """The write-error policy qemu applies for the device property's value ("auto" -> "enospc")."""
    return WERROR_AUTO if prop in ("", "auto") else prop


@dataclass(frozen=True)
class HostCommand:
    """The host command the controller ran while the VM was paused (e.g. freeing space)."""

    rc: int | None  # None: it could not run or timed out
    output: str
    seconds: float


@dataclass(frozen=True)
class Pause:
    """One stop of the VM on an I/O error, and how it ended."""

    at: float  # unix time qemu stopped the VM (the STOP event's timestamp)
    io_status: Mapping[str, str]  # node -> qemu's io-status of the disk ("nospace", "failed")
    wr_bytes: Mapping[str, int]  # node -> bytes qemu had written for the guest when it stopped
    errors: tuple[Mapping[str, Any], ...]  # the BLOCK_IO_ERROR events that led to this pause (first few)
    resumed: bool
    resumed_at: float | None = None
    paused_s: float | None = None
    command: HostCommand | None = None
    note: str = ""

    @property
    def nospace(self) -> bool:
        """qemu stopped because the host said ENOSPC (not another error)."""
        return "nospace" in self.io_status.values() or any(e.get("nospace") for e in self.errors)


@dataclass(frozen=True)
class IoErrors:
    """BLOCK_IO_ERROR events of one kind during a request: how qemu handled what the host returned."""

    node: str
    operation: str  # read | write
    action: str  # stop | report | ignore (the policy's decision for this error)
    reason: str  # the host's error, e.g. "No space left on device"
    nospace: bool
    count: int
    first_at: float


def _pause(rec: Mapping[str, Any]) -> Pause:
    cmd = rec.get("command")
    return Pause(
        at=float(rec["at"]),
        io_status={str(k): str(v) for k, v in dict(rec.get("io_status", {})).items()},
        wr_bytes={str(k): int(v) for k, v in dict(rec.get("wr_bytes", {})).items()},
        errors=tuple(dict(e) for e in rec.get("errors", ())),
        resumed=bool(rec.get("resumed")),
        resumed_at=float(rec["resumed_at"]) if rec.get("resumed_at") is not None else None,
        paused_s=float(rec["paused_s"]) if rec.get("paused_s") is not None else None,
        command=HostCommand(
            rc=None if cmd.get("rc") is None else int(cmd["rc"]),
            output=str(cmd.get("output", "")),
            seconds=float(cmd.get("seconds", 0.0)),
        )
        if isinstance(cmd, Mapping)
        else None,
        note=str(rec.get("note", "")),
    )


def parse_pauses(records: Sequence[Mapping[str, Any]]) -> tuple[Pause, ...]:
    """The controller's pause records -> Pauses, in the order they happened (ValueError on a malformed one)."""
    try:
        return tuple(sorted((_pause(r) for r in records), key=lambda p: p.at))
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"malformed pause record: {e}") from e


def parse_io_errors(records: Sequence[Mapping[str, Any]]) -> tuple[IoErrors, ...]:
    """The controller's BLOCK_IO_ERROR counts -> IoErrors, first seen first."""
    out = [
        IoErrors(
            node=str(r.get("node", "")),
            operation=str(r.get("operation", "")),
            action=str(r.get("action", "")),
            reason=str(r.get("reason", "")),
            nospace=bool(r.get("nospace", False)),
            count=int(r.get("count", 0)),
            first_at=float(r.get("first_at", 0.0)),
        )
        for r in records
    ]
    return tuple(sorted(out, key=lambda e: e.first_at))


def pause_record(p: Pause) -> dict[str, Any]:
    """A Pause as a journal check value (JSON): when, how long, why, and what freed it."""
    out: dict[str, Any] = {
        "at": p.at,
        "io_status": dict(p.io_status),
        "wr_bytes": dict(p.wr_bytes),
        "resumed": p.resumed,
        "paused_s": p.paused_s,
    }
    if p.command is not None:
        out["command_rc"] = p.command.rc
        out["command_s"] = p.command.seconds
        if p.command.rc != 0:
            out["command_output"] = p.command.output
    if p.errors:
        out["reason"] = str(p.errors[0].get("reason", ""))
    if p.note:
        out["note"] = p.note
    return out
