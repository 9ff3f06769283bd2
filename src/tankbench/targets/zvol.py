"""`kind = "zvol"`: a ZFS volume with the test's properties, filled with incompressible data before fio."""

from __future__ import annotations

import shlex

from tankbench.model import Test
from tankbench.targets.base import KindTraits
from tankbench.targets.zfsbase import ZfsKind, zfs_axes


class ZvolKind(ZfsKind):
    """fio opens /dev/zvol/<pool>/…; a new zvol reads zeros without any I/O, so it is filled first."""

    kind = "zvol"
    traits = KindTraits(block_device=True, needs_pool=True, zfs=True, zfs_object="volume", cold_cache_cycles_pool=True)
    short = "zvol"
    block_axis = "volblocksize"
    axes = zfs_axes("recordsize", "atime", "direct")
    size_means = "the zvol's volsize"
    foreign_props = ("recordsize",)

    @classmethod
    def script_lines(cls, test: Test, campaign_id: str) -> list[str]:
        lines = super().script_lines(test, campaign_id)
        path = shlex.quote(cls.fio_filename(test))
        if not test.is_copy:
            lines += [
                "# Fill the zvol with incompressible data first: a new zvol reads zeros without any I/O.",
                f"head -c {test.target.size} /dev/urandom | dd of={path} bs=1M iflag=fullblock conv=fsync status=none",
            ]
        return lines + [f"# WARNING: writes to the block device {cls.fio_filename(test)} if the job writes."]
