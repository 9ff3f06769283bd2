"""Never write where the campaign did not explicitly point: checks for raw block devices (pure functions)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tankbench.errors import UserError

STABLE_PREFIX = "/dev/disk/by-id/"
#: the confirmation of a disk named on the command line without --confirm: usable only while blank
BLANK_PREFIX = "blank:"


def check_raw_target(name: str, path: str, confirm: str, info: Mapping[str, Any], spec_path: str) -> None:
    """Raise UserError unless fio may write to the device `path` of target `name`, given the campaign's `confirm`.

    Refused always: a missing or non-block path, a mounted device (or partition, or swap), a device with
    holders (LVM, md, dm-crypt), a device this user may not read and write, or whose signatures blkid could not
    read. Refused unless named by /dev/disk/by-id/ and confirmed with that same id:
    any signature (filesystem, partition table, zfs_member, LVM, LUKS). A blank device needs the same
    confirmation, naming it again in `confirm`. `confirm = "blank:<id>"` (a disk named with --disks but not
    --confirm) accepts the device only while it carries no signature.
    """
    where = f"{spec_path}: target {name!r} path = {path!r}"
    confirm_hint = f'add confirm = "{path}" to the target once you are sure its contents may be destroyed'
    if not info.get("exists"):
        raise UserError(f"{where}: no such device", "check the path (ls -l /dev/disk/by-id/)")
    if not info.get("is_block"):
        raise UserError(f"{where}: not a block device", 'use kind = "file" for a file in a directory')
    if info.get("mounts"):
        raise UserError(
            f"{where}: the device is in use (mounted at {', '.join(info['mounts'])})",
            "tankbench never writes to a mounted device: unmount it (or pick another disk)",
        )
    if info.get("zpool"):
        raise UserError(
            f"{where}: the device is in use by the imported ZFS pool {info['zpool']!r}",
            "tankbench never writes to a disk of an imported pool, confirmed or not: export or destroy the pool "
            "first (or pick another disk)",
        )
    if info.get("holders"):
        raise UserError(
            f"{where}: the device is held by {', '.join(info['holders'])} (LVM, RAID or dm-crypt)",
            "tankbench never writes to a device another driver holds: release it first",
        )
    _check_inspected(where, info)
    signatures = list(info.get("signatures", []))
    if signatures:
        if not path.startswith(STABLE_PREFIX):
            raise UserError(
                f"{where}: the device carries data ({', '.join(signatures)})",
                f"name it by its stable id under {STABLE_PREFIX} and confirm with that same id",
            )
        if confirm == BLANK_PREFIX + path:
            raise UserError(
                f"{where}: the device carries data ({', '.join(signatures)}); naming it with --disks/--log/--cache "
                "accepts only a blank disk",
                f"if its contents may be destroyed, confirm it by its id: --confirm {path}",
            )
        if confirm != path:
            raise UserError(
                f"{where}: the device carries data ({', '.join(signatures)}) and is not confirmed", confirm_hint
            )
        return
    if confirm not in (path, BLANK_PREFIX + path):
        raise UserError(f"{where}: writing to a raw device needs confirmation", confirm_hint)


def _check_inspected(where: str, info: Mapping[str, Any]) -> None:
    """Refuse a device this user may not open (blkid's "Permission denied" is not "no signature") or whose
    signatures could not be read: a device that was not inspected is never taken for a blank one."""
    if info.get("writable") is False:  # False, not missing: an agent older than this check does not say
        raise UserError(
            f"{where}: cannot open it for reading and writing (permission denied)",
            "run as root (or as a user who may write the device); tankbench refuses a device it cannot inspect",
        )
    if info.get("blkid_error"):
        raise UserError(
            f"{where}: could not read its signatures ({info['blkid_error']})",
            "tankbench refuses a device it cannot inspect",
        )


def pool_confirmation(pool: Any, dev: str) -> str:
    """How the campaign confirmed a pool device: its id, or `blank:<id>` (only while blank; see above)."""
    return dev if dev in pool.confirm else BLANK_PREFIX + dev
