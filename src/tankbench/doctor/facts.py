"""The host facts relative sizes need (ARC max, RAM, free space), read from the host without changing it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from tankbench.errors import HostError, UserError
from tankbench.hosts.base import Host
from tankbench.targets import traits_of
from tankbench.zfs.parse import parse_arcstats
from tankbench.zfs.vdevs import data_fraction, grouped, leaves

if TYPE_CHECKING:
    from tankbench.campaign.schema import HostSpec


def open_host_no_boot(h: HostSpec) -> Host:
    """The host a campaign names, without booting a lab (a lab must be up: UserError with a hint otherwise)."""
    kind = h.kind
    if kind == "auto":
        kind = "local" if os.path.exists("/sys/module/zfs") else "lab"
    if kind == "local":
        from tankbench.hosts.local import LocalHost

        return LocalHost()
    if kind == "lab":
        from tankbench.lab.vm import require_up, ssh_host

        return ssh_host(require_up(h.lab_name))
    from tankbench.hosts.ssh import SshHost

    return SshHost(address=h.address, user=h.user, port=h.port, identity=h.identity)


def meminfo_total(text: str) -> int:
    """MemTotal of /proc/meminfo in bytes."""
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    raise ValueError("no MemTotal line")


MIB = 1 << 20
#: what zpool takes of each whole disk before the vdev: its GPT, partition 9 (8 MiB), alignment, 4 labels and the
#: boot reserve (a 1 GiB lab disk gives a 1008 MiB vdev, rounded down to its metaslabs: `zpool list` says 960M)
DISK_RESERVE = 16 * MIB


def _metaslabs(asize: int) -> int:
    """A top-level vdev's size as whole metaslabs (OpenZFS's vdev_metaslab_set_size: ~200 metaslabs of at least
    512 MiB, else 16 of at least 16 MiB)."""
    shift = (asize // 200).bit_length()
    if shift < 29:
        shift = max((asize // 16).bit_length(), 24)
    size = 1 << min(shift, 34)
    return asize // size * size


def _raidz_fraction(width: int, parity: int, ashift: int = 12) -> Fraction:
    """How much of a raidz vdev holds data, as ZFS counts its free space: a 128K block's sectors over what it takes
    with parity and padding (raidz2 of 4 disks: 32 of 66 sectors, not 1/2)."""
    data = (128 << 10) >> ashift
    sectors = data + parity * -(-data // max(width - parity, 1))
    sectors += -sectors % (parity + 1)
    return Fraction(data, sectors)


def pool_capacity(vdevs: list[str], sizes: Mapping[str, int]) -> int:
    """Usable bytes of a pool about to be created, never more than `zfs get available` will say: each disk less
    what zpool reserves on it, each group sized by its smallest disk (as ZFS does) in whole metaslabs, parity and
    mirror copies taken off (raidz as ZFS counts it, with padding), then ZFS's slop reserve (1/32, at least
    128 MiB or half) and 1 % for the pool's own metadata."""
    plain, groups = grouped(vdevs)
    total = sum(_metaslabs(max(sizes[v] - DISK_RESERVE, 0)) for v in plain)
    for g, devices in groups:
        disk = max(min(sizes[d] for d in devices) - DISK_RESERVE, 0)
        n = len(devices)
        if g.parity < 0:  # a mirror's vdev is the size of one disk
            total += _metaslabs(disk)
            continue
        raidz = not g.word.startswith("draid")
        share = _raidz_fraction(n, g.parity) if raidz else data_fraction(g, n)
        total += int(_metaslabs(disk * n) * share)
    slop = max(total // 32, min(128 * MIB, total // 2))
    rest = total - slop
    return max(rest - rest // 100, 0)


def host_facts(host: Host, doc: Mapping[str, Any], bases: frozenset[str]) -> dict[str, tuple[int, str]]:
    """base -> (bytes, where it was read) for each base asked for; HostError/ValueError when it cannot be read."""
    out: dict[str, tuple[int, str]] = {}
    if "arc" in bases:
        stats = parse_arcstats(host.read_file("/proc/spl/kstat/zfs/arcstats"))
        out["arc"] = (stats["c_max"], f"{host.name}: arcstats c_max")
    if "ram" in bases:
        out["ram"] = (meminfo_total(host.read_file("/proc/meminfo")), f"{host.name}: /proc/meminfo MemTotal")
    if "free" in bases:
        out["free"] = free_space(host, doc)
    return out


def _file_in_a_directory(table: Mapping[str, Any]) -> bool:
    """A [[target]] table whose kind lays out a test file in a directory it is given (not on a pool)."""
    t = traits_of(str(table.get("kind", "")))
    return t.test_file and not t.needs_pool


def free_space(host: Host, doc: Mapping[str, Any]) -> tuple[int, str]:
    """Available bytes where the campaign's targets live: its pool (or the capacity it will have), else the
    directory of its first file target."""
    pool = doc.get("pool")
    if isinstance(pool, dict):
        name = str(pool.get("parent") or pool.get("name") or "")
        res = host.run(["zfs", "get", "-Hp", "-o", "value", "available", name], timeout=60)
        if res.returncode == 0 and res.stdout.strip().isdigit():
            return int(res.stdout.strip()), f"{host.name}: zfs get available {name}"
        if pool.get("parent"):
            raise ValueError(f"no dataset {name} ({res.stderr.strip()})")
        vdevs = [str(v) for v in pool.get("vdevs", [])]
        sizes = {}
        for dev in leaves(vdevs):
            r = host.run(["blockdev", "--getsize64", dev], timeout=60)
            if r.returncode != 0:
                raise ValueError(f"cannot read the size of {dev}: {r.stderr.strip()}")
            sizes[dev] = int(r.stdout.strip())
        return pool_capacity(vdevs, sizes), f"{host.name}: capacity of the pool {name} to be created"
    targets = doc.get("target", [])
    for t in targets if isinstance(targets, list) else []:
        if isinstance(t, dict) and _file_in_a_directory(t) and isinstance(t.get("path"), str):
            path = t["path"]
            while path not in ("", "/") and host.run(["test", "-d", path], timeout=60).returncode != 0:
                path = os.path.dirname(path)
            r = host.run(["df", "-B1", "--output=avail", path or "/"], timeout=60)
            lines = r.stdout.split()
            if r.returncode == 0 and len(lines) >= 2 and lines[-1].isdigit():
                return int(lines[-1]), f"{host.name}: df {path or '/'}"
            raise ValueError(f"df {path}: {r.stderr.strip()}")
    raise ValueError("the campaign has no pool and no file target to measure free space in")


def facts_provider(host_spec: HostSpec, doc: Mapping[str, Any], bases: frozenset[str]) -> dict[str, tuple[int, str]]:
    """Overrides.facts for plan/run: open the campaign's host (never booting a lab) and read what is asked."""
    what = ", ".join(sorted(bases))
    try:
        host = open_host_no_boot(host_spec)
    except UserError as e:
        raise UserError(
            f"sizes relative to the host ({what}) need the host, and it cannot be asked: {e.message}",
            (e.hint + "; " if e.hint else "") + "or give absolute sizes (e.g. --set target.NAME.size=8G)",
        ) from None
    try:
        return host_facts(host, doc, bases)
    except (HostError, ValueError, KeyError) as e:
        raise UserError(
            f"sizes relative to the host ({what}): cannot read them on {host.name}: {e}",
            "check that the host is reachable and runs ZFS (for arc), or give absolute sizes "
            "(e.g. --set target.NAME.size=8G)",
        ) from None
    finally:
        if host_spec.kind != "lab":  # a lab's ssh control master is shared with whoever else drives it
            host.close()
