"""What the ZFS kinds' drivers do alike: the campaign's pool set up once (shared through the Workspace), tagged
provisioning, recovery after a reboot, the ZFS capture of a run and the pool's fingerprint."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import tankbench.drivers.zfs_metrics as zfs_metrics
from tankbench.drivers.base import Capture, TargetDriver
from tankbench.errors import UserError
from tankbench.model import Target, Test
from tankbench.targets import traits
from tankbench.targets.zfsbase import ZfsKind

if TYPE_CHECKING:
    from tankbench.agent import FioRunExtras


def require_zfs(spec_path: str, host_name: str, probe: Mapping[str, Any], doing: str = "") -> None:
    """UserError unless the agent's probe of the host found the ZFS module loaded (`run`'s preflight, `clean`).
    `doing`: what is refused, for a command other than run ("clean needs ZFS")."""
    if not probe["fingerprint"].get("zfs_version"):
        what = f"{doing} needs ZFS, and" if doing else "the campaign has ZFS targets but"
        hint = 'run it in the lab (host = "lab") or on a ZFS host'
        if doing:
            hint = f'{doing} on the host the campaign ran on (--host, or host = "lab"): this one has nothing of ZFS'
        raise UserError(f"{spec_path}: {what} {host_name} has no ZFS module loaded", hint)


class ZfsDriver(ZfsKind, TargetDriver):
    """A dataset or zvol that tankbench creates (tagged) under the campaign's [pool], one per property set."""

    def check(self, target: Target, probe: Mapping[str, Any]) -> None:
        require_zfs(self.ws.spec.path, self.host.name, probe)

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

    def capture(self, test: Test) -> FioRunExtras:
        assert self.ws.spec.pool is not None
        return zfs_metrics.zfs_capture(test, self.ws.spec.pool.pool_name)

    def after_run(self, test: Test, res: Mapping[str, Any], metrics: Mapping[str, float]) -> Capture:
        params = dict(self.ws.zfs_params, **res.get("tunables", {}))  # the run's own tunables win
        return zfs_metrics.from_capture(
            test, dict(res), self.ws.zfs_version, params, dict(metrics), self.qemu_cache(test), self.traits.zfs_object
        )

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
    """The names of the kinds that live on the campaign's pool (the registry's traits)."""
    return {name for name, t in traits().items() if t.needs_pool}
