"""What the lab image is made of (suite, packages, recipe numbers, the resolved Versions) and the cache keys
that name each built step: a change here is a rebuild for everyone, so the keys are pure and tested."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from tankbench.guest import userland

SUITE = "bookworm"
BACKPORTS = "bookworm-backports"

GUEST_PACKAGES = (
    "zfsutils-linux",
    "fio",
    "python3",
    "openssh-server",
    "util-linux",
    "kmod",
    "udev",
    "iproute2",
    "procps",
    "e2fsprogs",
    "rsync",
    "coreutils",
    "zstd",
    # the network-share target (issue 20): the lab exports a dataset over NFS (nfsd is in the kernel package)
    # and client labs mount it
    "nfs-kernel-server",
    "nfs-common",
)

#: qemu for the test guest inside the lab: bookworm's 7.2 (the same as the machines that run the lab), not
#: backports' 10.x; the rest of the install takes libelf1/libdw1 from backports next to the kernel's tools
QEMU_PACKAGES = ("qemu-system-x86", "qemu-system-common", "qemu-system-data", "qemu-utils")

#: what the tools chroot needs to build fio statically (libaio-dev before configure: the libaio engine)
TOOLS_BUILD_PACKAGES = ("gcc", "make", "libc6-dev", "libaio-dev", "dpkg-dev", "xz-utils", "busybox-static")

#: the filesystem label the guest's kernel mounts as root
ROOT_LABEL = "tankbench-root"

#: bump when the build recipe changes in a way the package versions do not show (guest chroot / image step)
RECIPE = "2"
IMAGE_RECIPE = "4"  # 4: the test guest's initramfs holds the userland (mkfs.ext4/xfs, cryptsetup, rsync)
TOOLS_RECIPE = "3"  # 2: fio --disable-native; 3: + Debian's userland with its library closure (guest/userland.py)

#: the static fio for any x86-64 guest CPU (not only this machine's)
FIO_CONFIGURE = "./configure --build-static --disable-native"

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Versions:
    """What the image is made of: the suite the kernel/zfs come from and their exact versions."""

    suite: str  # "bookworm-backports" or "bookworm" (fallback)
    kernel_abi: str  # e.g. "6.12.95+deb12-amd64"
    kernel_version: str  # Debian version of the linux-image package
    zfs_version: str  # Debian version of zfs-dkms / zfsutils-linux
    mirror: str
    security_mirror: str
    fio_version: str = ""  # Debian version of the fio source package the test guest's static fio is built from
    busybox_version: str = ""  # Debian version of busybox-static


@dataclass(frozen=True)
class Image:
    """A built lab image: the files qemu boots and what they contain."""

    dir: Path
    kernel: Path
    initrd: Path
    rootfs: Path
    host_key: str  # the guest sshd's ed25519 public host key ("ssh-ed25519 AAAA…")
    versions: Versions
    key: str


def cache_dir() -> Path:
    """Where lab images are cached: ${XDG_CACHE_HOME:-~/.cache}/tankbench/lab."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tankbench" / "lab"


def guest_files_hash() -> str:
    """Hash of the files installed into the guest (lab-init, …): a change rebuilds the image only."""
    h = hashlib.sha256()
    root = resources.files("tankbench.lab").joinpath("files")
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.is_file():
            h.update(entry.name.encode() + b"\0" + entry.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def image_key(versions: Versions, files_hash: str, packages: Sequence[str] = GUEST_PACKAGES) -> str:
    """The cache key of an image: package versions, package list, guest files, the test guest's tools (static
    fio, busybox: the image holds them) and recipe (pure)."""
    doc = json.dumps(
        {
            "versions": asdict(versions),
            "packages": sorted(packages),
            "files": files_hash,
            "recipe": RECIPE,
            "image_recipe": IMAGE_RECIPE,
            "tools": tools_key(versions),  # the image carries the test guest's fio: a new build of it is a new image
        },
        sort_keys=True,
    )
    return hashlib.sha256(doc.encode()).hexdigest()[:16]


def guest_key(versions: Versions, packages: Sequence[str] = GUEST_PACKAGES) -> str:
    """The cache key of the guest chroot (independent of the guest files)."""
    doc = json.dumps(
        {"versions": asdict(versions), "packages": sorted(packages), "qemu": list(QEMU_PACKAGES), "recipe": RECIPE},
        sort_keys=True,
    )
    return hashlib.sha256(doc.encode()).hexdigest()[:16]


def tools_key(versions: Versions) -> str:
    """The cache key of the test guest's static fio and busybox: their versions, the mirror, the recipe."""
    doc = json.dumps(
        {
            "fio": versions.fio_version,
            "busybox": versions.busybox_version,
            "mirror": versions.mirror,
            "packages": list(TOOLS_BUILD_PACKAGES),
            "userland": [list(userland.PACKAGES), list(userland.BINARIES), list(userland.FILES)],
            "recipe": TOOLS_RECIPE,
        },
        sort_keys=True,
    )
    return hashlib.sha256(doc.encode()).hexdigest()[:16]


def modules_key(versions: Versions) -> str:
    """The cache key of the dkms-built modules: the kernel ABI and the zfs version."""
    return f"{versions.kernel_abi}-zfs-{versions.zfs_version}".replace("~", "_").replace("+", "_")


def load_image(path: Path) -> Image:
    """An image directory's manifest as an Image."""
    m = json.loads((path / "manifest.json").read_text())
    return Image(
        dir=path,
        kernel=path / "vmlinuz",
        initrd=path / "initrd.img",
        rootfs=path / "rootfs.img",
        host_key=m["host_key"],
        versions=Versions(**m["versions"]),
        key=m["key"],
    )


def cached_image(cache: Path | None = None) -> Image | None:
    """The newest built image in the cache, without any network access (None if there is none)."""
    cache = cache or cache_dir()
    found = [p for p in cache.glob("image-*") if (p / "manifest.json").exists()]
    if not found:
        return None
    return load_image(max(found, key=lambda p: p.stat().st_mtime))
