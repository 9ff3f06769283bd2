"""The [pool] table: a pool tankbench creates (vdevs in zpool create's grammar, all confirmed) or an existing
parent dataset."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Any

from tankbench.campaign.schema import HostSpec, PoolSpec
from tankbench.campaign.vocab import POOL_KEYS, VDEV_CLASSES
from tankbench.diskmodels import data_disk_ids
from tankbench.keys import Keys
from tankbench.model import Target
from tankbench.safety import BLANK_PREFIX, STABLE_PREFIX
from tankbench.targets import traits_of
from tankbench.targets.zfsplan import TAG
from tankbench.zfs.vdevs import VDEV_GROUPS, VdevGroup, grouped, vdev_group


def parse_pool(keys: Keys, value: object, targets: tuple[Target, ...]) -> PoolSpec | None:
    zfs = [t for t in targets if traits_of(t.kind).needs_pool]
    if value is None:
        if zfs:
            raise keys.err(
                "[pool]",
                None,
                f"target {zfs[0].name!r} is a {zfs[0].kind} but there is no [pool]",
                'add [pool] with name + vdevs (tankbench creates it) or parent = "tank/bench"',
            )
        return None
    if not isinstance(value, dict):
        raise keys.err("pool", value, "must be a table", "write [pool]")
    keys.unknown_keys(value, POOL_KEYS, "pool.")
    name = keys.string("pool.name", value.get("name", ""))
    parent = keys.string("pool.parent", value.get("parent", ""))
    if bool(name) == bool(parent):
        raise keys.err(
            "pool",
            None,
            "needs either name (a pool tankbench creates) or parent (an existing dataset)",
            'e.g. name = "tbpool" with vdevs = ["/dev/disk/by-id/…"], or parent = "tank/bench"',
        )
    if name and not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]{0,63}", name):
        raise keys.err("pool.name", name, "not a valid pool name", 'e.g. "tbpool"')
    if parent and not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.:/-]*[A-Za-z0-9_.:-]", parent):
        raise keys.err("pool.parent", parent, "not a dataset name", 'e.g. "tank/bench"')
    lists = _pool_devices(keys, value, bool(name), targets)
    ashift = keys.integer("pool.ashift", value.get("ashift", 12), 9, 16)
    props = _properties(keys, value.get("properties", {}))
    return PoolSpec(
        name=name,
        vdevs=lists["vdevs"],
        log=lists["log"],
        confirm=lists["confirm"],
        ashift=ashift,
        properties=props,
        parent=parent,
        cache=lists["cache"],
        special=lists["special"],
    )


#: a ZFS property name: native (compression), user (com.example:tag) or feature-like (org.zfsonlinux:…)
_PROPERTY_RE = re.compile(r"[a-z][a-z0-9_.:-]{0,255}")
#: what tankbench itself sets with -O on the pool it creates (zpool create would get the key twice)
OWN_PROPERTIES = {
    "mountpoint": "tankbench creates the pool with mountpoint=none and mounts each test's dataset itself",
    TAG: "tankbench tags the pool with the campaign it creates it for",
}


def _properties(keys: Keys, props: object) -> dict[str, str]:
    """[pool] properties: `-O name=value` of zpool create, so each a property name and one scalar value."""
    if not isinstance(props, dict):
        raise keys.err("pool.properties", props, "must be a table", '{ compression = "off" }')
    out: dict[str, str] = {}
    for k, v in props.items():
        key = f"pool.properties.{k}"
        if not _PROPERTY_RE.fullmatch(k):
            raise keys.err(key, v, "not a ZFS property name", "lower-case letters, digits, '_', '.', ':' or '-'")
        if k in OWN_PROPERTIES:
            raise keys.err(key, v, "is set by tankbench", OWN_PROPERTIES[k])
        if isinstance(v, bool) or not isinstance(v, str | int):
            raise keys.err(key, v, "must be a string or a whole number", 'e.g. compression = "off"')
        text = str(v)
        if not text or not text.isprintable():
            raise keys.err(key, v, "must be a value on one line", 'e.g. compression = "off"')
        out[k] = text
    return out


def _pool_devices(
    keys: Keys, value: dict[str, Any], creates: bool, targets: tuple[Target, ...]
) -> dict[str, tuple[str, ...]]:
    """The pool's device lists by class (and `confirm`): a pool tankbench creates needs vdevs, an existing parent
    takes none, no device twice, no raw target on one of them."""
    lists = {key: _vdev_list(keys, key, value.get(key, [])) for key in VDEV_CLASSES + ("confirm",)}
    if creates and not lists["vdevs"]:
        raise keys.err("pool.vdevs", [], "a pool tankbench creates needs vdevs", '["/dev/disk/by-id/virtio-tbdata0"]')
    if not creates and any(lists[k] for k in VDEV_CLASSES):
        given = [d for k in VDEV_CLASSES for d in lists[k]]
        raise keys.err(
            "pool.vdevs",
            given,
            "an existing parent takes no vdevs",
            "tankbench never changes the layout of a pool it did not create",
        )
    _check_devices_once(keys, lists)
    if grouped(lists["vdevs"])[1] and len(grouped(lists["special"])[0]) > 0:
        raise keys.err(
            "pool.special",
            list(lists["special"]),
            "a single special disk under redundant data vdevs: losing it loses the whole pool",
            'mirror it as the data is: special = ["mirror", a, b] (zpool refuses this without -f)',
        )
    pool_devices = {d for k in VDEV_CLASSES for d in lists[k]}
    for i, t in enumerate(targets):
        if traits_of(t.kind).block_device and t.path in pool_devices:  # a raw test would write under the pool
            raise keys.err(
                f"target[{i}].path",
                t.path,
                "is also a device of [pool]",
                "a raw target needs a disk of its own: tankbench's pool lives on the pool's devices",
            )
    return lists


def _vdev_list(keys: Keys, key: str, items: object) -> tuple[str, ...]:
    """One vdev class in zpool create's grammar: devices by id, optionally grouped by mirror/raidzN keywords."""
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
        raise keys.err(f"pool.{key}", items, "must be a list of device paths", '["/dev/disk/by-id/…"]')
    if key == "confirm":
        return tuple(items)
    for x in items:
        if vdev_group(x) is not None:
            if key == "cache":
                raise keys.err(
                    "pool.cache",
                    x,
                    "cache devices cannot be grouped",
                    "list the L2ARC devices by id without mirror/raidz",
                )
            if key in ("log", "special") and x != "mirror":
                raise keys.err(f"pool.{key}", x, f"a {key} vdev is a disk or a mirror", '["mirror", a, b] or [a]')
        elif not x.startswith("/dev/disk/by-id/"):
            hint = (
                "use /dev/disk/by-id/… paths"
                if x.startswith("/")
                else f"group keywords are {', '.join(VDEV_GROUPS)} and draid[1-3][:Nd][:Ns][:Nc]; devices are "
                "/dev/disk/by-id/… paths"
            )
            raise keys.err(f"pool.{key}", x, "vdevs are named by stable id", hint)
        elif posixpath.normpath(x) != x or x == STABLE_PREFIX:  # by-id/../../sda is /dev/sda; by-id/ names none
            raise keys.err(
                f"pool.{key}",
                x,
                "not a device's own path (an empty id, or '..', '.', '//' or a trailing '/')",
                "use the /dev/disk/by-id/… path of the device itself (ls -l /dev/disk/by-id/)",
            )
    plain, groups = grouped(items)
    if groups and plain:
        raise keys.err(
            f"pool.{key}",
            items,
            "mixes single disks with mirror/raidz groups",
            "start the list with a keyword and give every disk a group (zpool refuses mixed redundancy)",
        )
    _check_groups(keys, key, items, groups)
    return tuple(items)


