"""Rules across sections of a campaign file (matrix, fio, pool, targets, includes), checked once all are read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tankbench.campaign.schema import PoolSpec
from tankbench.guestconf import layers as guest_layers
from tankbench.keys import Keys
from tankbench.model import Target
from tankbench.targets import traits_of
from tankbench.zfs.vdevs import vdev_group


def check_new_axes(
    keys: Keys,
    matrix: Mapping[str, tuple[Any, ...]],
    fio: Mapping[str, Any],
    pool: PoolSpec | None,
    targets: tuple[Target, ...],
    mode: str,
) -> None:
    """Cross-key rules of the issue-10 keys: one place per fio buffer option, cold caches only where
    tankbench may export the pool, size-based runs only with a size, slog only with single log disks."""
    for axis in ("buffer_compress_percentage", "refill_buffers"):
        if axis in matrix and axis in fio:
            raise keys.err(f"fio.{axis}", fio[axis], f"is also an axis (matrix.{axis})", "set it in one place")
    if "cold" in matrix.get("cache", ()) and pool is not None and not pool.creates:
        raise keys.err(
            "matrix.cache",
            list(matrix["cache"]),
            "cold needs a pool tankbench creates",
            "emptying the ARC means exporting and importing the pool; tankbench never exports a pool "
            'it did not create: use [pool] name + vdevs, or drop "cold"',
        )
    guests = [i for i, t in enumerate(targets) if traits_of(t.kind).runs_in_guest]
    if "cold" in matrix.get("cache", ()) and guests:
        raise keys.err(
            "matrix.cache",
            list(matrix["cache"]),
            f"cold cannot be applied to a {targets[guests[0]].kind} target (target[{guests[0]}])",
            "emptying the ARC exports and imports the pool, and a running test guest holds its disk open: "
            f'drop "cold", or move the {targets[guests[0]].kind} target to a campaign of its own',
        )
    if True in matrix.get("slog", ()) and pool is not None and any(vdev_group(d) is not None for d in pool.log):
        raise keys.err(
            "pool.log",
            list(pool.log),
            "the slog axis adds and removes single log disks",
            "list the log disks without mirror, or remove the slog axis",
        )
    if mode == "size":
        for i, t in enumerate(targets):
            if not t.size and "size" not in matrix:
                raise keys.err(
                    f"target[{i}].size",
                    None,
                    "size-based runs need a size",
                    'give the target a size, or set matrix.size = ["256M"]',
                )


def check_guest_copies(
    keys: Keys,
    matrix: Mapping[str, tuple[Any, ...]],
    includes: tuple[Mapping[str, Any], ...],
    targets: tuple[Target, ...],
) -> None:
    """cp and rsync on a vm-disk target write a file in the guest's filesystem: refuse them where the guest has
    none (guest_fs = "none" only), instead of planning copy tests that cannot run or dropping them unasked."""
    vm = [t.name for t in targets if traits_of(t.kind).runs_in_guest]
    copies = [w for w in matrix.get("workload", ()) if w in guest_layers.FILE_COPIES]
    hint = 'add "ext4" or "xfs" to matrix.guest_fs, or use workload = "dd" (it can write the guest\'s disk itself)'
    if vm and copies and len(vm) == len(targets) and set(matrix.get("guest_fs", ("none",))) == {"none"}:
        raise keys.err(
            "matrix.workload",
            list(matrix["workload"]),
            f"{' and '.join(copies)} {'write' if len(copies) > 1 else 'writes'} a file in the test guest's "
            f"filesystem, and matrix.guest_fs = {list(matrix.get('guest_fs', ('none',)))} gives it none",
            hint,
        )
    for i, inc in enumerate(includes):
        fs = inc.get("guest_fs", matrix.get("guest_fs", ("none",))[0])
        if (
            inc.get("workload") in guest_layers.FILE_COPIES
            and fs == "none"
            and inc.get("target", vm[0] if vm else "") in vm
        ):
            raise keys.err(
                f"include[{i}].workload",
                inc["workload"],
                "writes a file in the test guest, which has no filesystem",
                hint,
            )
