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
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from tankbench.errors import HostError, UserError
from tankbench.guest import initramfs, userland

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


class LabBuildError(HostError):
    """A build step failed; the message names the step, its log and the log's tail."""

    def __init__(self, step: str, log: Path, detail: str = "") -> None:
        tail = detail or tail_of(log)
        super().__init__(f"lab build step '{step}' failed (log: {log}):\n{tail}")
        self.step = step
        self.log = log


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


def tail_of(path: Path, lines: int = 25) -> str:
    """The last lines of a log file (empty if it does not exist)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


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


def host_mirrors(sources_dir: str = "/etc/apt/sources.list.d") -> tuple[str, str]:
    """The Debian mirror and security mirror from this machine's deb822 apt sources."""
    mirror = security = ""
    for path in sorted(glob.glob(os.path.join(sources_dir, "*.sources"))):
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = re.match(r"^URIs:\s*(\S+)", line)
                if not m:
                    continue
                if "security" in m.group(1):
                    security = security or m.group(1)
                else:
                    mirror = mirror or m.group(1)
    if not mirror:
        list_file = "/etc/apt/sources.list"
        if os.path.exists(list_file):
            with open(list_file, encoding="utf-8") as f:
                for line in f:
                    m = re.match(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)", line)
                    if m and "security" not in m.group(1):
                        mirror = mirror or m.group(1)
    mirror = os.environ.get("TANKBENCH_MIRROR", mirror) or "http://deb.debian.org/debian"
    security = security or mirror.rsplit("/", 1)[0] + "/debian-security"
    return mirror, security


def sources_list(mirror: str, security: str, deb_src: bool = False) -> str:
    """The apt sources of the builder and guest chroots: main + contrib, with backports (+ bookworm's sources)."""
    return (
        f"deb {mirror} {SUITE} main contrib\n"
        f"deb {mirror} {SUITE}-updates main contrib\n"
        f"deb {security} {SUITE}-security main contrib\n"
        f"deb {mirror} {BACKPORTS} main contrib\n" + (f"deb-src {mirror} {SUITE} main\n" if deb_src else "")
    )


def parse_kernel_abi(depends: str) -> str:
    """'linux-image-6.12.95+deb12-amd64 (= 6.12.95-1~bpo12+1)' -> '6.12.95+deb12-amd64' (pure)."""
    m = re.search(r"linux-image-(\d[^\s,(]*-amd64)\b", depends)
    if not m:
        raise ValueError(f"no kernel ABI in {depends!r}")
    return m.group(1)


def _stanza_field(stanza: str, field: str) -> str:
    m = re.search(rf"^{field}:\s*(.*)$", stanza, re.M)
    return m.group(1).strip() if m else ""


