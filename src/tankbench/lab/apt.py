"""Debian package sources of the lab build: the host's mirrors, the apt sources of the chroots, and resolving the
exact kernel ABI and OpenZFS version with the host's apt on private lists."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tankbench.lab.chroot import LabBuildError
from tankbench.lab.recipe import BACKPORTS, SUITE, Progress, Versions


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


def prep_apt(root: Path, versions: Versions, deb_src: bool = False) -> None:
    (root / "etc/apt/sources.list").write_text(sources_list(versions.mirror, versions.security_mirror, deb_src))
    policy = root / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 101\n")  # no daemons start inside the chroot
    policy.chmod(0o755)
    (root / "etc/apt/apt.conf.d/99tankbench").write_text(
        'APT::Install-Recommends "false"; APT::Install-Suggests "false";\n'
    )


def apt_target(versions: Versions) -> list[str]:
    return ["-t", versions.suite] if versions.suite == BACKPORTS else []
