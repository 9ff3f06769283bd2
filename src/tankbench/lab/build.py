"""Build the lab image from Debian packages only: kernel + zfs-dkms modules + a small ext4 root image.

Steps (each cached in the cache dir and redone only when its key changes):
  resolve   the kernel ABI and OpenZFS version from the bookworm-backports index (host apt, private lists)
  base      debootstrap --variant=minbase bookworm
  modules   builder chroot: linux-headers + zfs-dkms; dkms builds spl/zfs for that kernel without booting it
  guest     guest chroot: the kernel image, zfsutils-linux, fio, python3, sshd, udev, …; small initramfs
  tools     a throwaway chroot builds a static fio from Debian's fio source package and takes busybox-static:
            the test guest's userland (see tankbench.guest)
  image     modules copied into the guest, depmod, lab-init and the test guest's initramfs installed,
            `mke2fs -d` root image (no loop mount)
The builder, guest and tools steps run in parallel (one is CPU-bound compiling, the others mostly download).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tankbench.errors import UserError
from tankbench.lab.apt import host_mirrors, parse_kernel_abi, resolve_versions, sources_list
from tankbench.lab.chroot import (
    LabBuildError,
    Steps,
    mounted,
    remove_tree,
    tail_of,
    unmount_all,
)
from tankbench.lab.recipe import (
    BACKPORTS,
    FIO_CONFIGURE,
    GUEST_PACKAGES,
    IMAGE_RECIPE,
    QEMU_PACKAGES,
    RECIPE,
    ROOT_LABEL,
    SUITE,
    TOOLS_BUILD_PACKAGES,
    TOOLS_RECIPE,
    Image,
    Progress,
    Versions,
    cache_dir,
    cached_image,
    guest_files_hash,
    guest_key,
    image_key,
    load_image,
    modules_key,
    tools_key,
)
from tankbench.lab.steps import build_base, build_guest, build_image, build_modules, build_tools, install_test_guest

__all__ = [
    "BACKPORTS",
    "FIO_CONFIGURE",
    "GUEST_PACKAGES",
    "IMAGE_RECIPE",
    "Image",
    "LabBuildError",
    "Progress",
    "QEMU_PACKAGES",
    "RECIPE",
    "ROOT_LABEL",
    "SUITE",
    "TOOLS_BUILD_PACKAGES",
    "TOOLS_RECIPE",
    "Versions",
    "build",
    "build_base",
    "build_guest",
    "build_image",
    "build_modules",
    "build_tools",
    "cache_dir",
    "cached_image",
    "ensure_image",
    "guest_files_hash",
    "guest_key",
    "host_mirrors",
    "image_key",
    "install_test_guest",
    "load_image",
    "modules_key",
    "mounted",
    "parse_kernel_abi",
    "remove_tree",
    "resolve_versions",
    "sources_list",
    "tail_of",
    "tools_key",
    "unmount_all",
]


def ensure_image(progress: Progress | None = None, cache: Path | None = None) -> Image:
    """The image for the current guest files and the last resolved versions; built if missing.

    No network access when it is there: package versions are re-resolved only by `lab build` (or when
    the guest files changed and the image has to be rebuilt anyway).
    """
    cache = cache or cache_dir()
    last = cache / "versions.json"
    if last.exists():
        key = image_key(Versions(**json.loads(last.read_text())), guest_files_hash())
        if (cache / f"image-{key}" / "manifest.json").exists():
            return load_image(cache / f"image-{key}")
    if progress:
        progress("lab: the image is missing or out of date; building it (about 10 minutes cold)")
    return build(progress, cache=cache)


#: where the build's tools live: root's PATH has the sbin directories, a user's (who runs tankbench with sudo,
#: or finds out it needs root) often does not
_TOOL_PATH = os.pathsep.join(("/usr/local/sbin", "/usr/sbin", "/sbin"))


def _check_tools(euid: int | None = None) -> None:
    """Refuse a build that cannot work here: not root first (a user's PATH has no /usr/sbin, and listing the tools as
    missing there sent users to install what they had), then a tool that is not installed."""
    if (os.geteuid() if euid is None else euid) != 0:
        raise UserError(
            f"the lab build needs root (debootstrap, chroot mounts); the lab image is kept per user, in {cache_dir()}",
            "run it as root (`sudo ./tankbench run …`, or `sudo ./tankbench lab build` then the campaign as root)",
        )
    path = os.pathsep.join((os.environ.get("PATH", ""), _TOOL_PATH))
    missing = [t for t in ("debootstrap", "mke2fs", "chroot", "apt-get") if shutil.which(t, path=path) is None]
    if missing:
        raise UserError(f"the lab build needs {', '.join(missing)}", "run ./scripts/setup (as root) first")


def build(progress: Progress | None = None, *, cache: Path | None = None, force: bool = False) -> Image:
    """Build (or reuse) the lab image and return it; each step prints a progress line with elapsed seconds."""

    def say(s: str) -> None:
        print(s, file=sys.stderr, flush=True)

    progress = progress or say
    cache = cache or cache_dir()
    if os.geteuid() != 0 and not any(cache.glob("image-*/manifest.json")):
        _check_tools()  # nothing to reuse: refuse now, before the apt indexes are fetched into HOME
    (cache / "logs").mkdir(parents=True, exist_ok=True)
    with open(cache / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two labs booting at once build the image once
        return _build(progress, cache, force)


def _build(progress: Progress, cache: Path, force: bool) -> Image:
    steps = Steps(progress)
    with steps.step("resolve package versions"):
        versions = resolve_versions(cache, progress)
    progress(f"lab build: kernel {versions.kernel_abi}, zfs {versions.zfs_version} from {versions.suite}")
    key = image_key(versions, guest_files_hash())
    if not force and (cache / f"image-{key}" / "manifest.json").exists():
        progress(f"lab build: image {key} is up to date")
        return load_image(cache / f"image-{key}")
    _check_tools()
    if force:
        for p in (cache / "modules" / modules_key(versions), cache / "guest", cache / f"tools-{tools_key(versions)}"):
            remove_tree(p)
    try:
        return _build_versions(cache, versions, steps)
    except LabBuildError as e:
        if versions.suite != BACKPORTS or e.step in ("debootstrap", "resolve"):
            raise
        progress(
            f"lab build: step {e.step} failed with {versions.suite} ({e.log}); falling back to {SUITE}'s kernel and zfs"
        )
        versions = resolve_versions(cache, progress, suites=(SUITE,))
        progress(f"lab build: kernel {versions.kernel_abi}, zfs {versions.zfs_version} from {versions.suite}")
        try:
            return _build_versions(cache, versions, steps)
        except LabBuildError as e2:
            raise e2 from e


def _build_versions(cache: Path, versions: Versions, steps: Steps) -> Image:
    """Build every step for one set of versions (the builder and guest chroots in parallel)."""
    base = build_base(cache, versions, steps)
    results: dict[str, Path] = {}
    errors: list[BaseException] = []

    def job(name: str, fn: Callable[[], Path]) -> None:
        try:
            results[name] = fn()
        except BaseException as e:  # re-raised in the main thread below
            errors.append(e)

    threads = [
        threading.Thread(target=job, args=("modules", lambda: build_modules(cache, base, versions, steps))),
        threading.Thread(target=job, args=("guest", lambda: build_guest(cache, base, versions, steps))),
        threading.Thread(target=job, args=("tools", lambda: build_tools(cache, base, versions, steps))),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    image = build_image(cache, results["guest"], results["modules"], results["tools"], versions, steps)
    steps.progress(f"lab build: image {image.key} ready in {image.dir} (total {time.monotonic() - steps.t0:.0f} s)")
    return image
