"""Helpers shared by subcommands: output to a path or '-', colour and terminal detection."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO


def print_json(value: Any, stream: TextIO = sys.stdout) -> None:
    json.dump(value, stream, indent=2, sort_keys=False, default=str)
    stream.write("\n")


def open_out(path: str) -> TextIO:
    """`-` is stdout; anything else is a file opened for writing (parent created)."""
    if path == "-":
        return sys.stdout
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return open(path, "w", encoding="utf-8", newline="")
