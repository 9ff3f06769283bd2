"""Checking a TOML file's keys and values: one `SpecError` naming the file, the key and the value, with a hint.

Below every table parser (campaign sections in campaign/, a target kind's own table in targets/), so a kind can
parse its table without importing campaign/.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from tankbench.errors import SpecError
from tankbench.units import MAX_SIZE, parse_duration, parse_size

#: the longest duration any campaign key takes: beyond it a value is a typo (and would overflow fio's microseconds)
MAX_DURATION_S = 366 * 86400.0


class Keys:
    """Checks the keys and values of a TOML file's tables; carries the file name so every error names the
    file, the key and the value."""

    def __init__(self, path: str) -> None:
        self.path = path

    def err(self, key: str, value: object, problem: str, hint: str = "") -> SpecError:
        return SpecError(self.path, key, value, problem, hint)

    def unknown_keys(self, table: Mapping[str, Any], allowed: tuple[str, ...], prefix: str) -> None:
        for key in table:
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f"did you mean `{close[0]}`?" if close else f"known keys: {', '.join(allowed)}"
                raise self.err(f"{prefix}{key}", None, "unknown key", hint)

    def table(self, doc: Mapping[str, Any], key: str, required: bool = False) -> dict[str, Any]:
        value = doc.get(key)
        if value is None:
            if required:
                raise self.err(f"[{key}]", None, "missing table", f"add a [{key}] table")
            return {}
        if not isinstance(value, dict):
            raise self.err(key, value, "must be a table", f"write it as [{key}]")
        return value

    def duration(self, key: str, value: object, positive: bool = False) -> float:
        try:
            seconds = parse_duration(value)  # type: ignore[arg-type]
        except (ValueError, TypeError):
            raise self.err(
                key,
                value,
                "not a duration (and durations cannot be negative)",
                'write e.g. "30s", "2m", "1h30m" or a number of seconds',
            ) from None
        if positive and seconds <= 0:
            raise self.err(key, value, "must be longer than zero", 'e.g. "60s"')
        if 0 < seconds < 0.001:  # fio takes whole milliseconds: this would be written as 0, fio's "no limit"
            raise self.err(key, value, "is shorter than a millisecond", 'e.g. "500ms" or "1s"')
        if seconds > MAX_DURATION_S:
            raise self.err(key, value, "is longer than a year", 'e.g. "30s", "2m", "1h30m" or "7d"')
        return seconds

    def size(self, key: str, value: object, positive: bool = True) -> int:
        try:
            n = parse_size(value)  # type: ignore[arg-type]
        except (ValueError, TypeError):
            raise self.err(key, value, "not a size", 'write e.g. "4k", "1M", "64M", "8G" (powers of 1024)') from None
        if positive and n <= 0:
            raise self.err(key, value, "must be larger than zero", 'e.g. "4k"')
        if n > MAX_SIZE:
            raise self.err(
                key, value, "is larger than 1 EiB, the largest size tankbench takes", 'e.g. "4k", "1M" or "8G"'
            )
        return n

    def integer(self, key: str, value: object, lo: int, hi: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.err(key, value, "must be a whole number", f"e.g. {lo}")
        if not lo <= value <= hi:
            raise self.err(key, value, f"must be between {lo} and {hi}", f"e.g. {lo}")
        return value

    def boolean(self, key: str, value: object) -> bool:
        if not isinstance(value, bool):
            raise self.err(key, value, "must be true or false", "write it without quotes: true / false")
        return value

    def string(self, key: str, value: object) -> str:
        if not isinstance(value, str):
            raise self.err(key, value, "must be a string", "put it in double quotes")
        return value

    def choice(self, key: str, value: object, choices: tuple[str, ...]) -> str:
        if value not in choices:
            close = difflib.get_close_matches(str(value), choices, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"one of: {', '.join(choices)}"
            raise self.err(key, value, f"must be one of {', '.join(choices)}", hint)
        return str(value)
