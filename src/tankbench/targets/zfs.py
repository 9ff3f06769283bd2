"""ZFS targets: where a test's dataset or zvol lives (pure), and provisioning it on a host (tagged, safe)."""

from __future__ import annotations

import shlex
import time
from collections.abc import Collection
from typing import Any

from tankbench.errors import HostError, UserError
from tankbench.hosts.base import Host
from tankbench.model import Target, Test, short_hash
from tankbench.secrets import SCRIPT_KEY_DIR, ensure_key, key_file_name, remove_key
from tankbench.targets.release import destroy as destroy_released
from tankbench.zfs.props import PROPERTY_AXES

TAG = "tankbench:campaign"
MOUNT_BASE = "/tankbench"


def zfs_props(test: Test) -> dict[str, str]:
    """The properties the test's dataset/zvol is created with: the target's props, then the test's axes."""
    props = dict(test.target.props)
    for axis in PROPERTY_AXES:
        if axis in test.params:
            props[axis] = str(test.params[axis])
    # a volume has no recordsize or atime, a filesystem no volblocksize (a guest disk's backing may be either)
    drop = ("recordsize", "atime") if is_volume(test) else ("volblocksize",)
    return {k: v for k, v in sorted(props.items()) if v != "default" and k not in drop}


def dataset_name(test: Test) -> str:
    """`<root>/<target>-<hash of its properties>`: one dataset per property set, shared by its tests."""
    config: dict[str, object] = {"kind": test.target.kind, "size": test.target.size, "props": zfs_props(test)}
    if test.target.kind == "vm-disk" and is_volume(test):
        # a guest disk's zvol and the filesystem holding its images are different objects: with equal
        # properties they had one name, and an image test found the zvol where its filesystem should be
        config["volume"] = True
    return f"{test.target.pool}/{test.target.name}-{short_hash(config, 8)}"


def root_mountpoint(root: str) -> str:
    return f"{MOUNT_BASE}/{root.rsplit('/', 1)[-1]}"


def is_volume(test: Test) -> bool:
    """The test's ZFS object is a volume: a zvol target, or a guest disk backed by a zvol (a vm-disk's default
    backing, as its tests' names say: without the axis it was named -zvol- and provisioned as a raw image)."""
    if test.target.kind == "vm-disk":
        return bool(test.params.get("backing", "zvol") == "zvol")
    return test.target.kind == "zvol" or test.params.get("backing") == "zvol"


def dataset_dir(test: Test) -> str:
    """Where the test's dataset is mounted (datasets are mounted under /tankbench/<root>/<child>)."""
    return f"{root_mountpoint(test.target.pool)}/{dataset_name(test).rsplit('/', 1)[-1]}"


def fio_filename(test: Test) -> str:
    """The file (dataset) or device (zvol) fio opens."""
    if is_volume(test):
        return f"/dev/zvol/{dataset_name(test)}"
    return f"{dataset_dir(test)}/tankbench-{test.target.name}.fiodata"


def key_path(root: str) -> str:
    """The key file as exported scripts name it ($HOME of whoever runs them); `run` uses secrets.ensure_key."""
    return f"{SCRIPT_KEY_DIR}/{key_file_name(root)}"


def create_argv(test: Test, campaign_id: str, key: str | None = None) -> list[str]:
    """`zfs create` for the test's dataset or zvol, tagged as this campaign's."""
    props = zfs_props(test)
    argv = ["zfs", "create"]
    if is_volume(test):
        argv += ["-V", str(test.target.size)]
    if props.get("encryption", "off") != "off":
        props.update(keyformat="raw", keylocation=f"file://{key or key_path(test.target.pool)}")
    for k, v in props.items():
        argv += ["-o", f"{k}={v}"]
    return argv + ["-o", f"{TAG}={campaign_id}", dataset_name(test)]


def script_lines(test: Test, campaign_id: str) -> list[str]:
    """Shell lines that create the test's dataset/zvol by hand (for exported standalone scripts)."""
    root = test.target.pool
    lines = [
        f"zfs list {shlex.quote(root)} >/dev/null 2>&1 || zfs create -p -o mountpoint={root_mountpoint(root)} "
        f"-o {TAG}={campaign_id} {shlex.quote(root)}"
    ]
    if zfs_props(test).get("encryption", "off") != "off":
        k = key_path(root)
        lines.append(f'[ -s "{k}" ] || (umask 077 && mkdir -p "$(dirname "{k}")" && head -c 32 /dev/urandom > "{k}")')
    ds = dataset_name(test)
    create = " ".join(
        f'"{a}"' if a.startswith("keylocation=") else shlex.quote(a)  # "$HOME" expands
        for a in create_argv(test, campaign_id)
    )
    lines.append(f"zfs list {shlex.quote(ds)} >/dev/null 2>&1 || {create}")
    if is_volume(test):
        lines.append(f"udevadm settle; while [ ! -e /dev/zvol/{ds} ]; do sleep 0.2; done")
    return lines


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
        if any(t.kind in pool_kinds and t.props.get("encryption", "off") != "off" for t in self.spec.targets) or any(
            v != "off" for v in self.spec.matrix.get("encryption", ())
        ):
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
                Target(name=f"pool {name} vdev", kind="raw", path=dev, confirm=pool_confirmation(self.pool, dev)),
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
def create_pool_argv(pool: Any, campaign_id: str, with_log: bool = True) -> list[str]:
    """`zpool create` for a PoolSpec, in zpool's own grammar: data vdevs (`raidz1 a b c`, `mirror a b mirror c d`),
    then `log`, `special` and `cache` classes. `with_log=False` when the slog axis adds the log per test."""
    argv = [
        "zpool",
        "create",
        "-f",
        "-o",
        f"ashift={pool.ashift}",
        "-O",
        f"{TAG}={campaign_id}",
        "-O",
        "mountpoint=none",
    ]
    for k, v in pool.properties.items():
        argv += ["-O", f"{k}={v}"]
    argv += [pool.name, *pool.vdevs]
    if pool.log and with_log:
        argv += ["log", *pool.log]
    if pool.special:
        argv += ["special", *pool.special]
    if pool.cache:
        argv += ["cache", *pool.cache]
    return argv


def buffer_check(test: Test, compression: str | None, compressratio: float | None) -> dict[str, Any]:
    """`zfs.buffers_compressible`: a writing test on incompressibly laid-out data with compression on, after
    which the dataset/zvol compresses: fio's own write buffers compressed (fio reuses one buffer unless
    refill_buffers is set, so small blocks repeat inside each record), and ZFS wrote less than fio reports."""
    rw = str(test.params.get("rw", ""))
    writes = test.is_copy or any(w in rw for w in ("write", "rw", "trim")) or rw == "readwrite"
    if not writes or compressratio is None or (compression or "off") == "off":
        return {}
    if test.params.get("layout", "random") != "random":
        return {}
    deliberate = "buffer_compress_percentage" in test.params or "buffer_compress_percentage" in test.fio_options
    out: dict[str, Any] = {"zfs.buffers_compressible": compressratio > 1.1 and not deliberate}
    if out["zfs.buffers_compressible"]:
        out["zfs.buffers_note"] = (
            f"compressratio {compressratio:.2f}x after writes over incompressible data: "
            "fio's buffers compress, so ZFS wrote less than fio reports; set "
            "matrix.refill_buffers = [true] (or [fio] refill_buffers = 1)"
        )
    return out
