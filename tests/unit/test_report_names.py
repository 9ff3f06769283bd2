"""QA finding 18: a [[goal]] case, [mix] name, [report] test_case key or baseline that names nothing of the
campaign is refused at plan time (as a claim no test covers is), not found empty by the report."""

from __future__ import annotations

import pytest

from tankbench.campaign import expand, load_spec
from tankbench.campaign.parse import parse_spec
from tankbench.cli.presets import resolve_campaign
from tankbench.errors import SpecError

BASE = """[campaign]
name = "c"
runtime = "1s"
host = "local"

[[target]]
name = "scratch"
kind = "file"
path = "/tmp/tb-scratch"
size = "8M"

[matrix]
rw = ["read", "randwrite"]
bs = ["4k"]
"""


@pytest.mark.parametrize(
    "extra",
    [
        '[[goal]]\ncase = "write random 4k"\nmetric = "IOPS"\nvalue = 1\n',
        '[mix]\n"read seq 4k" = 3\n"write random 4k" = 1\n',
        '[report]\ntest_case = ["rw", "iodepth"]\n',
        '[report]\nbaseline = "scratch"\n',
        '[report]\nbaseline = "file"\n',
        '[report]\nbaseline = "raw"\n',  # the default: a campaign without a raw target plans as before
    ],
)
def test_names_the_campaign_has_are_accepted(extra: str):
    assert len(expand(parse_spec(BASE + extra, "c.toml"))) == 2


@pytest.mark.parametrize(
    "extra,message",
    [
        ('[[goal]]\ncase = "write seq 4k"\nmetric = "IOPS"\nvalue = 1\n', "goal[0].case = 'write seq 4k'"),
        ('[mix]\n"read seq 4k" = 3\n"read random 1M" = 1\n', 'mix."read random 1M": is not a test case'),
        ('[report]\ntest_case = ["rw", "nonsense"]\n', "report.test_case[1] = 'nonsense'"),
        ('[report]\nbaseline = "zvol"\n', "report.baseline = 'zvol': names no target or target kind"),
    ],
)
def test_names_the_campaign_lacks_are_refused(extra: str, message: str):
    with pytest.raises(SpecError) as e:
        expand(parse_spec(BASE + extra, "c.toml"))
    assert message in str(e.value)
    assert "'read seq 4k'" in e.value.hint or "'scratch'" in e.value.hint or "'rw'" in e.value.hint


def test_a_scale_may_leave_out_cases_of_the_mix():
    """recordsize-mix's ci scale keeps two of the three cases its [mix] weighs: the mix is checked unscaled."""
    assert expand(load_spec(resolve_campaign("recordsize-mix"), "ci"))
    assert expand(load_spec(resolve_campaign("recordsize-mix")))