def _check_groups(keys: Keys, key: str, items: list[str], groups: list[tuple[VdevGroup, list[str]]]) -> None:
    """Each group has the devices its keyword takes; the data groups are of one kind and width."""
    for g, devices in groups:
        word, n = g.word, len(devices)
        if n < g.fewest:
            raise keys.err(
                f"pool.{key}",
                items,
                f"a {word} group needs at least {g.fewest} devices (has {n})",
                f'e.g. ["{word}", {", ".join(["id"] * g.fewest)}]'
                + (": dRAID takes parity + data (:Nd) + spares (:Ns) children" if word.startswith("draid") else ""),
            )
        if g.children and n != g.children:
            raise keys.err(
                f"pool.{key}",
                items,
                f"{word} names {g.children} children (:{g.children}c) but its group has {n}",
                f"list {g.children} devices after it, or drop :{g.children}c",
            )
    shapes = {(g.parity, g.data, g.spares, len(d)) for g, d in groups}
    if key == "vdevs" and len(shapes) > 1:  # zpool create -f (tankbench's) would take what zpool alone refuses
        raise keys.err(
            "pool.vdevs",
            items,
            "mixes groups of different redundancy (" + ", ".join(sorted({_shape(g, d) for g, d in groups})) + ")",
            "give every data group the same kind and width: zpool refuses mismatched replication levels, and "
            "the pool is only as safe as its weakest group",
        )


def _shape(group: VdevGroup, devices: list[str]) -> str:
    return f"{group.word}({len(devices)})"


def _check_devices_once(keys: Keys, lists: Mapping[str, tuple[str, ...]]) -> None:
    """Each device in one place only, and every one of them confirmed (creating the pool destroys them)."""
    seen: dict[str, str] = {}
    for key in VDEV_CLASSES:
        for d in lists[key]:
            if vdev_group(d) is not None:
                continue
            if d in seen:
                raise keys.err(f"pool.{key}", d, f"is already listed in pool.{seen[d]}", "use each device once")
            seen[d] = key
    missing = [d for d in seen if d not in lists["confirm"] and BLANK_PREFIX + d not in lists["confirm"]]
    if missing:
        raise keys.err(
            "pool.confirm",
            list(lists["confirm"]),
            f"does not confirm {missing[0]}",
            "list every vdev, log, cache and special device again in confirm: creating the pool "
            "destroys their contents",
        )


def check_lab_devices(keys: Keys, host: HostSpec, pool: PoolSpec | None) -> None:
    """A pool tankbench creates in the lab names the lab's own disks: the [host] table says which it will have
    (the lab refuses to run with others), so a disk it will not have is refused here, not after a lab boot."""
    if host.kind != "lab" or pool is None or not pool.creates:
        return
    l2arc = bool(getattr(host.lab_machine, "l2arc", False))
    have = [f"{STABLE_PREFIX}virtio-{s}" for s in data_disk_ids(host.lab_disks, host.lab_slog, l2arc)]
    for key in (*VDEV_CLASSES, "confirm"):
        for dev in getattr(pool, key if key != "vdevs" else "vdevs"):
            if vdev_group(dev) is None and dev not in have:
                raise keys.err(
                    f"pool.{key}",
                    dev,
                    f"the lab will not have this disk (host.disks = {host.lab_disks}, slog = "
                    f"{str(host.lab_slog).lower()}, l2arc = {str(l2arc).lower()} give {', '.join(have)})",
                    "raise host.disks (or set host.slog / host.l2arc), or name only those disks",
                )
