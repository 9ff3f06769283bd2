"""QA finding 8: a validation pattern anchored with `$` accepts a value ending in "\n" (`$` also matches before a
last newline), and such a value split fio job files and section headers. Every one of them matches whole values."""

from __future__ import annotations

import re

import pytest

from tankbench.campaign import hosts, login, vocab
from tankbench.guest import qemu
from tankbench.guestconf import machine
from tankbench.targets import nfs
from tankbench.zfs import props

PATTERNS = [
    (vocab.NAME_RE, "scratch"),
    (vocab.SS_RE, "iops:5%"),
    (vocab.TUNABLE_RE, "zfs_arc_max"),
    (vocab.TUNABLE_VALUE_RE, "1024"),
    (props.COMPRESSION_RE, "lz4"),
    (machine.CPU_RE, "host,+aes"),
    (nfs._ADDRESS_RE, "10.0.0.1"),
    (nfs._OPTIONS_RE, "vers=4.2,hard"),
    (qemu.ID_RE, "tbdata0"),
]
#: patterns without anchors, used with fullmatch only
WHOLE = [
    (hosts._LAB_NAME, "bench"),
    (hosts._SSH, "root@10.0.0.2"),
    (login.SSH_USER_RE, "root"),
    (login.SSH_ADDRESS_RE, "fd00::2"),
]


@pytest.mark.parametrize("pattern,good", PATTERNS, ids=[str(i) for i in range(len(PATTERNS))])
def test_a_trailing_newline_is_refused(pattern: re.Pattern[str], good: str):
    assert pattern.fullmatch(good) and pattern.match(good)
    assert not pattern.match(good + "\n") and not pattern.fullmatch(good + "\n")


@pytest.mark.parametrize("pattern,good", WHOLE, ids=[str(i) for i in range(len(WHOLE))])
def test_whole_value_patterns_refuse_a_trailing_newline(pattern: re.Pattern[str], good: str):
    assert pattern.fullmatch(good) and not pattern.fullmatch(good + "\n")


POOL = '[pool]\nname = "{name}"\nvdevs = ["/dev/disk/by-id/a"]\nconfirm = ["/dev/disk/by-id/a"]\n'
BASE = """[campaign]
name = "c"
runtime = "1s"
host = "local"
{extra}
[[target]]
name = "fs"
kind = "dataset"
size = "8M"
{target}
[matrix]
rw = ["read"]
bs = ["4k"]
{matrix}
"""


@pytest.mark.parametrize(
    "extra,target,matrix,message",
    [
        (POOL.format(name="tp\\n"), "", "", "pool.name = 'tp\\n': not a valid pool name"),
        ('[pool]\nparent = "tank/b\\n"\n', "", "", "pool.parent = 'tank/b\\n': not a dataset name"),
        (POOL.format(name="tp"), "", 'compression = ["lz4\\n"]', "matrix.compression = 'lz4\\n'"),
        (POOL.format(name="tp"), 'props = { compression = "lz4\\n" }', "", "props.compression = 'lz4\\n'"),
        (POOL.format(name="tp"), "", 'layout = ["compressible:50%\\n"]', "needs a percentage from 1 to 99"),
        (POOL.format(name="tp") + '[tunables]\nzfs_arc_max = "1\\n"\n', "", "", "tunables.zfs_arc_max"),
    ],
)
def test_campaign_values_with_a_trailing_newline(extra: str, target: str, matrix: str, message: str):
    from tankbench.campaign.parse import parse_spec
    from tankbench.errors import SpecError

    text = BASE.format(extra=extra, target=target, matrix=matrix)
    with pytest.raises(SpecError) as e:
        parse_spec(text, "c.toml")
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_target_prop_value_on_two_lines_is_refused():
    from tankbench.campaign.parse import parse_spec
    from tankbench.errors import SpecError

    text = BASE.format(extra=POOL.format(name="tp"), target='props = { checksum = "on\\nx" }', matrix="")
    with pytest.raises(SpecError, match=r"target\[0\]\.props\.checksum = 'on\\nx': must be a value on one line"):
        parse_spec(text, "c.toml")
