"""What the ZFS kinds (dataset, zvol, vm-disk, nfs) declare alike: their options (props, the pool root), the
`props` table, the ZFS axes, their test names and export lines (drivers/zfsbase.py: what they do alike)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

import tankbench.targets.zfsplan as zfs
from tankbench.keys import Keys
from tankbench.model import Target, Test
from tankbench.targets.base import KindTraits, TargetKind
from tankbench.zfs import props as zprops
from tankbench.zfs.props import ZfsOptions, zfs_options


def zfs_axes(*without: str) -> tuple[str, ...]:
    """The ZFS axes of a kind, outermost first: `slog` (a pool change), then the property axes but `without`."""
    return ("slog", *(a for a in zprops.PROPERTY_AXES if a not in without))


class ZfsKind(TargetKind):
    """A dataset or zvol that tankbench creates (tagged) under the campaign's [pool], one per property set."""

    traits = KindTraits(needs_pool=True, zfs=True)
    options: ClassVar[type[ZfsOptions]] = ZfsOptions
    table_keys: ClassVar[tuple[str, ...]] = ("size", "props")
    #: what the target's `size` is (in the error when it is missing)
    size_means: ClassVar[str] = ""
    #: block-size properties this kind's `props` may not set (a filesystem has no volblocksize, …)
    foreign_props: ClassVar[tuple[str, ...]] = ()
    #: the ZFS axes seed 000 names in test names, in order (`-sync-disabled`, `-logbias-throughput`)
    NAMED_AXES = tuple(a for a in zprops.PROPERTY_AXES if a not in zprops.BLOCK_SIZES)
    #: "fs" or "zvol" in test names; the property that is the block size
    short = ""
    block_axis = ""

    # -- campaign file: pure ---------------------------------------------------------------------
    @classmethod
    def parse_table(cls, keys: Keys, table: Mapping[str, Any], prefix: str, name: str) -> Target:
        """A dataset, a zvol or a guest disk: tankbench creates it under [pool], so no path; `props` fixes
        ZFS properties for every test of the target."""
        for key in ("path", "confirm"):
            if key in table:
                raise keys.err(
                    prefix + key,
                    table[key],
                    f"a {cls.kind} target does not take a {key}",
                    "tankbench creates it under the campaign's [pool]",
                )
        if "size" not in table:
            raise keys.err(
                prefix + "size",
                None,
                f"is required ({cls.size_means})",
                'e.g. size = "1G" (larger than the ARC for reads)',
            )
        size = keys.size(prefix + "size", table["size"])
        props = table.get("props", {})
        if not isinstance(props, dict):
            raise keys.err(prefix + "props", props, "must be a table", 'e.g. props = { compression = "lz4" }')
        return Target(name=name, kind=cls.kind, size=size, options=cls.options(props=cls._props(keys, prefix, props)))

    @classmethod
    def _props(cls, keys: Keys, prefix: str, props: Mapping[str, Any]) -> dict[str, str]:
        clean: dict[str, str] = {}
        for key, value in props.items():
            if key not in zprops.SETTABLE:
                close = difflib.get_close_matches(key, zprops.SETTABLE, n=1)
                raise keys.err(
                    f"{prefix}props.{key}",
                    value,
                    "not a ZFS property tankbench sets",
                    f"did you mean `{close[0]}`?" if close else f"one of: {', '.join(zprops.SETTABLE)}",
                )
            if key in cls.foreign_props:
                raise keys.err(
                    f"{prefix}props.{key}",
                    value,
                    f"does not apply to a {cls.kind}",
                    "datasets have recordsize, zvols volblocksize",
                )
            if key in zprops.PROPERTY_AXES:
                clean[key] = zprops.property_value(keys, f"{prefix}props.{key}", key, value)
            else:
                clean[key] = keys.string(f"{prefix}props.{key}", value if not isinstance(value, int) else str(value))
                if not clean[key].isprintable():  # it goes into `zfs create -o` and the job's comment lines
                    raise keys.err(f"{prefix}props.{key}", value, "must be a value on one line", 'e.g. checksum = "on"')
        return clean

    @classmethod
    def axis_value(cls, keys: Keys, key: str, axis: str, value: object) -> Any:
        """`slog` (a log device added to the pool for the test) or one of the ZFS property axes."""
        if axis == "slog":
            return keys.boolean(key, value)
        if axis in zprops.PROPERTY_AXES:
            return zprops.property_value(keys, key, axis, value)
        return super().axis_value(keys, key, axis, value)

    @classmethod
    def fio_filename(cls, test: Test) -> str:
        return zfs.fio_filename(test)

    @classmethod
    def name_stem(cls, target: Target, params: Mapping[str, Any], varying: set[str], several: bool) -> list[str]:
        """`zfs-fs-write-4k-def-sync-disabled`, `zfs-slog-zvol-write-1M-sync-standard-logbias-throughput`."""
        head = "zfs-slog" if params.get("slog") else "zfs"
        name = f"{cls.short}-{target.name}" if several else cls.short
        if params.get("workload", "fio") != "fio":
            parts = [f"{head}-{name}-copy-{params['workload']}-{params['copy_size']}"]
        else:
            parts = [f"{head}-{name}-{params['rw']}-{params['bs']}"]
        props = zfs_options(target).props
        block = params.get(cls.block_axis, props.get(cls.block_axis, "default"))
        if cls.always_names_block() or cls.block_axis in varying or cls.block_axis in props:
            parts.append("def" if block == "default" else str(block))
        for axis in cls.NAMED_AXES:
            if axis in varying and axis in params:
                value = params[axis]
                parts.append(f"{axis}-{value}" if axis != "encryption" else ("enc" if value != "off" else "noenc"))
        return parts

    @classmethod
    def always_names_block(cls) -> bool:
        """Seed 000 names every dataset test by its recordsize (`-def`), zvols only when it varies."""
        return False

    @classmethod
    def script_lines(cls, test: Test, campaign_id: str) -> list[str]:
        return [
            "# Create the dataset/zvol with the test's properties (tagged as tankbench's), as tankbench does.",
            *zfs.script_lines(test, campaign_id),
        ]

    @classmethod
    def on_pool(cls, target: Target, root: str) -> Target:
        return replace(target, options=replace(zfs_options(target), pool=root))

    @classmethod
    def properties(cls, target: Target) -> Mapping[str, str]:
        return zfs_options(target).props

    @classmethod
    def qemu_cache(cls, test: Test) -> str | None:
        """The qemu cache mode between the job and ZFS (vm-disk targets); None when fio runs on the host."""
        return None
