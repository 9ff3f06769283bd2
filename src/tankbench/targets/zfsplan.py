"""ZFS targets, pure: their own settings (props, the pool root), where a test's dataset or zvol lives and how it
is created (export scripts; drivers/zfs.py creates them on a host, tagged and safe)."""

from __future__ import annotations

import shlex
from typing import Any

from tankbench.model import Test, short_hash
from tankbench.secrets import SCRIPT_KEY_DIR, key_file_name
from tankbench.zfs.props import PROPERTY_AXES, zfs_options

TAG = "tankbench:campaign"
MOUNT_BASE = "/tankbench"


def pool_root(test: Test) -> str:
    """The campaign's root dataset the test's dataset or zvol lives under."""
    return zfs_options(test.target).pool


def zfs_props(test: Test) -> dict[str, str]:
    """The properties the test's dataset/zvol is created with: the target's props, then the test's axes."""
    props = dict(zfs_options(test.target).props)
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
    return f"{pool_root(test)}/{test.target.name}-{short_hash(config, 8)}"


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
    return f"{root_mountpoint(pool_root(test))}/{dataset_name(test).rsplit('/', 1)[-1]}"


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
        props.update(keyformat="raw", keylocation=f"file://{key or key_path(pool_root(test))}")
    for k, v in props.items():
        argv += ["-o", f"{k}={v}"]
    return argv + ["-o", f"{TAG}={campaign_id}", dataset_name(test)]


def script_lines(test: Test, campaign_id: str) -> list[str]:
    """Shell lines that create the test's dataset/zvol by hand (for exported standalone scripts)."""
    root = pool_root(test)
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
