"""A log of what every VM boot cost: one JSON line per boot (a lab, a test guest) appended to the file named
by $TANKBENCH_BOOT_LOG, when it is set. The test suite sets it to print each run's boot costs; a user can set
it to see where a long campaign's time went."""

from __future__ import annotations

import json
import os
import time

ENV = "TANKBENCH_BOOT_LOG"


def record(what: str, name: str, seconds: float, **facts: object) -> None:
    """Append one boot ({"what": "lab" | "guest", "name", "seconds", "at", ...facts}); nothing when unset."""
    path = os.environ.get(ENV)
    if not path:
        return
    line = json.dumps({"what": what, "name": name, "seconds": round(seconds, 1), "at": round(time.time(), 1), **facts})
    # O_APPEND: lines from concurrent processes (two pytest workers, a campaign's guest) never interleave
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode() + b"\n")
    finally:
        os.close(fd)
