"""Campaign [report], [mix] and [[goal]] parsing, and --mix text."""

from __future__ import annotations

import pytest

from tankbench.analysis.settings import parse_mix_text, parse_settings
from tankbench.errors import SpecError, UserError


def test_defaults() -> None:
    s = parse_settings("")
    assert s.baseline == "raw" and s.case_keys == ("rw", "bs") and s.timing_fraction == 0.10 and not s.goals


def test_full() -> None:
    s = parse_settings(
        '[report]\nbaseline = "disk"\ntiming_threshold = "30s"\n[mix]\n"read random 4k" = 3\n'
        '"write seq 1M" = 1\n[[goal]]\ncase = "write seq 1M"\nmetric = "MiB/s"\nvalue = 117\n'
        '[[goal]]\nname = "fast"\ncase = "read random 4k"\nmetric = "p99_ms"\nvalue = 2\n'
    )
    assert s.baseline == "disk" and s.timing_seconds == 30 and s.timing_limit(100) == 30
    assert s.mix == (("read random 4k", 0.75), ("write seq 1M", 0.25))
    assert s.goals[0].op == ">=" and s.goals[1].op == "<=" and s.goals[1].name == "fast"
    assert s.goals[0].met_by(117) and not s.goals[0].met_by(116.9)


@pytest.mark.parametrize(
    "text,key",
    [
        ('[report]\ntiming_threshold = "ten"', "report.timing_threshold"),
        ('[mix]\n"read random 4k" = -1', "mix.read random 4k"),
        ('[[goal]]\ncase = "x"\nmetric = "GB/s"\nvalue = 1', "goal[0].metric"),
        ('[[goal]]\ncase = "x"\nmetric = "IOPS"\nop = "=="\nvalue = 1', "goal[0].op"),
        ('[[goal]]\ncase = "x"\nmetric = "IOPS"', "goal[0].value"),
        ('[report]\ntest_case = "rw"', "report.test_case"),
    ],
)
def test_bad_values_name_the_key(text: str, key: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_settings(text, "c.toml")
    assert e.value.key == key and e.value.message.startswith("c.toml: ") and e.value.hint


def test_mix_text() -> None:
    assert parse_mix_text("read random 4k=56, write random 4k=24;read seq 1M=20") == (
        ("read random 4k", 0.56),
        ("write random 4k", 0.24),
        ("read seq 1M", 0.20),
    )
    for bad in ("", "read random 4k", "read random 4k=0", "=5", "read random 4k=x"):
        with pytest.raises(UserError):
            parse_mix_text(bad)