class _Apt:
    """The host's apt client with private lists, for reading package indexes without touching the host."""

    def __init__(self, root: Path, mirror: str, security: str) -> None:
        self.root = root
        (root / "lists" / "partial").mkdir(parents=True, exist_ok=True)
        (root / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
        (root / "sources.list").write_text(sources_list(mirror, security))
        self.opts = [
            "-o",
            f"Dir::Etc::sourcelist={root / 'sources.list'}",
            "-o",
            "Dir::Etc::sourceparts=/nonexistent",
            "-o",
            f"Dir::State::Lists={root / 'lists'}",
            "-o",
            f"Dir::Cache={root / 'cache'}",
            "-o",
            "APT::Get::List-Cleanup=0",
            "-o",
            "Debug::NoLocking=1",
        ]

    def update(self, log: Path) -> None:
        with open(log, "ab") as f:
            rc = subprocess.run(["apt-get", *self.opts, "update"], stdout=f, stderr=subprocess.STDOUT).returncode
        if rc != 0:
            raise LabBuildError("resolve", log)

    def show(self, pkg: str) -> str:
        cp = subprocess.run(["apt-cache", *self.opts, "show", pkg], capture_output=True, text=True)
        return cp.stdout if cp.returncode == 0 else ""


def resolve_versions(
    cache: Path, progress: Progress, *, offline_ok: bool = True, suites: Sequence[str] = (BACKPORTS, SUITE)
) -> Versions:
    """Exact kernel ABI and zfs version from bookworm-backports (fallback: bookworm's 6.1 + 2.1.11)."""
    mirror, security = host_mirrors()
    log = cache / "logs" / "resolve.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    apt = _Apt(cache / "apt", mirror, security)
    try:
        apt.update(log)
    except LabBuildError:
        last = cache / "versions.json"
        if offline_ok and last.exists():
            progress("resolve: package index unreachable; using the versions of the last build")
            return Versions(**json.loads(last.read_text()))
        raise
    for suite in suites:
        img = apt.show(f"linux-image-amd64/{suite}")
        zfs = apt.show(f"zfs-dkms/{suite}")
        if not img or not zfs:
            progress(f"resolve: {suite} has no kernel or zfs-dkms; trying the next suite")
            continue
        first_img = img.split("\n\n")[0]
        first_zfs = zfs.split("\n\n")[0]
        try:
            abi = parse_kernel_abi(_stanza_field(first_img, "Depends"))
        except ValueError:
            continue
        return Versions(
            suite=suite,
            kernel_abi=abi,
            kernel_version=_stanza_field(first_img, "Version"),
            zfs_version=_stanza_field(first_zfs, "Version"),
            mirror=mirror,
            security_mirror=security,
            fio_version=_stanza_field(apt.show(f"fio/{SUITE}").split("\n\n")[0], "Version"),
            busybox_version=_stanza_field(apt.show(f"busybox-static/{SUITE}").split("\n\n")[0], "Version"),
        )
    raise LabBuildError("resolve", log, "neither bookworm-backports nor bookworm offer a kernel and zfs-dkms")


# ----------------------------------------------------------------------------- chroot helpers


def _mounts_under(root: Path) -> list[str]:
    """Mount points at or below root, deepest first (from /proc/self/mounts)."""
    prefix = str(root.resolve())
    found = []
    with open("/proc/self/mounts", encoding="utf-8") as f:
        for line in f:
            mp = line.split()[1].replace("\\040", " ")
            if mp == prefix or mp.startswith(prefix + "/"):
                found.append(mp)
    return sorted(found, key=len, reverse=True)


def unmount_all(root: Path) -> None:
    """Unmount everything mounted below a chroot (lazily if busy)."""
    for mp in _mounts_under(root):
        if subprocess.run(["umount", mp], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", mp], capture_output=True)


def remove_tree(root: Path) -> None:
    """rm -rf a chroot, but never while something (e.g. the host's /dev) is still mounted inside it."""
    if not root.exists():
        return
    unmount_all(root)
    if _mounts_under(root):
        raise HostError(f"refusing to delete {root}: still has mounts {_mounts_under(root)}")
    shutil.rmtree(root)


@contextmanager
def mounted(root: Path) -> Iterator[None]:
    """proc, sys, dev and dev/pts mounted in a chroot for the duration; always unmounted afterwards."""
    try:
        for fstype, src, rel in (
            ("proc", "proc", "proc"),
            ("sysfs", "sys", "sys"),
            ("bind", "/dev", "dev"),
            ("bind", "/dev/pts", "dev/pts"),
        ):
            target = root / rel
            target.mkdir(parents=True, exist_ok=True)
            argv = (
                ["mount", "--bind", src, str(target)] if fstype == "bind" else ["mount", "-t", fstype, src, str(target)]
            )
            subprocess.run(argv, check=True, capture_output=True)
        yield
    finally:
        unmount_all(root)


def _chroot_argv(root: Path, argv: Sequence[str]) -> list[str]:
    return [
        "chroot",
        str(root),
        "/usr/bin/env",
        "-i",
        "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME=/root",
        "LANG=C.UTF-8",
        "DEBIAN_FRONTEND=noninteractive",
        *argv,
    ]


def _run_logged(step: str, argv: Sequence[str], log: Path) -> None:
    with open(log, "ab") as f:
        f.write(("\n$ " + " ".join(argv) + "\n").encode())
        f.flush()
        rc = subprocess.run(list(argv), stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode
    if rc != 0:
        raise LabBuildError(step, log)


def _prep_apt(root: Path, versions: Versions, deb_src: bool = False) -> None:
    (root / "etc/apt/sources.list").write_text(sources_list(versions.mirror, versions.security_mirror, deb_src))
    policy = root / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 101\n")  # no daemons start inside the chroot
    policy.chmod(0o755)
    (root / "etc/apt/apt.conf.d/99tankbench").write_text(
        'APT::Install-Recommends "false"; APT::Install-Suggests "false";\n'
    )


def _target(versions: Versions) -> list[str]:
    return ["-t", versions.suite] if versions.suite == BACKPORTS else []


class _Steps:
    """Progress lines per step with elapsed seconds."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.t0 = time.monotonic()

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        t = time.monotonic()
        self.progress(f"lab build: {name} …")
        yield
        self.progress(
            f"lab build: {name} done in {time.monotonic() - t:.0f} s (total {time.monotonic() - self.t0:.0f} s)"
        )


# ----------------------------------------------------------------------------- the steps


def build_base(cache: Path, versions: Versions, steps: _Steps) -> Path:
    """debootstrap minbase (shared by the builder and the guest)."""
    base = cache / "base"
    stamp = f"{SUITE} minbase {versions.mirror}"
    if (base / ".tankbench-done").exists() and (base / ".tankbench-done").read_text() == stamp:
        return base
    with steps.step("debootstrap"):
        log = cache / "logs" / "debootstrap.log"
        log.write_text("")
        tmp = cache / "base.tmp"
        remove_tree(tmp)
        try:
            _run_logged("debootstrap", ["debootstrap", "--variant=minbase", SUITE, str(tmp), versions.mirror], log)
        finally:
            unmount_all(tmp)
        (tmp / ".tankbench-done").write_text(stamp)
        remove_tree(base)
        tmp.rename(base)
    return base


def _copy_tree(src: Path, dst: Path) -> None:
    remove_tree(dst)
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)


def build_modules(cache: Path, base: Path, versions: Versions, steps: _Steps) -> Path:
    """spl/zfs .ko files for the guest kernel, built by dkms in a throwaway builder chroot."""
    out = cache / "modules" / modules_key(versions)
    if (out / ".tankbench-done").exists():
        return out
    builder = cache / "builder"
    log = cache / "logs" / "builder.log"
    log.write_text("")
    _copy_tree(base, builder)
    _prep_apt(builder, versions)
    try:
        with mounted(builder):
            with steps.step(f"builder: apt-get update + linux-headers-{versions.kernel_abi}"):
                _run_logged("builder-headers", _chroot_argv(builder, ["apt-get", "update"]), log)
                _run_logged(
                    "builder-headers",
                    _chroot_argv(
                        builder,
                        ["apt-get", "install", "-y", *_target(versions), f"linux-headers-{versions.kernel_abi}"],
                    ),
                    log,
                )
            with steps.step(f"builder: zfs-dkms {versions.zfs_version} (dkms build, the slow step)"):
                # zfs-dkms's postinst runs the dkms build for every kernel with headers; the host's
                # kernel has none and is skipped with a warning.
                try:
                    _run_logged(
                        "builder-zfs-dkms",
                        _chroot_argv(
                            builder,
                            ["apt-get", "install", "-y", *_target(versions), f"zfs-dkms={versions.zfs_version}"],
                        ),
                        log,
                    )
                except LabBuildError as e:
                    make_logs = sorted(glob.glob(str(builder / "var/lib/dkms/zfs/*/build/make.log")))
                    detail = tail_of(log, 15) + (
                        "\n--- dkms make.log:\n" + tail_of(Path(make_logs[-1]), 15) if make_logs else ""
                    )
                    raise LabBuildError("builder-zfs-dkms", log, detail) from e
        kos = glob.glob(str(builder / "lib/modules" / versions.kernel_abi / "updates/dkms/*.ko*"))
        if not any(os.path.basename(k).startswith("zfs.ko") for k in kos):
            raise LabBuildError("builder-zfs-dkms", log, f"dkms installed no zfs.ko for {versions.kernel_abi}")
        tmp = out.with_name(out.name + ".tmp")
        remove_tree(tmp)
        tmp.mkdir(parents=True)
        for k in kos:
            shutil.copy2(k, tmp / os.path.basename(k))
        (tmp / ".tankbench-done").write_text(json.dumps(asdict(versions)))
        remove_tree(out)
        tmp.rename(out)
    finally:
        remove_tree(builder)  # 1+ GB of compilers; only the .ko files are kept
    return out


def build_guest(cache: Path, base: Path, versions: Versions, steps: _Steps) -> Path:
    """The guest chroot: kernel, zfsutils, fio, python3, sshd, udev; initramfs cut to virtio_blk + ext4."""
    key = guest_key(versions)
    guest = cache / "guest"
    stamp = guest / ".tankbench-done"
    if stamp.exists() and stamp.read_text() == key:
        return guest
    log = cache / "logs" / "guest.log"
    log.write_text("")
    _copy_tree(base, guest)
    _prep_apt(guest, versions)
    conf = guest / "etc/initramfs-tools"
    with mounted(guest):
        with steps.step("guest: apt-get install kernel, zfsutils, fio, python3, sshd, udev"):
            _run_logged("guest-apt", _chroot_argv(guest, ["apt-get", "update"]), log)
            _run_logged(
                "guest-apt",
                _chroot_argv(guest, ["apt-get", "install", "-y", *_target(versions), "initramfs-tools"]),
                log,
            )
            text = (conf / "initramfs.conf").read_text()
            (conf / "initramfs.conf").write_text(re.sub(r"(?m)^MODULES=.*$", "MODULES=list", text))
            with open(conf / "modules", "a", encoding="utf-8") as f:
                f.write("virtio_pci\nvirtio_blk\next4\n")
            pkgs = [f"linux-image-{versions.kernel_abi}", *GUEST_PACKAGES]
            pkgs = [f"{p}={versions.zfs_version}" if p == "zfsutils-linux" else p for p in pkgs]
            _run_logged("guest-apt", _chroot_argv(guest, ["apt-get", "install", "-y", *_target(versions), *pkgs]), log)
        with steps.step("guest: apt-get install qemu (for the test guest)"):
            _run_logged(
                "guest-qemu",
                _chroot_argv(
                    guest, ["apt-get", "install", "-y", *_target(versions), *(f"{p}/{SUITE}" for p in QEMU_PACKAGES)]
                ),
                log,
            )
    stamp.write_text(key)
    return guest


def build_tools(cache: Path, base: Path, versions: Versions, steps: _Steps) -> Path:
    """The test guest's static fio (built from Debian's fio source package) and busybox, in a throwaway chroot.

    A chroot, not the host: the result depends only on Debian's packages, not on the host's compiler or
    distribution, and a fresh CI machine needs nothing installed for it.
    """
    out = cache / f"tools-{tools_key(versions)}"
    if (out / "manifest.json").exists():
        return out
    root = cache / "tools-builder"
    log = cache / "logs" / "tools.log"
    log.write_text("")
    _copy_tree(base, root)
    _prep_apt(root, versions, deb_src=True)
    src = root / "build"
    src.mkdir()
    try:
        with mounted(root):
            with steps.step(
                "tools: apt-get install gcc, libaio-dev, busybox-static, the guest userland; apt-get source fio"
            ):
                _run_logged("tools-apt", _chroot_argv(root, ["apt-get", "update"]), log)
                _run_logged(
                    "tools-apt",
                    _chroot_argv(root, ["apt-get", "install", "-y", *TOOLS_BUILD_PACKAGES, *userland.PACKAGES]),
                    log,
                )
                fio = f"fio={versions.fio_version}" if versions.fio_version else "fio"
                _run_logged(
                    "tools-source",
                    _chroot_argv(
                        root,
                        [
                            "sh",
                            "-c",
                            f"cd /build && apt-get source -y --download-only {fio} && dpkg-source -x *.dsc fio",
                        ],
                    ),
                    log,
                )
            with steps.step("tools: static fio (./configure --build-static --disable-native, make)"):
                # --disable-native: fio's configure otherwise compiles with -march=native, and a fio built on
                # an AVX-512 machine dies of SIGILL (vpbroadcastd) in a guest whose emulated CPU has no AVX-512
                _run_logged(
                    "tools-fio",
                    _chroot_argv(
                        root, ["sh", "-c", f"cd /build/fio && {FIO_CONFIGURE} && make -j$(nproc) && strip fio"]
                    ),
                    log,
                )
        if "BUILD_NATIVE" in (src / "fio" / "config-host.mak").read_text():
            raise LabBuildError("tools-fio", log, "fio was configured for this machine's CPU (-march=native)")
        engines = subprocess.run([str(src / "fio" / "fio"), "--enghelp"], capture_output=True, text=True).stdout
        if "libaio" not in engines:
            raise LabBuildError("tools-fio", log, f"the static fio has no libaio engine: {engines.split()}")
        tmp = out.with_name(out.name + ".tmp")
        remove_tree(tmp)
        tmp.mkdir(parents=True)
        shutil.copy2(src / "fio" / "fio", tmp / "fio")
        shutil.copy2(root / "bin" / "busybox", tmp / "busybox")
        extra = _userland(root, tmp / "userland", log)
        version = subprocess.run([str(tmp / "fio"), "--version"], capture_output=True, text=True).stdout.strip()
        (tmp / "manifest.json").write_text(
            json.dumps(
                {
                    "fio": version,
                    "fio_source": versions.fio_version,
                    "busybox": versions.busybox_version,
                    "fio_engines": [e.strip() for e in engines.splitlines()[1:] if e.strip()],
                    **extra,
                },
                indent=2,
            )
            + "\n"
        )
        remove_tree(out)
        tmp.rename(out)
    finally:
        remove_tree(root)  # compilers and sources: only the two binaries are kept
    for old in cache.glob("tools-*"):
        if old != out and old.is_dir() and old.name != "tools-builder":
            remove_tree(old)
    return out


def _userland(root: Path, out: Path, log: Path) -> dict[str, object]:
    """Copy the guest userland (guest/userland.py) with its library closure out of the tools chroot, and prove
    every binary starts in a chroot of that tree alone (a missing library fails the build, not a campaign)."""

    def ldd(binary: str) -> str:
        cp = subprocess.run(["chroot", str(root), "ldd", binary], capture_output=True, text=True)
        if cp.returncode != 0:
            raise LabBuildError("tools-userland", log, f"ldd {binary}: {cp.stderr.strip()}")
        return cp.stdout

    try:
        libs = userland.closure(userland.BINARIES, ldd)
    except userland.ClosureError as e:
        raise LabBuildError("tools-userland", log, str(e)) from e
    remove_tree(out)
    size = userland.copy_tree(root, out, userland.tree_files(libraries=libs))
    for binary, args in userland.VERSION_ARGS.items():
        cp = subprocess.run(["chroot", str(out), binary, *args], capture_output=True, text=True)
        if cp.returncode != 0:
            raise LabBuildError("tools-userland", log, f"{binary} does not start alone: {cp.stderr.strip()[-500:]}")
    pkgs = subprocess.run(
        _chroot_argv(root, ["dpkg-query", "-W", "-f", "${Package} ${Version}\\n", *userland.VERSIONED]),
        capture_output=True,
        text=True,
    ).stdout
    return {
        "userland_packages": dict(line.split(" ", 1) for line in pkgs.splitlines() if " " in line),
        "userland_binaries": list(userland.BINARIES) + list(userland.LINKS),
        "userland_libraries": libs,
        "userland_bytes": size,
    }


def install_test_guest(guest: Path, tools: Path, versions: Versions, out_dir: Path, log: Path) -> dict[str, object]:
    """Build the test guest's initramfs from the guest chroot's kernel modules and the tools; install it in
    the guest chroot (initramfs.IN_IMAGE_DIR) and keep a copy in the image directory."""
    files = resources.files("tankbench.lab").joinpath("files")
    initrd = out_dir / "guest-initramfs.img"
    try:
        info = initramfs.build_initramfs(
            initrd,
            busybox=tools / "busybox",
            fio=tools / "fio",
            init=files.joinpath("guest-init").read_bytes(),
            modules_dir=guest / "lib/modules" / versions.kernel_abi,
            kernel_abi=versions.kernel_abi,
            userland=tools / "userland" if (tools / "userland").is_dir() else None,
        )
    except (OSError, KeyError) as e:
        raise LabBuildError("image-test-guest", log, f"cannot build the test guest's initramfs: {e!r}") from e
    info.update(json.loads((tools / "manifest.json").read_text()))
    dst = guest / initramfs.IN_IMAGE_DIR.lstrip("/")
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copy2(initrd, dst / "initramfs.img")

    def zstd(data: bytes) -> bytes:  # the guest chroot's zstd (Debian kernels are zstd-compressed)
        return subprocess.run(["chroot", str(guest), "zstd", "-dc"], input=data, capture_output=True).stdout

    vmlinux = initramfs.extract_vmlinux((guest / f"boot/vmlinuz-{versions.kernel_abi}").read_bytes(), zstd)
    if vmlinux is not None:
        (out_dir / "guest-vmlinux").write_bytes(vmlinux)
        shutil.copy2(out_dir / "guest-vmlinux", dst / "vmlinux")
        info["kernel"] = f"{initramfs.IN_IMAGE_DIR}/vmlinux"  # booted through PVH: no decompression in the guest
    else:
        info["kernel"] = f"/boot/vmlinuz-{versions.kernel_abi}"
    (dst / "manifest.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def _sshd_config(text: str) -> str:
    text = re.sub(r"(?m)^#?PermitRootLogin.*$", "PermitRootLogin prohibit-password", text)
    for line in ("UseDNS no", "PasswordAuthentication no"):
        if not re.search(rf"(?m)^{line}$", text):
            text += f"\n{line}\n"
    return text


def build_image(cache: Path, guest: Path, modules: Path, tools: Path, versions: Versions, steps: _Steps) -> Image:
    """Install modules, guest files and the test guest into the guest chroot, then `mke2fs -d` the root image."""
    key = image_key(versions, guest_files_hash())
    out = cache / f"image-{key}"
    if (out / "manifest.json").exists():
        return load_image(out)
    log = cache / "logs" / "image.log"
    log.write_text("")
    with steps.step("image: modules, lab-init, test guest initramfs, mke2fs -d"):
        dst = guest / "lib/modules" / versions.kernel_abi / "updates/dkms"
        dst.mkdir(parents=True, exist_ok=True)
        for old in dst.glob("*.ko*"):
            old.unlink()
        for ko in modules.glob("*.ko*"):
            shutil.copy2(ko, dst / ko.name)
            if ko.name.endswith(".xz"):
                # The kernel's own xz decompression of zfs.ko costs ~6 s under TCG at every boot.
                _run_logged("image-modules", ["xz", "-d", "-f", str(dst / ko.name)], log)
        _run_logged("image-depmod", ["chroot", str(guest), "depmod", "-a", versions.kernel_abi], log)
        files = resources.files("tankbench.lab").joinpath("files")
        init = guest / "usr/local/sbin/lab-init"
        init.write_bytes(files.joinpath("lab-init").read_bytes())
        init.chmod(0o755)
        (guest / "etc/hostname").write_text("tankbench-lab\n")
        cfg = guest / "etc/ssh/sshd_config"
        cfg.write_text(_sshd_config(cfg.read_text()))
        (guest / "root/.ssh/authorized_keys").unlink(missing_ok=True)  # per lab, from the kernel command line
        for junk in (
            "var/cache/apt/archives",
            "var/lib/apt/lists",
            "usr/share/doc",
            "usr/share/man",
            "usr/share/locale",
        ):
            for p in (guest / junk).glob("*"):
                if p.is_file() or p.is_symlink():
                    p.unlink()
                elif p.is_dir() and p.name != "partial":
                    shutil.rmtree(p)
        tmp = out.with_name(out.name + ".tmp")
        remove_tree(tmp)
        tmp.mkdir(parents=True)
        test_guest = install_test_guest(guest, tools, versions, tmp, log)
        shutil.copy2(guest / f"boot/vmlinuz-{versions.kernel_abi}", tmp / "vmlinuz")
        shutil.copy2(guest / f"boot/initrd.img-{versions.kernel_abi}", tmp / "initrd.img")
        used_mb = int(
            subprocess.run(
                ["du", "-s", "-m", "--one-file-system", str(guest)], capture_output=True, text=True, check=True
            ).stdout.split()[0]
        )
        size_mb = used_mb * 13 // 10 + 512  # room for the agent, logs and a campaign's small files
        _run_logged(
            "image-mke2fs",
            [
                "mke2fs",
                "-q",
                "-F",
                "-t",
                "ext4",
                "-L",
                ROOT_LABEL,
                "-d",
                str(guest),
                str(tmp / "rootfs.img"),
                f"{size_mb}M",
            ],
            log,
        )
        host_key = (guest / "etc/ssh/ssh_host_ed25519_key.pub").read_text().split()
        manifest = {
            "key": key,
            "versions": asdict(versions),
            "host_key": " ".join(host_key[:2]),
            "packages": list(GUEST_PACKAGES),
            "files_hash": guest_files_hash(),
            "rootfs_mb": size_mb,
            "test_guest": test_guest,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        remove_tree(out)
        tmp.rename(out)
    (cache / "versions.json").write_text(json.dumps(asdict(versions)))
    for old in cache.glob("image-*"):  # keep the cache at one image
        if old != out and old.is_dir():
            remove_tree(old)
    return load_image(out)


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


def _check_tools() -> None:
    missing = [t for t in ("debootstrap", "mke2fs", "chroot", "apt-get") if shutil.which(t) is None]
    if missing:
        raise UserError(f"the lab build needs {', '.join(missing)}", "run ./scripts/setup (as root) first")
    if os.geteuid() != 0:
        raise UserError("the lab build needs root (debootstrap, chroot mounts)", "run `tankbench lab build` as root")


def build(progress: Progress | None = None, *, cache: Path | None = None, force: bool = False) -> Image:
    """Build (or reuse) the lab image and return it; each step prints a progress line with elapsed seconds."""

    def say(s: str) -> None:
        print(s, file=sys.stderr, flush=True)

    progress = progress or say
    cache = cache or cache_dir()
    (cache / "logs").mkdir(parents=True, exist_ok=True)
    with open(cache / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two labs booting at once build the image once
        return _build(progress, cache, force)


def _build(progress: Progress, cache: Path, force: bool) -> Image:
    steps = _Steps(progress)
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


def _build_versions(cache: Path, versions: Versions, steps: _Steps) -> Image:
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
