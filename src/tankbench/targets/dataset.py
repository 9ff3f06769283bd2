"""`kind = "dataset"`: a laid-out test file on a ZFS dataset with the test's properties."""

from __future__ import annotations

from tankbench.model import Test
from tankbench.targets.base import KindTraits
from tankbench.targets.file import layout_script_lines
from tankbench.targets.zfsbase import ZfsKind, zfs_axes


class DatasetKind(ZfsKind):
    """fio opens `<mountpoint>/tankbench-<target>.fiodata` on the test's dataset."""

    kind = "dataset"
    traits = KindTraits(needs_pool=True, zfs=True, zfs_object="filesystem", test_file=True, cold_cache_cycles_pool=True)
    short = "fs"
    block_axis = "recordsize"
    axes = zfs_axes("volblocksize")
    size_means = "the test file's size"
    foreign_props = ("volblocksize",)

    @classmethod
    def always_names_block(cls) -> bool:
        return True

    @classmethod
    def script_lines(cls, test: Test, campaign_id: str) -> list[str]:
        lines = super().script_lines(test, campaign_id)
        if not test.is_copy:
            lines += layout_script_lines(cls.fio_filename(test), test.target.size)
        return lines
