"""The test guest's initramfs: busybox, a static fio, a few kernel modules and the guest-side runner.

The whole guest lives in this one compressed cpio archive (no root disk): the kernel unpacks it and runs
`/init` (tankbench/lab/files/guest-init, a busybox shell script). Kernel modules come from the lab's own
kernel, decompressed here, because the kernel's xz decompression is slow under emulation.
"""

from __future__ import annotations

import gzip
import io
import lzma
import os
import stat
import zlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from tankbench.guest import userland as guest_userland

#: where the lab image keeps the test guest's initramfs and manifest (its kernel is the lab's own
#: /boot/vmlinuz-<abi>); other hosts get both uploaded
IN_IMAGE_DIR = "/usr/local/share/tankbench/guest"
#: modules the guest may need: disk buses, filesystems and dm-crypt (loaded on demand, except the buses)
GUEST_MODULES = (
    "virtio_mmio",
    "virtio_blk",
    "virtio_scsi",
    "sd_mod",
    "crc32c_generic",
    "ext4",
    "xfs",
    "dm-crypt",
    "xts",
    "aesni_intel",
)
#: the archive's top directories (the module directory and a userland tree add their own)
BASE_DIRS = ("bin", "sbin", "dev", "proc", "sys", "tmp", "run", "mnt", "etc", "lib", "lib/modules")
#: busybox applets linked in /bin (everything the guest-side runner and its jobs use)
APPLETS = (
    "sh",
    "ash",
    "cat",
    "cp",
    "dd",
    "echo",
    "head",
    "tail",
    "ls",
    "mkdir",
    "mount",
    "umount",
    "insmod",
    "modprobe",
    "base64",
    "tr",
    "sleep",
    "date",
    "sync",
    "sed",
    "grep",
    "cut",
    "wc",
    "rm",
    "mknod",
    "stat",
    "blockdev",
    "poweroff",
    "reboot",
    "uname",
    "printf",
    "test",
    "[",
    "true",
    "false",
    "xxd",
    "od",
    "seq",
    "sha256sum",
    "md5sum",
    "tee",
    "ln",
    "mv",
    "find",
    "awk",
    "expr",
    "env",
    "nproc",
    "free",
    "dmesg",
    "timeout",
    "kill",
    "ps",
    "tar",
    "fstrim",
    "blkdiscard",
    "mke2fs",
    "hexdump",
    "readlink",
    "basename",
    "dirname",
)


def parse_modules_dep(text: str) -> dict[str, list[str]]:
    """kmod's modules.dep text -> {module path: [dependency paths]} (pure)."""
    deps: dict[str, list[str]] = {}
    for line in text.splitlines():
        if ":" not in line:
            continue
        path, rest = line.split(":", 1)
        deps[path.strip()] = rest.split()
    return deps


def module_name(path: str) -> str:
    """'kernel/fs/ext4/ext4.ko.xz' -> 'ext4'; dashes and underscores are the same to the kernel (pure)."""
    base = os.path.basename(path)
    for ext in (".xz", ".zst", ".gz"):
        base = base.removesuffix(ext)
    return base.removesuffix(".ko").replace("-", "_")


def module_closure(deps: dict[str, list[str]], wanted: Iterable[str]) -> list[str]:
    """The module paths for `wanted` names and everything they depend on, dependencies first (pure).

    Raises KeyError naming a module that modules.dep does not know.
    """
    by_name = {module_name(p): p for p in deps}
    order: list[str] = []
    seen: set[str] = set()

    def visit(path: str) -> None:
        if path in seen:
            return
        seen.add(path)
        for dep in deps.get(path, []):
            visit(dep)
        order.append(path)

    for name in wanted:
        key = name.replace("-", "_")
        if key not in by_name:
            raise KeyError(name)
        visit(by_name[key])
    return order


def uncompressed_path(path: str) -> str:
    """'x.ko.xz' -> 'x.ko' (pure)."""
    return path.removesuffix(".xz")


def modules_dep_text(deps: dict[str, list[str]], paths: Sequence[str]) -> str:
    """A modules.dep for the included (decompressed) modules, in the order given (pure)."""
    return "".join(
        f"{uncompressed_path(p)}: {' '.join(uncompressed_path(d) for d in deps.get(p, []))}".rstrip() + "\n"
        for p in paths
    )


class Cpio:
    """A newc ('070701') cpio archive written in memory: what the kernel unpacks as its initramfs."""

    def __init__(self) -> None:
        self.buf = io.BytesIO()
        self.ino = 1

    def _entry(self, name: str, mode: int, data: bytes = b"", nlink: int = 1) -> None:
        namez = name.encode() + b"\0"
        fields = (self.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(namez), 0)
        self.buf.write(b"070701" + b"".join(b"%08X" % f for f in fields) + namez)
        self.buf.write(b"\0" * (-self.buf.tell() % 4))
        self.buf.write(data)
        self.buf.write(b"\0" * (-self.buf.tell() % 4))
        self.ino += 1

    def dir(self, name: str, perm: int = 0o755) -> None:
        """Add a directory."""
        self._entry(name, stat.S_IFDIR | perm, nlink=2)

    def file(self, name: str, data: bytes, perm: int = 0o644) -> None:
        """Add a regular file."""
        self._entry(name, stat.S_IFREG | perm, data)

    def symlink(self, name: str, target: str) -> None:
        """Add a symbolic link."""
        self._entry(name, stat.S_IFLNK | 0o777, target.encode())

    def node(self, name: str, kind: int, major: int, minor: int, perm: int = 0o600) -> None:
        """Add a device node (the console must exist before devtmpfs is mounted)."""
        namez = name.encode() + b"\0"
        fields = (self.ino, kind | perm, 0, 0, 1, 0, 0, 0, 0, major, minor, len(namez), 0)
        self.buf.write(b"070701" + b"".join(b"%08X" % f for f in fields) + namez)
        self.buf.write(b"\0" * (-self.buf.tell() % 4))
        self.ino += 1

    def finish(self) -> bytes:
        """The archive with its trailer."""
        self._entry("TRAILER!!!", 0)
        return self.buf.getvalue()


