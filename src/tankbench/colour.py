"""Colour for statuses on a terminal, as the conventions say (no-color.org, force-color.org):
NO_COLOR (non-empty) turns it off, whatever else is set; FORCE_COLOR (non-empty, not "0") turns it on off a
terminal (a pipe, CI logs); TERM=dumb turns it off; otherwise only a terminal gets colour."""

from __future__ import annotations

import os
from typing import TextIO

RESET = "\033[0m"
#: status words -> SGR colour: green for what worked, red for what failed, yellow for what needs a look
COLOURS = {
    "done": "32",
    "ok": "32",
    "failed": "31",
    "timeout": "31",
    "crashed": "31",
    "problem": "31",
    "warn": "33",
    "skipped": "33",
    "incomplete": "33",
    "running": "36",
    "info": "36",
    "pending": "2",
}


def enabled(stream: TextIO) -> bool:
    """Whether text written to `stream` may carry colour."""
    if os.environ.get("NO_COLOR"):
        return False
    force = os.environ.get("FORCE_COLOR", "")
    if force and force.lower() not in ("0", "false", "no"):
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def status(word: str, stream: TextIO, text: str | None = None) -> str:
    """`text` (default: the word itself, padded as given) coloured for the status `word` when `stream` takes colour."""
    shown = word if text is None else text
    code = COLOURS.get(word.strip())
    return f"\033[{code}m{shown}{RESET}" if code and enabled(stream) else shown
