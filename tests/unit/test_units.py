import math

import pytest

from tankbench.units import MAX_SIZE, fmt_duration, fmt_size, parse_duration, parse_size, parse_threshold


@pytest.mark.parametrize(
    "text,expected",
    [("4k", 4096), ("1M", 1 << 20), ("64MiB", 64 << 20), ("8G", 8 << 30), ("512", 512), (4096, 4096), ("1.5k", 1536)],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["4q", "", "k", "-1M", "1.3", True])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError):
        parse_size(text)


@pytest.mark.parametrize(
    "text,expected", [("2s", 2.0), ("500ms", 0.5), ("1m30s", 90.0), ("1h", 3600.0), (5, 5.0), ("0s", 0.0), ("10", 10.0)]
)
def test_parse_duration(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["-5s", "2x", "", "s", "1m-2s"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_formatting():
    assert fmt_size(4096) == "4k" and fmt_size(1 << 20) == "1M" and fmt_size(1000) == "1000"
    assert fmt_duration(75) == "1m15s" and fmt_duration(3.5) == "3.5s" and fmt_duration(7200) == "2h00m"


def test_one_timing_threshold_grammar() -> None:
    """campaign.timing_threshold and report.timing_threshold share units.parse_threshold."""
    from tankbench.units import parse_threshold

    assert parse_threshold("10%") == (0.10, 0.0)
    assert parse_threshold(" 5.5 % ") == (0.055, 0.0)
    assert parse_threshold(0.2) == (0.2, 0.0)
    assert parse_threshold("30s") == (0.0, 30.0)
    for bad in ("ten", "-5%", True, -1, "10", None):
        with pytest.raises(ValueError):
            parse_threshold(bad)


@pytest.mark.parametrize("text", ["9" * 400 + "M", "9" * 400, "9" * 320 + ".5k"])
def test_parse_size_refuses_a_number_that_overflows(text):
    """A float that became inf used to raise OverflowError (a traceback) instead of ValueError."""
    with pytest.raises(ValueError, match="not a finite size"):
        parse_size(text)


@pytest.mark.parametrize("value", [math.inf, math.nan, "9" * 400 + "%", "9" * 400 + "s"])
def test_parse_threshold_refuses_what_is_not_finite(value):
    with pytest.raises(ValueError):
        parse_threshold(value)


def test_keys_refuse_sizes_beyond_an_exbibyte():
    from tankbench.errors import SpecError
    from tankbench.keys import Keys

    keys = Keys("c.toml")
    assert keys.size("matrix.bs", "1024P") == MAX_SIZE == 1 << 60
    for value in (2**70, "1025P", MAX_SIZE + 1):
        with pytest.raises(SpecError, match="is larger than 1 EiB"):
            keys.size("matrix.bs", value)
