"""The test guest's userland beyond busybox and fio: Debian's mkfs.ext4, mkfs.xfs, cryptsetup, rsync, GNU cp/dd.

These are Debian's own dynamically linked binaries with their shared-library closure and the dynamic loader,
found with `ldd` inside the lab build's tools chroot (static builds of cryptsetup, xfsprogs and rsync are not
something Debian offers; building them would mean patching their build systems). The initramfs lives in RAM,
so the ~15 libraries load from memory, not over 9p (where Debian's fio took 38 s to start).

The binaries keep their Debian paths (/usr/sbin/mke2fs, /lib/x86_64-linux-gnu/libc.so.6, …): busybox's
applets of the same names (mke2fs, cp, dd) come first in the guest's PATH, so guest scripts call these by
absolute path.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

#: Debian packages whose binaries the guest gets (coreutils and util-linux are already in the base system)
PACKAGES = ("e2fsprogs", "xfsprogs", "cryptsetup-bin", "rsync")
#: packages whose versions the tools manifest records
VERSIONED = (*PACKAGES, "coreutils", "util-linux", "libc6")
#: the binaries, by their path in the chroot (and in the guest)
BINARIES = (
    "/usr/sbin/mke2fs",
    "/usr/sbin/mkfs.xfs",
    "/usr/sbin/cryptsetup",
    "/usr/sbin/blkid",
    "/usr/bin/rsync",
    "/usr/bin/cp",
    "/usr/bin/dd",
)
#: symbolic links as Debian has them (mkfs.ext4 is mke2fs reading its argv[0])
LINKS = {"/usr/sbin/mkfs.ext4": "mke2fs"}
#: configuration files the binaries read: mke2fs's defaults, so the guest makes ext4 as Debian does
FILES = ("/etc/mke2fs.conf",)
#: what each binary answers to prove it starts (the build runs each in a chroot of the userland alone)
VERSION_ARGS = {
    "/usr/sbin/mke2fs": ["-V"],
    "/usr/sbin/mkfs.xfs": ["-V"],
    "/usr/sbin/cryptsetup": ["--version"],
    "/usr/sbin/blkid": ["-V"],
    "/usr/bin/rsync": ["--version"],
    "/usr/bin/cp": ["--version"],
    "/usr/bin/dd": ["--version"],
}

_LDD_ARROW = re.compile(r"^\s*(\S+)\s+=>\s+(\S+)(?:\s+\(0x[0-9a-f]+\))?\s*$")
_LDD_PLAIN = re.compile(r"^\s*(/\S+)\s+\(0x[0-9a-f]+\)\s*$")


class ClosureError(ValueError):
    """ldd named a library it could not find, or printed a line this parser does not know."""


def parse_ldd(text: str) -> list[str]:
    """`ldd` output -> the absolute paths of the libraries and the dynamic loader, in ldd's order (pure).

    The vDSO (no file) is left out; a library ldd reports as "not found" raises ClosureError: a guest
    binary with a missing library would fail only when first used in a guest, minutes into a campaign.
    """
    out: list[str] = []
    for line in text.splitlines():
        if not line.strip() or "linux-vdso.so" in line or "statically linked" in line:
            continue
        if "=> not found" in line:
            raise ClosureError(f"ldd: {line.split()[0]} not found")
        m = _LDD_ARROW.match(line)
        if m:
            out.append(m.group(2))
            continue
        m = _LDD_PLAIN.match(line)
        if not m:
            raise ClosureError(f"ldd: cannot read {line.strip()!r}")
        out.append(m.group(1))
    return out


def closure(binaries: Iterable[str], ldd: Callable[[str], str]) -> list[str]:
    """Every library (and the loader) the binaries need, sorted, each once (pure but for `ldd`)."""
    found: set[str] = set()
    for b in binaries:
        found.update(parse_ldd(ldd(b)))
    return sorted(found)


def tree_files(
    binaries: Sequence[str] = BINARIES, libraries: Sequence[str] = (), files: Sequence[str] = FILES
) -> list[str]:
    """The paths the userland tree holds (binaries, libraries, files), sorted, each once (pure)."""
    return sorted({*binaries, *libraries, *files})


def copy_tree(root: Path, out: Path, paths: Iterable[str], links: Mapping[str, str] = LINKS) -> int:
    """Copy `paths` from a chroot into `out` at the same paths, following symlinks (a library's soname is a
    link to its versioned file: the guest needs only the soname); then the links. Returns bytes copied."""
    total = 0
    for p in paths:
        src = root / p.lstrip("/")
        dst = out / p.lstrip("/")
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src.resolve(), dst)
        total += dst.stat().st_size
    for link, target in links.items():
        dst = out / link.lstrip("/")
        dst.parent.mkdir(parents=True, exist_ok=True)
        if dst.is_symlink() or dst.exists():
            dst.unlink()
        os.symlink(target, dst)
    return total


def walk(tree: Path) -> list[tuple[str, str, Path]]:
    """(kind, path relative to the tree, file) for every directory, file and symlink below `tree`, parents
    first: what goes into the initramfs (kind is "dir", "file" or "link")."""
    out: list[tuple[str, str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames.sort()
        base = Path(dirpath)
        rel_dir = os.path.relpath(base, tree)
        if rel_dir != ".":
            out.append(("dir", rel_dir, base))
        for name in sorted(filenames + [d for d in dirnames if (base / d).is_symlink()]):
            p = base / name
            rel = os.path.relpath(p, tree)
            out.append(("link" if p.is_symlink() else "file", rel, p))
    return out