#: compressed-payload magic numbers in a bzImage -> how to decompress them here (zstd needs the zstd tool)
_PAYLOADS = ((b"\x28\xb5\x2f\xfd", "zstd"), (b"\xfd7zXZ\x00", "xz"), (b"\x1f\x8b\x08", "gzip"))


def extract_vmlinux(bzimage: bytes, zstd: Callable[[bytes], bytes] | None = None) -> bytes | None:
    """The uncompressed ELF kernel inside a bzImage, or None if no payload decompresses to one.

    qemu boots an ELF vmlinux through its PVH entry point (CONFIG_PVH): no decompression in the guest,
    which under nested TCG took longer than the rest of the kernel's boot.
    """
    for magic, kind in _PAYLOADS:
        start = bzimage.find(magic)
        while start >= 0:
            data = bzimage[start:]
            try:
                if kind == "zstd":
                    out = zstd(data) if zstd else b""
                elif kind == "xz":
                    out = lzma.LZMADecompressor().decompress(data)
                else:
                    out = zlib.decompressobj(wbits=31).decompress(data)
            except (lzma.LZMAError, zlib.error, OSError):
                out = b""
            if out.startswith(b"\x7fELF"):
                return out
            start = bzimage.find(magic, start + 1)
    return None


def read_module(path: Path) -> bytes:
    """A module file's bytes, decompressed if it is .ko.xz."""
    data = path.read_bytes()
    return lzma.decompress(data) if path.name.endswith(".xz") else data


def _add_userland(c: Cpio, tree: Path, made: set[str]) -> None:
    """Every directory, file and symlink of a userland tree, at the same paths in the archive."""
    for kind, rel, path in guest_userland.walk(tree):
        if kind == "dir":
            if rel not in made:
                c.dir(rel)
                made.add(rel)
        elif kind == "link":
            c.symlink(rel, os.readlink(path))
        else:
            c.file(rel, path.read_bytes(), 0o755 if os.access(path, os.X_OK) else 0o644)


def build_initramfs(
    out: Path,
    *,
    busybox: Path,
    fio: Path,
    init: bytes,
    modules_dir: Path,
    kernel_abi: str,
    modules: Sequence[str] = GUEST_MODULES,
    compress: bool = False,
    userland: Path | None = None,
) -> dict[str, object]:
    """Write the cpio initramfs to `out`; returns what it contains (for the manifest).

    Uncompressed by default: under nested TCG the kernel's gunzip of it took longer than loading the
    bigger file (qemu loads the initrd itself, outside the guest). `userland`: a directory tree (Debian's
    binaries, their libraries and the loader at their own paths; see guest/userland.py) added as it is.
    """
    deps = parse_modules_dep((modules_dir / "modules.dep").read_text())
    paths = module_closure(deps, modules)
    c = Cpio()
    for d in (*BASE_DIRS, f"lib/modules/{kernel_abi}"):
        c.dir(d)
    c.node("dev/console", stat.S_IFCHR, 5, 1)
    c.node("dev/null", stat.S_IFCHR, 1, 3, 0o666)
    c.file("bin/busybox", busybox.read_bytes(), 0o755)
    for applet in APPLETS:
        c.symlink(f"bin/{applet}", "busybox")
    c.symlink("sbin/modprobe", "../bin/busybox")  # the kernel's request_module() runs /sbin/modprobe
    c.file("bin/fio", fio.read_bytes(), 0o755)
    c.file("init", init, 0o755)
    made: set[str] = {f"lib/modules/{kernel_abi}"}
    for p in paths:
        rel = f"lib/modules/{kernel_abi}/{uncompressed_path(p)}"
        parent = os.path.dirname(rel)
        missing = []
        while parent not in made:
            missing.append(parent)
            parent = os.path.dirname(parent)
        for d in reversed(missing):
            c.dir(d)
            made.add(d)
        c.file(rel, read_module(modules_dir / p))
    c.file(f"lib/modules/{kernel_abi}/modules.dep", modules_dep_text(deps, paths).encode())
    if userland is not None:
        _add_userland(c, userland, made | set(BASE_DIRS))
    raw = c.finish()
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(gzip.compress(raw, compresslevel=6, mtime=0) if compress else raw)
    os.replace(tmp, out)
    return {"modules": [module_name(p) for p in paths], "cpio_bytes": len(raw), "bytes": out.stat().st_size}
