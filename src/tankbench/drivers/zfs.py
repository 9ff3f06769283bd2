"""Provisioning ZFS targets on a host: the campaign's pool (or a parent dataset), its tagged datasets and zvols,
the SLOG state a test asks for; destroying only what carries this campaign's tag."""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

from tankbench.drivers.release import destroy as destroy_released
from tankbench.errors import HostError, UserError
from tankbench.hosts.base import Host
from tankbench.model import Test
from tankbench.secrets import ensure_key, remove_key
from tankbench.targets.zfsplan import (
    TAG,
    create_argv,
    create_pool_argv,
    dataset_name,
    fio_filename,
    is_volume,
    root_mountpoint,
)
from tankbench.zfs.props import zfs_options


class ZfsProvisioner:
    """Creates the campaign's pool (or uses a parent dataset), its tagged datasets and zvols, and the SLOG
    state a test asks for; destroys only what carries this campaign's tag."""

    def __init__(self, host: Host, spec: Any, note: Any = None) -> None:
        self.host = host
        self.spec = spec
        self.pool = spec.pool
        self.cid = spec.campaign_id
        self.root = spec.zfs_root
        self.note = note or (lambda _msg: None)
        self.current: dict[str, str] = {}  # target name -> dataset in use
        self.key: str | None = None  # the encryption key file on the host, once setup() made it

    # -- helpers ---------------------------------------------------------------------------
    def zfs(self, *argv: str, check: bool = True, timeout: float = 300) -> str:
        return self.host.run(list(argv), check=check, timeout=timeout).stdout

    def exists(self, name: str) -> bool:
        return self.host.run(["zfs", "list", "-H", "-o", "name", name], timeout=120).returncode == 0

    def is_volume(self, name: str) -> bool:
        return self.zfs("zfs", "get", "-H", "-o", "value", "type", name, check=False).strip() == "volume"

    def tag_of(self, name: str) -> str:
        """The campaign tag set on `name` itself; an inherited tag does not count (a user's dataset created
        inside ours inherits the property but is not ours)."""
        out = self.host.run(["zfs", "get", "-H", "-o", "value,source", TAG, name], timeout=120)
        if out.returncode != 0:
            return ""
        value, _, source = out.stdout.strip().partition("\t")
        return value if source == "local" else ""

    def require_ours(self, name: str) -> None:
        tag = self.tag_of(name)
        if tag != self.cid:
            raise UserError(
                f"{name} exists on {self.host.name} and is not this campaign's "
                f"({TAG}={tag or '-'}, expected {self.cid})",
                "tankbench only uses and destroys what it created: rename the pool/campaign or remove it yourself",
            )

    # -- pool and root -----------------------------------------------------------------------
    def setup(self, pool_kinds: Collection[str]) -> None:
        """Create (or check) the pool and the campaign's root dataset (`pool_kinds`: the kinds that live on it)."""
        if self.host.run(["zfs", "version"], timeout=120).returncode != 0:
            raise UserError(
                f"{self.host.name} has no ZFS", 'run ZFS campaigns in the lab (host = "lab") or on a ZFS host'
            )
        if self.pool.creates:
            self.setup_created_pool()
        elif not self.exists(self.pool.parent):
            raise UserError(
                f"{self.spec.path}: pool.parent = {self.pool.parent!r}: no such dataset on {self.host.name}",
                "create it first, or let tankbench create a pool (pool.name + vdevs)",
            )
        if self.exists(self.root):
            self.require_ours(self.root)
        else:
            self.zfs(
                "zfs", "create", "-o", f"mountpoint={root_mountpoint(self.root)}", "-o", f"{TAG}={self.cid}", self.root
            )
        if any(
            t.kind in pool_kinds and zfs_options(t).props.get("encryption", "off") != "off" for t in self.spec.targets
        ) or any(v != "off" for v in self.spec.matrix.get("encryption", ())):
            self.key = ensure_key(self.host, self.root)

    def setup_created_pool(self) -> None:
        from tankbench.safety import check_raw_target, pool_confirmation

        name = self.pool.name
        if self.host.run(["zpool", "list", "-H", "-o", "name", name], timeout=120).returncode == 0:
            self.require_ours(name)
            return
        if self.import_ours(name):
            return
        devices = list(self.pool.devices)
        probe = self.host.call_agent({"op": "probe", "paths": [], "block_devices": devices}, timeout=300)
        for dev in devices:
            check_raw_target(
                f"pool {name} vdev",
                dev,
                pool_confirmation(self.pool, dev),
                probe["block_devices"][dev],
                self.spec.path,
            )
        argv = create_pool_argv(self.pool, self.cid, with_log="slog" not in self.spec.matrix)
        res = self.host.run(argv, timeout=300)
        if (
            res.returncode != 0
            and self.host.run(["zpool", "list", "-H", "-o", "name", name], timeout=120).returncode != 0
        ):
            # seen in the lab right after `clean` destroyed a pool on the same disks: "currently unavailable" or
            # "no such pool or dataset" while udev still settles the disks' partitions; one retry after it did
            self.note(f"creating pool {name} failed ({res.stderr.strip()}); retrying once after udev settles")
            self.host.run(["udevadm", "settle", "-t", "60"], timeout=120)
            time.sleep(5)
            res = self.host.run(argv, timeout=300)
        if res.returncode != 0:
            raise UserError(
                f"{self.spec.path}: creating pool {name} failed: {res.stderr.strip()}",
                "a vdev may belong to another (imported) pool or be in use; tankbench does not force it",
            )
        self.note(f"created pool {name}: {self.pool.layout} on {', '.join(devices)} (tagged {TAG}={self.cid})")

    def import_ours(self, name: str) -> bool:
        """A pool of this name that exists but is not imported (the host rebooted and did not import it: no cache
        file, or it crashed right after the pool was created), found on the campaign's disks: imported if it is this campaign's (its tag read
        back), exported again and refused if not. False when no such pool can be imported."""
        # only the campaign's own disks are read: each named device and its partitions (a whole disk's pool lives
        # in -part1)
        found = self.host.run(
            ["sh", "-c", 'for d in "$@"; do ls -d "$d" "$d"-part* 2>/dev/null; done', "sh", *self.pool.devices],
            timeout=120,
        ).stdout.split()
        if not found:
            return False
        res = self.host.run(["zpool", "import", "-N", *[a for p in found for a in ("-d", p)], name], timeout=600)
        if res.returncode != 0:
            return False
        if self.tag_of(name) != self.cid:
            self.host.run(["zpool", "export", name], timeout=600)
            self.require_ours(name)  # raises, naming its tag
        self.note(f"imported pool {name} (this campaign's, not imported since the host booted)")
        return True

    def recover(self) -> dict[str, Any]:
        """After the host came back from a crash or reboot: import the pool (by name, checked to be this
        campaign's when it created it), load the keys of encrypted datasets, mount what is ours. A dataset whose
        key is gone with the reboot (a lab's root disk is fresh) is destroyed, only after reading back its tag:
        it is recreated, with a new key, when a test needs it. Returns `recovery.*` checks."""
        pool = self.pool.name if self.pool.creates else self.pool.parent.split("/")[0]
        checks: dict[str, Any] = {"recovery.pool": pool}
        if self.host.run(["zpool", "list", "-H", "-o", "name", pool], timeout=120).returncode != 0:
            res = self.host.run(["zpool", "import", "-N", pool], timeout=600)
            if res.returncode != 0:
                raise HostError(f"{self.host.name}: pool {pool} did not import after the reboot: {res.stderr.strip()}")
            self.note(f"recovery: imported pool {pool}")
            checks["recovery.pool_imported"] = True
        if self.pool.creates:
            self.require_ours(pool)
        if not self.exists(self.root):
            return checks
        self.require_ours(self.root)
        if self.key is not None:
            self.key = ensure_key(self.host, self.root)
            self.host.run(["zfs", "load-key", "-r", self.root], timeout=300)  # some may fail: checked below
            out = self.zfs("zfs", "list", "-H", "-r", "-o", "name,keystatus", self.root)
            locked = [ln.split("\t")[0] for ln in out.splitlines() if ln.endswith("\tunavailable")]
            lost = [ds for ds in locked if ds != self.root and self.tag_of(ds) == self.cid]
            for ds in sorted(lost, key=len, reverse=True):
                self.zfs("zfs", "destroy", "-r", ds)
                self.current = {t: d for t, d in self.current.items() if d != ds}
            if lost:
                self.note(f"recovery: destroyed {', '.join(lost)} (their key did not survive the reboot)")
            checks["recovery.keys_lost"] = lost
            checks["recovery.keys_loaded"] = not [ds for ds in locked if ds not in lost]
        out = self.zfs("zfs", "list", "-H", "-r", "-t", "filesystem", "-o", "name,mounted", self.root)
        unmounted = [ln.split("\t")[0] for ln in out.splitlines() if ln.endswith("\tno")]
        for ds in unmounted:  # only ours (the campaign's root and below), parents first
            self.zfs("zfs", "mount", ds)
        checks["recovery.mounted"] = unmounted
        for ds in self.current.values():  # a zvol in use comes back as a device once udev saw it
            if self.exists(ds) and self.zfs("zfs", "get", "-H", "-o", "value", "type", ds).strip() == "volume":
                self.wait_zvol(ds)
        return checks

    # -- per test -----------------------------------------------------------------------------
    def set_slog(self, wanted: bool) -> None:
        """Add or remove the pool's log devices (only on a pool tankbench created)."""
        status = self.zfs("zpool", "status", "-P", self.pool.name)
        present = [d for d in self.pool.log if _in_logs(status, d)]
        if wanted and not present:
            self.zfs("zpool", "add", "-f", self.pool.name, "log", *self.pool.log)
        elif not wanted and present:
            for dev in present:
                self.zfs("zpool", "remove", self.pool.name, _status_name(status, dev))
            self.wait_removed()

    def wait_removed(self, timeout: float = 120) -> None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            status = self.zfs("zpool", "status", "-P", self.pool.name)
            if not any(_in_logs(status, d) for d in self.pool.log):
                return
            time.sleep(1)
        raise HostError(f"log device of {self.pool.name} still present after {timeout:.0f} s")

    def provision(self, test: Test) -> str:
        """Make the test's dataset/zvol exist with its properties and SLOG state; return fio's filename."""
        if "slog" in test.params:
            self.set_slog(bool(test.params["slog"]))
        ds = dataset_name(test)
        previous = self.current.get(test.target.name)
        if previous and previous != ds:
            self.destroy(previous)
        if self.exists(ds):
            self.require_ours(ds)
        else:
            self.zfs(*create_argv(test, self.cid, self.key))
        self.current[test.target.name] = ds
        if is_volume(test):
            self.wait_zvol(ds)
        return fio_filename(test)

    def wait_zvol(self, ds: str, timeout: float = 60) -> None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            self.host.run(["udevadm", "settle", "-t", "10"], timeout=30)
            if self.host.run(["test", "-b", f"/dev/zvol/{ds}"], timeout=30).returncode == 0:
                return
            time.sleep(0.5)
        raise HostError(f"/dev/zvol/{ds} did not appear within {timeout:.0f} s (is udevd running?)")

    def destroy(self, ds: str) -> None:
        """Destroy one dataset/zvol, only after reading back this campaign's tag on it."""
        if ds != self.root and self.exists(ds) and self.tag_of(ds) == self.cid:
            self.zfs("zfs", "destroy", ds)

    def clean(self) -> tuple[list[str], list[str]]:
        """Destroy what carries this campaign's own tag, deepest first; keep anything untagged and every
        dataset above it; destroy a pool tankbench created only when nothing else is left in it.
        Returns (destroyed, kept)."""
        gone: list[str] = []
        kept: list[str] = []
        if self.exists(self.root):
            names = self.zfs("zfs", "list", "-H", "-r", "-o", "name", "-t", "filesystem,volume", self.root).split()
            foreign = [n for n in names if self.tag_of(n) != self.cid]
            for name in sorted(names, key=lambda n: -n.count("/")):
                if name in foreign or any(f.startswith(name + "/") for f in foreign):
                    kept.append(name)
                    continue
                destroy_released(
                    self.host, name, self.is_volume(name), f"/{self.cid}/", self.note
                )  # ends our fio first
                gone.append(name)
        if not self.exists(self.root) and remove_key(self.host, self.root):
            gone.append(f"key file of {self.root}")
        if self.pool.creates and self.tag_of(self.pool.name) == self.cid:
            rest = self.zfs("zfs", "list", "-H", "-r", "-o", "name", "-t", "all", self.pool.name).split()
            if rest == [self.pool.name]:
                self.zfs("zpool", "destroy", self.pool.name)
                gone.append(f"pool {self.pool.name}")
            else:
                kept.append(f"pool {self.pool.name} (holds {', '.join(r for r in rest if r != self.pool.name)})")
        return gone, kept


def _in_logs(status: str, dev: str) -> bool:
    """Whether `dev` appears in the `logs` section of `zpool status -P` output."""
    in_logs = False
    for line in status.splitlines():
        word = line.strip().split(" ")[0] if line.strip() else ""
        if word in ("logs",):
            in_logs = True
            continue
        if word in ("cache", "spares", "special", "dedup", "errors:"):
            in_logs = False
        if in_logs and (word == dev or word.startswith(dev + "-part") or word == dev + "1"):
            return True
    return False


def _status_name(status: str, dev: str) -> str:
    for line in status.splitlines():
        word = line.strip().split(" ")[0] if line.strip() else ""
        if word == dev or word.startswith(dev + "-part"):
            return word
    return dev


# -- pools in zpool create's grammar, module tunables, cold caches (issue 10) -------------------------------------
