"""The lab build's steps, each cached under its key: debootstrap base, the dkms-built modules, the guest chroot,
the test guest's static tools, and the bootable image."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import asdict
from importlib import resources
from pathlib import Path

from tankbench.guest import initramfs, userland
from tankbench.lab.apt import apt_target, prep_apt
from tankbench.lab.chroot import (
    LabBuildError,
    Steps,
    chroot_argv,
    copy_tree,
    mounted,
    remove_tree,
    run_logged,
    tail_of,
    unmount_all,
)
from tankbench.lab.recipe import (
    FIO_CONFIGURE,
    GUEST_PACKAGES,
    QEMU_PACKAGES,
    ROOT_LABEL,
    SUITE,
    TOOLS_BUILD_PACKAGES,
    Image,
    Versions,
    guest_files_hash,
    guest_key,
    image_key,
    load_image,
    modules_key,
    tools_key,
)


def build_base(cache: Path, versions: Versions, steps: Steps) -> Path:
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
            run_logged("debootstrap", ["debootstrap", "--variant=minbase", SUITE, str(tmp), versions.mirror], log)
        finally:
            unmount_all(tmp)
        (tmp / ".tankbench-done").write_text(stamp)
        remove_tree(base)
        tmp.rename(base)
    return base


#: make update-initramfs a no-op in the builder chroot (a dpkg diversion, so initramfs-tools' own install keeps it)
NO_INITRAMFS = (
    "dpkg-divert --local --rename --add /usr/sbin/update-initramfs && ln -sf /bin/true /usr/sbin/update-initramfs"
)
#: whether the builder skips the initramfs (bench/lab-build-dkms turns it off to measure the step as it was)
BUILDER_NO_INITRAMFS = True


def build_modules(cache: Path, base: Path, versions: Versions, steps: Steps) -> Path:
    """spl/zfs .ko files for the guest kernel, built by dkms in a throwaway builder chroot."""
    out = cache / "modules" / modules_key(versions)
    if (out / ".tankbench-done").exists():
        return out
    builder = cache / "builder"
    log = cache / "logs" / "builder.log"
    log.write_text("")
    copy_tree(base, builder)
    prep_apt(builder, versions)
    try:
        with mounted(builder):
            with steps.step(f"builder: apt-get update + linux-headers-{versions.kernel_abi}"):
                if BUILDER_NO_INITRAMFS:
                    # the builder boots nothing: dkms's install would rebuild an initramfs for the lab's kernel
                    # (initramfs-tools comes in as a dependency); only the .ko files leave this chroot
                    run_logged("builder-headers", chroot_argv(builder, ["sh", "-c", NO_INITRAMFS]), log)
                run_logged("builder-headers", chroot_argv(builder, ["apt-get", "update"]), log)
                run_logged(
                    "builder-headers",
                    chroot_argv(
                        builder,
                        ["apt-get", "install", "-y", *apt_target(versions), f"linux-headers-{versions.kernel_abi}"],
                    ),
                    log,
                )
            with steps.step(f"builder: zfs-dkms {versions.zfs_version} (dkms build, the slow step)"):
                _dkms_install(builder, versions, log)
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


def _dkms_install(builder: Path, versions: Versions, log: Path) -> None:
    """apt-get install zfs-dkms in the builder: its postinst runs the dkms build for every kernel with headers (the
    host's kernel has none and is skipped with a warning). Not KCFLAGS=-g0 (no debug info to compile, dkms strips
    it anyway): with it OpenZFS 2.3.2's configure finds no module support in 6.12's headers and the build fails."""
    try:
        run_logged(
            "builder-zfs-dkms",
            chroot_argv(
                builder,
                ["apt-get", "install", "-y", *apt_target(versions), f"zfs-dkms={versions.zfs_version}"],
            ),
            log,
        )
    except LabBuildError as e:
        make_logs = sorted(glob.glob(str(builder / "var/lib/dkms/zfs/*/build/make.log")))
        detail = tail_of(log, 15) + ("\n--- dkms make.log:\n" + tail_of(Path(make_logs[-1]), 15) if make_logs else "")
        raise LabBuildError("builder-zfs-dkms", log, detail) from e


def build_guest(cache: Path, base: Path, versions: Versions, steps: Steps) -> Path:
    """The guest chroot: kernel, zfsutils, fio, python3, sshd, udev; initramfs cut to virtio_blk + ext4."""
    key = guest_key(versions)
    guest = cache / "guest"
    stamp = guest / ".tankbench-done"
    if stamp.exists() and stamp.read_text() == key:
        return guest
    log = cache / "logs" / "guest.log"
    log.write_text("")
    copy_tree(base, guest)
    prep_apt(guest, versions)
    conf = guest / "etc/initramfs-tools"
    with mounted(guest):
        with steps.step("guest: apt-get install kernel, zfsutils, fio, python3, sshd, udev"):
            run_logged("guest-apt", chroot_argv(guest, ["apt-get", "update"]), log)
            run_logged(
                "guest-apt",
                chroot_argv(guest, ["apt-get", "install", "-y", *apt_target(versions), "initramfs-tools"]),
                log,
            )
            text = (conf / "initramfs.conf").read_text()
            (conf / "initramfs.conf").write_text(re.sub(r"(?m)^MODULES=.*$", "MODULES=list", text))
            with open(conf / "modules", "a", encoding="utf-8") as f:
                f.write("virtio_pci\nvirtio_blk\next4\n")
            pkgs = [f"linux-image-{versions.kernel_abi}", *GUEST_PACKAGES]
            pkgs = [f"{p}={versions.zfs_version}" if p == "zfsutils-linux" else p for p in pkgs]
            run_logged("guest-apt", chroot_argv(guest, ["apt-get", "install", "-y", *apt_target(versions), *pkgs]), log)
        with steps.step("guest: apt-get install qemu (for the test guest)"):
            run_logged(
                "guest-qemu",
                chroot_argv(
                    guest, ["apt-get", "install", "-y", *apt_target(versions), *(f"{p}/{SUITE}" for p in QEMU_PACKAGES)]
                ),
                log,
            )
    stamp.write_text(key)
    return guest


def _compile_tools(root: Path, versions: Versions, steps: Steps, log: Path) -> None:
    """In the tools chroot: the build packages and the guest userland, fio's Debian source, a static fio."""
    with mounted(root):
        with steps.step(
            "tools: apt-get install gcc, libaio-dev, busybox-static, the guest userland; apt-get source fio"
        ):
            run_logged("tools-apt", chroot_argv(root, ["apt-get", "update"]), log)
            run_logged(
                "tools-apt",
                chroot_argv(root, ["apt-get", "install", "-y", *TOOLS_BUILD_PACKAGES, *userland.PACKAGES]),
                log,
            )
            fio = f"fio={versions.fio_version}" if versions.fio_version else "fio"
            run_logged(
                "tools-source",
                chroot_argv(
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
            run_logged(
                "tools-fio",
                chroot_argv(root, ["sh", "-c", f"cd /build/fio && {FIO_CONFIGURE} && make -j$(nproc) && strip fio"]),
                log,
            )


def _collect_tools(root: Path, src: Path, out: Path, versions: Versions, log: Path) -> None:
    """The static fio (checked: not built for this CPU, with libaio), busybox and the guest userland into `out`,
    with a manifest of their versions and fio's engines."""
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


def build_tools(cache: Path, base: Path, versions: Versions, steps: Steps) -> Path:
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
    copy_tree(base, root)
    prep_apt(root, versions, deb_src=True)
    src = root / "build"
    src.mkdir()
    try:
        _compile_tools(root, versions, steps, log)
        _collect_tools(root, src, out, versions, log)
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
        chroot_argv(root, ["dpkg-query", "-W", "-f", "${Package} ${Version}\\n", *userland.VERSIONED]),
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


def _install_modules(guest: Path, modules: Path, versions: Versions, log: Path) -> None:
    """The built ZFS modules into the guest chroot's updates/dkms (uncompressed), then depmod."""
    dst = guest / "lib/modules" / versions.kernel_abi / "updates/dkms"
    dst.mkdir(parents=True, exist_ok=True)
    for old in dst.glob("*.ko*"):
        old.unlink()
    for ko in modules.glob("*.ko*"):
        shutil.copy2(ko, dst / ko.name)
        if ko.name.endswith(".xz"):
            # The kernel's own xz decompression of zfs.ko costs ~6 s under TCG at every boot.
            run_logged("image-modules", ["xz", "-d", "-f", str(dst / ko.name)], log)
    run_logged("image-depmod", ["chroot", str(guest), "depmod", "-a", versions.kernel_abi], log)


#: what the image does without (package caches and lists, documentation, translations)
IMAGE_JUNK = ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/locale")


def _install_lab_files(guest: Path) -> None:
    """lab-init as PID 1's program, the host name, sshd's settings (no authorized key: each lab's comes on its
    kernel command line), and IMAGE_JUNK emptied."""
    files = resources.files("tankbench.lab").joinpath("files")
    init = guest / "usr/local/sbin/lab-init"
    init.write_bytes(files.joinpath("lab-init").read_bytes())
    init.chmod(0o755)
    (guest / "etc/hostname").write_text("tankbench-lab\n")
    cfg = guest / "etc/ssh/sshd_config"
    cfg.write_text(_sshd_config(cfg.read_text()))
    (guest / "root/.ssh/authorized_keys").unlink(missing_ok=True)  # per lab, from the kernel command line
    for junk in IMAGE_JUNK:
        for p in (guest / junk).glob("*"):
            if p.is_file() or p.is_symlink():
                p.unlink()
            elif p.is_dir() and p.name != "partial":
                shutil.rmtree(p)


def _mke2fs_root(guest: Path, image: Path, log: Path) -> int:
    """The root filesystem image from the guest chroot (`mke2fs -d`), 30 % + 512M larger than what it holds;
    returns its size in MiB."""
    du = ["du", "-s", "-m", "--one-file-system", str(guest)]
    used_mb = int(subprocess.run(du, capture_output=True, text=True, check=True).stdout.split()[0])
    size_mb = used_mb * 13 // 10 + 512  # room for the agent, logs and a campaign's small files
    argv = ["mke2fs", "-q", "-F", "-t", "ext4", "-L", ROOT_LABEL, "-d", str(guest), str(image), f"{size_mb}M"]
    run_logged("image-mke2fs", argv, log)
    return size_mb


def build_image(cache: Path, guest: Path, modules: Path, tools: Path, versions: Versions, steps: Steps) -> Image:
    """Install modules, guest files and the test guest into the guest chroot, then `mke2fs -d` the root image."""
    key = image_key(versions, guest_files_hash())
    out = cache / f"image-{key}"
    if (out / "manifest.json").exists():
        return load_image(out)
    log = cache / "logs" / "image.log"
    log.write_text("")
    with steps.step("image: modules, lab-init, test guest initramfs, mke2fs -d"):
        _install_modules(guest, modules, versions, log)
        _install_lab_files(guest)
        tmp = out.with_name(out.name + ".tmp")
        remove_tree(tmp)
        tmp.mkdir(parents=True)
        test_guest = install_test_guest(guest, tools, versions, tmp, log)
        shutil.copy2(guest / f"boot/vmlinuz-{versions.kernel_abi}", tmp / "vmlinuz")
        shutil.copy2(guest / f"boot/initrd.img-{versions.kernel_abi}", tmp / "initrd.img")
        size_mb = _mke2fs_root(guest, tmp / "rootfs.img", log)
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
