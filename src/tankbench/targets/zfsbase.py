"""What dataset and zvol targets share: the campaign's pool, tagged provisioning, the ZFS capture of a run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import tankbench.targets.zfs as zfs
import tankbench.targets.zfs_metrics as zfs_metrics
from tankbench.errors import UserError
from tankbench.model import Target, Test
from tankbench.targets.base import Capture, TargetKind


class ZfsKind(TargetKind):
    """A dataset or zvol that tankbench creates (tagged) under the campaign's [pool], one per property set."""

    needs_pool = True
    #: the ZFS axes seed 000 names in test names, in order (`-sync-disabled`, `-logbias-throughput`)
    NAMED_AXES = ("encryption", "compression", "sync", "logbias", "primarycache", "atime", "direct")
    #: "fs" or "zvol" in test names; the property that is the block size
    short = ""
    block_axis = ""

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
            test, dict(res), self.ws.zfs_version, params, dict(metrics), self.qemu_cache(test)
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
