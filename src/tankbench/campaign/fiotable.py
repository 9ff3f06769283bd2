"""The [fio] table: fio options every test shares (those tankbench sets itself are refused with a pointer)."""

from __future__ import annotations

import math
import re
from typing import Any

from tankbench.campaign.vocab import FIO_RESERVED
from tankbench.keys import Keys


def parse_fio(keys: Keys, table: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key in FIO_RESERVED:
            raise keys.err(f"fio.{key}", value, "is set by tankbench", FIO_RESERVED[key])
        if not re.fullmatch(r"[a-z0-9_]+", key):
            raise keys.err(f"fio.{key}", value, "is not an fio option name", "fio options are lower_case_words")
        if isinstance(value, bool):
            value = int(value)
        if (
            not isinstance(value, (str, int, float))
            or (isinstance(value, str) and ("\n" in value or "\r" in value))
            or (isinstance(value, float) and not math.isfinite(value))
        ):
            raise keys.err(f"fio.{key}", value, "must be a string or number on one line", 'e.g. ioengine = "libaio"')
        out[key] = value
    return out
