"""The test guest's userland: the library closure from ldd, the tree copied out of a chroot, the initramfs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tankbench.guest import userland
from tests.conftest import FIXTURES, tiny_initramfs

LDD = (FIXTURES / "guest" / "ldd-cryptsetup.txt").read_text()


def test_parse_ldd_lists_libraries_and_the_loader_not_the_vdso() -> None:
    libs = userland.parse_ldd(LDD)
    assert libs[0] == "/lib/x86_64-linux-gnu/libcryptsetup.so.12"
    assert "/lib64/ld-linux-x86-64.so.2" in libs and "/lib/x86_64-linux-gnu/libcrypto.so.3" in libs
    assert not any("vdso" in x for x in libs) and len(libs) == 14


def test_parse_ldd_refuses_a_missing_library_and_unknown_lines() -> None:
    with pytest.raises(userland.ClosureError, match="libargon2.so.1 not found"):
        userland.parse_ldd("\tlibargon2.so.1 => not found\n")
    with pytest.raises(userland.ClosureError, match="cannot read"):
        userland.parse_ldd("\tsomething odd\n")
    assert userland.parse_ldd("\tstatically linked\n") == []


def test_closure_is_each_library_once_sorted() -> None:
    answers = {
        "/usr/bin/a": "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x1)\n\t/lib64/ld-linux-x86-64.so.2 (0x2)\n",
        "/usr/bin/b": "\tlibz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x3)\n"
        "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x1)\n",
    }
    assert userland.closure(answers, answers.__getitem__) == [
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib/x86_64-linux-gnu/libz.so.1",
        "/lib64/ld-linux-x86-64.so.2",
    ]


def _chroot(tmp: Path) -> Path:
    """A fake chroot: a binary, a library reached through its soname link, mke2fs.conf."""
    root = tmp / "root"
    (root / "usr/sbin").mkdir(parents=True)
    (root / "usr/sbin/mke2fs").write_bytes(b"ELF mke2fs")
    (root / "usr/sbin/mke2fs").chmod(0o755)
    (root / "lib/x86_64-linux-gnu").mkdir(parents=True)
    (root / "lib/x86_64-linux-gnu/libext2fs.so.2.4").write_bytes(b"ELF lib")
    os.symlink("libext2fs.so.2.4", root / "lib/x86_64-linux-gnu/libext2fs.so.2")
    (root / "etc").mkdir()
    (root / "etc/mke2fs.conf").write_text("[defaults]\n")
    return root


def test_copy_tree_follows_soname_links_and_adds_debian_links(tmp_path: Path) -> None:
    root, out = _chroot(tmp_path), tmp_path / "out"
    paths = userland.tree_files(["/usr/sbin/mke2fs"], ["/lib/x86_64-linux-gnu/libext2fs.so.2"])
    assert paths == ["/etc/mke2fs.conf", "/lib/x86_64-linux-gnu/libext2fs.so.2", "/usr/sbin/mke2fs"]
    size = userland.copy_tree(root, out, paths)
    assert size == len(b"ELF lib") + len(b"ELF mke2fs") + len("[defaults]\n")
    lib = out / "lib/x86_64-linux-gnu/libext2fs.so.2"
    assert not lib.is_symlink() and lib.read_bytes() == b"ELF lib"  # the soname holds the library itself
    assert os.readlink(out / "usr/sbin/mkfs.ext4") == "mke2fs"
    assert os.access(out / "usr/sbin/mke2fs", os.X_OK)
    kinds = {rel: kind for kind, rel, _ in userland.walk(out)}
    assert kinds["usr"] == "dir" and kinds["usr/sbin/mkfs.ext4"] == "link" and kinds["etc/mke2fs.conf"] == "file"
    rels = [rel for _, rel, _ in userland.walk(out)]
    assert rels.index("usr/sbin") < rels.index("usr/sbin/mke2fs")  # parents first, as cpio needs them


def test_initramfs_holds_the_userland_at_its_debian_paths(tmp_path: Path) -> None:
    root, tree = _chroot(tmp_path), tmp_path / "tree"
    userland.copy_tree(root, tree, ["/usr/sbin/mke2fs", "/lib/x86_64-linux-gnu/libext2fs.so.2", "/etc/mke2fs.conf"])
    out = tiny_initramfs(tmp_path, userland=tree)
    names = subprocess.run(["cpio", "-it"], input=out.read_bytes(), capture_output=True, check=True).stdout.split()
    assert len(names) == len(set(names)), "no entry twice (lib and etc exist already)"
    listing = subprocess.run(["cpio", "-itv"], input=out.read_bytes(), capture_output=True, check=True).stdout.decode()
    assert "usr/sbin/mkfs.ext4 -> mke2fs" in listing and "bin/mke2fs -> busybox" in listing
    dest = tmp_path / "x"
    dest.mkdir()
    subprocess.run(["cpio", "-id", "--quiet"], input=out.read_bytes(), cwd=dest, check=True)
    assert (dest / "lib/x86_64-linux-gnu/libext2fs.so.2").read_bytes() == b"ELF lib"
    assert (dest / "usr/sbin/mke2fs").stat().st_mode & 0o111 and (dest / "etc/mke2fs.conf").exists()


def test_userland_covers_what_the_guest_scripts_call() -> None:
    from tankbench.guestconf import copy as guestcopy
    from tankbench.guestconf import layers

    called = {layers.CRYPTSETUP, layers.BLKID, *(argv[0] for argv in layers.MKFS.values())}
    called |= set(guestcopy.GUEST_PROGRAMS.values())
    assert called <= set(userland.BINARIES) | set(userland.LINKS)
    assert set(userland.VERSION_ARGS) == set(userland.BINARIES)
