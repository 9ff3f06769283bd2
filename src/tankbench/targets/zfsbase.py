"""What dataset and zvol targets share: the campaign's pool, tagged provisioning, the ZFS capture of a run."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, ClassVar

import tankbench.targets.zfs as zfs
import tankbench.targets.zfs_metrics as zfs_metrics
from tankbench.errors import UserError
from tankbench.keys import Keys
from tankbench.model import Target, Test
from tankbench.targets.base import Capture, TargetKind
from tankbench.zfs import props as zprops


def zfs_axes(*without: str) -> tuple[str, ...]:
    """The ZFS axes of a kind, outermost first: `slog` (a pool change), then the property axes but `without`."""
    return ("slog", *(a for a in zprops.PROPERTY_AXES if a not in without))


class ZfsKind(TargetKind):
    """A dataset or zvol that tankbench creates (tagged) under the campaign's [pool], one per property set."""

    needs_pool = True
    zfs = True
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
        return Target(name=name, kind=cls.kind, size=size, props=cls._props(keys, prefix, props))

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
        block = params.get(cls.block_axis, target.props.get(cls.block_axis, "default"))
        if cls.always_names_block() or cls.block_axis in varying or cls.block_axis in target.props:
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

    # -- run time ------------------------------------------------------------------------------
    def check(self, target: Target, probe: Mapping[str, Any]) -> None:
        if not probe["fingerprint"].get("zfs_version"):
            raise UserError(
                f"{self.ws.spec.path}: the campaign has ZFS targets but {self.host.name} has no ZFS module loaded",
                'run it in the lab (host = "lab") or on a ZFS host',
            )

    def setup(self) -> None:
        if not self.ws.zfs_ready:  # dataset and zvol kinds share one pool: set it up once
            self.ws.zfs.setup(pool_kinds())
            self.ws.zfs_ready = True

    def recover(self, rebooted: bool) -> dict[str, Any]:
        """The pool imported, keys loaded, our datasets mounted (once for every ZFS kind of the campaign)."""
        if not self.ws.zfs_ready or self.ws.zfs_recovered:
            return {}
        self.ws.zfs_recovered = True
        return self.ws.zfs.recover()

    def provision(self, test: Test) -> None:
        self.ws.zfs.provision(test)

    def device_paths(self, test: Test) -> list[str]:
        pool = self.ws.spec.pool
        assert pool is not None
        return list(pool.devices) or zfs_metrics.pool_vdev_paths(self.host, pool.pool_name)

    def capture(self, test: Test) -> dict[str, Any]:
        assert self.ws.spec.pool is not None
        return zfs_metrics.zfs_capture(test, self.ws.spec.pool.pool_name)

    def after_run(self, test: Test, res: Mapping[str, Any], metrics: Mapping[str, float]) -> Capture:
        params = dict(self.ws.zfs_params, **res.get("tunables", {}))  # the run's own tunables win
        return zfs_metrics.from_capture(
            test, dict(res), self.ws.zfs_version, params, dict(metrics), self.qemu_cache(test), self.zfs_object
        )

    @classmethod
    def qemu_cache(cls, test: Test) -> str | None:
        """The qemu cache mode between the job and ZFS (vm-disk targets); None when fio runs on the host."""
        return None

    def fingerprint(self) -> dict[str, Any]:
        pool = self.ws.spec.pool
        assert pool is not None
        fp: dict[str, Any] = {
            "pool_layout": {
                "vdevs": len(pool.data_devices),
                "layout": pool.layout,
                "ashift": pool.ashift,
                "created_by_tankbench": pool.creates,
                "parent": pool.parent,
            }
        }
        if self.ws.zfs_params:
            fp["zfs_tunables"] = zfs_metrics.tunables(dict(self.ws.zfs_params))
        return fp


def pool_kinds() -> set[str]:
    """The names of the kinds that live on the campaign's pool: every loaded TargetKind that needs it (the
    registry has loaded them all by the time a pool is set up; asking it from here would be an import cycle)."""
    found: set[str] = set()
    todo: list[type[TargetKind]] = list(TargetKind.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls.kind and cls.needs_pool:
            found.add(cls.kind)
    return found
