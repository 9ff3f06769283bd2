"""A copy test in the test guest, pure: its source disk's id and file, and the timed command (guest/guestcopy.py
runs it; `plan --export` describes it)."""

from __future__ import annotations

import shlex

from tankbench.copytest import copy_argv
from tankbench.model import Test
from tankbench.units import fmt_size, parse_size

#: the source disk's id (its serial: the guest finds it by it) and where the guest mounts it
SOURCE_ID = "tbsrc"
SOURCE_MOUNT = "/mnt/tbsrc"
#: the random-filled file the runner lays out in the campaign's work directory (runner.copy_source)
SOURCE_FILE = "copy-source.bin"
#: Debian's programs in the guest (busybox's cp and dd come first in its PATH and behave differently)
GUEST_PROGRAMS = {"cp": "/usr/bin/cp", "rsync": "/usr/bin/rsync", "dd": "/usr/bin/dd"}


def guest_copy_argv(workload: str, dest: str) -> list[str]:
    """The copy command in the guest: the same argv as on a host (copytest.copy_argv), Debian's programs."""
    argv = copy_argv(workload, f"{SOURCE_MOUNT}/{SOURCE_FILE}", dest)
    return [GUEST_PROGRAMS[workload], *argv[1:]]


def script_comment_lines(test: Test, dest: str) -> list[str]:
    """`plan --export` comment lines of a copy test in the guest: its source disk and the timed commands."""
    size = parse_size(str(test.params["copy_size"]))
    argv = guest_copy_argv(str(test.params["workload"]), dest)
    return [
        f"# The copy source: a raw image outside the pool holding ext4 with a {fmt_size(size)} random-filled "
        f"{SOURCE_FILE} (mke2fs -t ext4 -d), attached read-only (virtio-scsi, cache=writeback, serial {SOURCE_ID}),",
        f"# mounted with `mount -o ro,noload` at {SOURCE_MOUNT}. Then, in the guest, timed by its clock:",
        "#   sync; echo 3 > /proc/sys/vm/drop_caches",
        f"#   {shlex.join(argv)}",
        "#   sync",
    ]
