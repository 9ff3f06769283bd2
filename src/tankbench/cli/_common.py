"""Helpers shared by subcommands: output to a path or '-', colour and terminal detection."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO


def print_json(value: Any, stream: TextIO | None = None) -> None:
    """JSON to `stream` (default: sys.stdout as it is at the call, so a redirection made later counts)."""
    stream = stream or sys.stdout
    json.dump(value, stream, indent=2, sort_keys=False, default=str)
    stream.write("\n")


def open_out(path: str) -> TextIO:
    """`-` is stdout; anything else is a file opened for writing (parent created)."""
    if path == "-":
        return sys.stdout
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return open(path, "w", encoding="utf-8", newline="")
