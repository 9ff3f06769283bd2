"""Sizes and durations as fio and users write them ("4k", "1M", "2s", "1m30s")."""

from __future__ import annotations

import math
import re

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)\s*$", re.IGNORECASE)
_SIZE_MULT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
_DUR_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?", re.IGNORECASE)
_DUR_MULT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "": 1.0}
#: the largest size a campaign key takes (1 EiB): beyond it a value is a typo, not a disk, a block or a file
MAX_SIZE = 1 << 60  # keys.Keys.size names it as "1 EiB"


def parse_size(text: str | int) -> int:
    """Bytes from "4k", "1M", "64MiB" or an int; k/M/G are powers of 1024 as in fio."""
    if isinstance(text, bool):
        raise ValueError("not a size")
    if isinstance(text, int):
        if text < 0:
            raise ValueError("negative size")
        return text
    m = _SIZE_RE.match(str(text))
    if not m:
        raise ValueError(f"not a size: {text!r}")
    number, unit = float(m.group(1)), m.group(2).lower()
    value = number * _SIZE_MULT[unit]
    if not math.isfinite(value):  # "999…9M": a float that overflowed (int() of it raised OverflowError)
        raise ValueError(f"not a finite size: {text!r}")
    if value != int(value):
        raise ValueError(f"not a whole number of bytes: {text!r}")
    return int(value)


def parse_duration(text: str | int | float) -> float:
    """Seconds from "2s", "500ms", "1m30s", "1h" or a number of seconds."""
    if isinstance(text, bool):
        raise ValueError("not a duration")
    if isinstance(text, (int, float)):
        if not math.isfinite(text):  # TOML has nan and inf: neither is a time fio or a sleep can take
            raise ValueError("not a finite duration")
        if text < 0:
            raise ValueError("negative duration")
        return float(text)
    s = str(text).strip()
    if s.startswith("-"):
        raise ValueError("negative duration")
    pos, total = 0, 0.0
    if not s:
        raise ValueError("empty duration")
    for m in _DUR_RE.finditer(s):
        if m.start() != pos:
            raise ValueError(f"not a duration: {text!r}")
        total += float(m.group(1)) * _DUR_MULT[(m.group(2) or "").lower()]
        pos = m.end()
    if pos != len(s):
        raise ValueError(f"not a duration: {text!r}")
    return total


THRESHOLD_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(%|s)\s*")


def parse_threshold(value: object) -> tuple[float, float]:
    """A timing threshold, the one grammar of campaign.timing_threshold and report.timing_threshold:
    "10%" -> (0.10, 0), a plain number is a fraction (0.1 -> (0.10, 0)), "30s" -> (0, 30). ValueError otherwise."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        if not math.isfinite(value):
            raise ValueError(f"not a finite timing threshold: {value!r}")
        return float(value), 0.0
    m = THRESHOLD_RE.fullmatch(value) if isinstance(value, str) else None
    if not m:
        raise ValueError(f"not a timing threshold: {value!r}")
    v = float(m.group(1))
    if not math.isfinite(v):  # "999…9%" overflows the float
        raise ValueError(f"not a finite timing threshold: {value!r}")
    return (v / 100.0, 0.0) if m.group(2) == "%" else (0.0, v)


def fmt_size(n: float) -> str:
    """Short binary size label the way fio writes block sizes: 4096 -> "4k", 1048576 -> "1M"."""
    for unit, mult in (("P", 1 << 50), ("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("k", 1 << 10)):
        if n >= mult and n % mult == 0:
            return f"{int(n // mult)}{unit}"
    return str(int(n))


def fmt_duration(seconds: float) -> str:
    """Human duration: 75 -> "1m15s", 3.5 -> "3.5s"."""
    if seconds < 60:
        return f"{seconds:.1f}s" if seconds != int(seconds) else f"{int(seconds)}s"
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h:
        return f"{h}h{m:02d}m"
    return f"{m}m{sec:02d}s"


def fmt_seconds_fio(seconds: float) -> str:
    """Duration for a fio job file (fio takes plain seconds or "Nms")."""
    if seconds == int(seconds):
        return str(int(seconds))
    return f"{int(round(seconds * 1000))}ms"


def pct(x: float, limit: float | None = None) -> str:
    """A share in whole percent; with one decimal where a share below a rule's `limit` would round up to it (84.6 %
    of a disk's capability printed "85 %" beside "not at its limit", whose threshold is 85 %)."""
    if limit is not None and x < limit <= round(100 * x) / 100:
        return f"{100 * x:.1f} %"
    return f"{100 * x:.0f} %"


def human(n: int) -> str:
    """Bytes for people: 3121381376 -> "2.9 GiB", 4294967296 -> "4 GiB"."""
    for unit, mult in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= mult:
            return f"{n / mult:.1f} {unit}".replace(".0 ", " ")
    return f"{n} B"
