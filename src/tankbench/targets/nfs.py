"""`kind = "nfs"`: a network share. A ZFS dataset on the campaign's host (tagged, one per property set, as
`kind = "dataset"` makes it), exported over NFS to the target's `clients` only, mounted on each of them, and
fio run on the clients through fio's client/server mode (targets/clients.py).

What tankbench creates it also removes, and nothing else: its own exports file
`/etc/exports.d/tankbench-<campaign>.exports` (then `exportfs -ra`), one sub-directory per client in its own
dataset (each client mounts its own, so no two clients share a test file), and the mount directory
`/mnt/tankbench-nfs-<target>` on each client (created when absent and removed with `rmdir` only: never
anything in it). The export names each client's address as the server sees it (the source address a client
uses towards the server, `ip route get`); a lab server sees every client as slirp's gateway (10.0.2.2: only
this machine can reach the forwarded port, which listens on 127.0.0.1), and then needs `insecure` (slirp's
source ports are not privileged). The network counters of the server and of each client are read before and
after every run (/proc/net/dev) and a run says what limited it (targets/netcount.py). This is the kind's
declaration (its options, keys, names, export lines); drivers/nfs.py exports, mounts and runs.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import tankbench.targets.zfsplan as zfsmod
from tankbench.errors import HostError
from tankbench.keys import Keys
from tankbench.model import Target, Test, frozen_map
from tankbench.targets.base import KindTraits
from tankbench.targets.clients import ClientOptions, parse_clients
from tankbench.targets.dataset import DatasetKind
from tankbench.zfs.props import ZfsOptions

#: NFS versions a mount may ask for (`vers=`)
NFS_VERSIONS = ("3", "4", "4.0", "4.1", "4.2")
#: how the server commits writes: `sync` (before it answers, the NFS default) or `async` (unsafe, faster)
EXPORT_MODES = ("sync", "async")
#: mount options tankbench sets itself (the version, the server's port)
OWN_MOUNT_OPTIONS = ("vers", "nfsvers", "port", "addr", "clientaddr")
_OPTIONS_RE = re.compile(r"^[A-Za-z0-9_]+(=[A-Za-z0-9_.:-]+)?(,[A-Za-z0-9_]+(=[A-Za-z0-9_.:-]+)?)*\Z")
#: \Z, not $: `$` also matches before a last "\n"
_ADDRESS_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.:-]*\Z")
NFS_PORT = 2049
#: in a lab server: the port forward (`tcp:127.0.0.1:P`) a run added, so a run after a kill -9 removes it
FORWARD_NOTE = "/run/tankbench-nfs.forward"
EXPORTS_DIR = "/etc/exports.d"
_EXAMPLE = (
    '[[target]] name = "share" kind = "nfs" size = "1G" clients = ["root@10.0.0.2", "root@10.0.0.3"] '
    'nfs_version = "4.2" export = "sync" mount_options = "rsize=1048576,wsize=1048576"'
)


@dataclass(frozen=True)
class NfsOptions(ZfsOptions, ClientOptions):
    """A share's settings: the dataset's (props, pool), the clients that mount it, and how it is exported and
    mounted (nfs_version, export, mount_options, server_address), which is part of what is measured."""

    share: Mapping[str, str] = field(default_factory=frozen_map)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "share", frozen_map(self.share))

    def canonical(self) -> dict[str, Any]:
        d = {**ZfsOptions.canonical(self), **ClientOptions.canonical(self)}
        if self.share:
            d["share"] = dict(self.share)
        return d


def nfs_options(target: Target) -> NfsOptions:
    """A share's settings (empty for another kind's target)."""
    o = target.options
    return o if isinstance(o, NfsOptions) else NfsOptions()


def mount_dir(name: str) -> str:
    """Where every client mounts the share (created and removed by tankbench, empty otherwise)."""
    return f"/mnt/tankbench-nfs-{name}"


def exports_file(campaign_id: str) -> str:
    return f"{EXPORTS_DIR}/tankbench-{campaign_id}.exports"


def export_line(path: str, addresses: list[str], mode: str, insecure: bool) -> str:
    """One /etc/exports line: the dataset's directory to the given client addresses only (never to `*`)."""
    opts = ["rw", mode, "no_subtree_check", "no_root_squash", *(["insecure"] if insecure else [])]
    if not addresses or any(a in ("*", "") or not _ADDRESS_RE.match(a) for a in addresses):
        raise HostError(f"refusing to export {path} to {addresses!r}: only named client addresses")
    return '"' + path + '" ' + " ".join(f"{a}({','.join(opts)})" for a in addresses) + "\n"


def made_note(path: str) -> str:
    """Beside a mount directory tankbench made: the campaign that made it (a run after a kill -9 removes it)."""
    parent, _, name = path.rstrip("/").rpartition("/")
    return f"{parent}/.{name}.tankbench"


#: `sh -c MAKE_DIR sh DIR NOTE CAMPAIGN`: make DIR (and its note) unless it exists; "made" when it is ours
MAKE_DIR = (
    'if [ ! -d "$1" ]; then mkdir "$1" && echo "$3" > "$2" && echo made; '
    'elif [ "$(cat "$2" 2>/dev/null)" = "$3" ]; then echo made; fi'
)


def mount_argv(source: str, target: str, version: str, port: int, options: str) -> list[str]:
    opts = [f"vers={version}", f"port={port}", *([options] if options else [])]
    return ["mount", "-t", "nfs", "-o", ",".join(opts), source, target]


class NfsKind(DatasetKind):
    """fio on each client opens `/mnt/tankbench-nfs-<target>/tankbench-<target>.fiodata`: its own file in the
    share (each client mounts its own sub-directory of the test's dataset)."""

    kind = "nfs"
    # a cold-cache run would export and import the pool under the clients' mounts: not cold_cache_cycles_pool
    traits = KindTraits(needs_pool=True, zfs=True, zfs_object="filesystem", test_file=True)
    options = NfsOptions
    short = "nfs"
    table_keys = (
        "size",
        "props",
        "clients",
        "client_port",
        "nfs_version",
        "export",
        "mount_options",
        "server_address",
    )
    size_means = "each client's test file's size"

    # -- campaign file: pure ---------------------------------------------------------------------
    @classmethod
    def parse_table(cls, keys: Keys, table: Mapping[str, Any], prefix: str, name: str) -> Target:
        target = super().parse_table(keys, table, prefix, name)
        if "clients" not in table:
            raise keys.err(
                prefix + "clients", None, "is required for an nfs target (the hosts that mount the share)", _EXAMPLE
            )
        clients, port = parse_clients(keys, table, prefix)
        version = table.get("nfs_version", "4.2")
        version = str(version) if isinstance(version, (int, float)) and not isinstance(version, bool) else version
        version = keys.choice(prefix + "nfs_version", version, NFS_VERSIONS)
        mode = keys.choice(prefix + "export", table.get("export", "sync"), EXPORT_MODES)
        options = keys.string(prefix + "mount_options", table.get("mount_options", "")).replace(" ", "")
        if options and not _OPTIONS_RE.match(options):
            raise keys.err(
                prefix + "mount_options",
                table["mount_options"],
                "not a comma-separated list of mount options",
                'e.g. mount_options = "rsize=1048576,wsize=1048576,nconnect=4"',
            )
        own = [o for o in options.split(",") if o and o.split("=")[0] in OWN_MOUNT_OPTIONS]
        if own:
            raise keys.err(
                prefix + "mount_options",
                table["mount_options"],
                f"sets {', '.join(own)}, which tankbench sets itself",
                "give the version as nfs_version; the server's port is 2049 (a lab's is forwarded)",
            )
        address = keys.string(prefix + "server_address", table.get("server_address", ""))
        if address and not _ADDRESS_RE.match(address):
            raise keys.err(
                prefix + "server_address",
                address,
                "not a host name or IP address",
                "the address the clients reach the campaign's host at, e.g. 10.0.0.1",
            )
        share = {"nfs_version": version, "export": mode, "mount_options": options}
        if address:
            share["server_address"] = address
        settings = replace(nfs_options(target), clients=clients, client_port=port, share=share)
        return replace(target, path=mount_dir(name), options=settings)

    @classmethod
    def load_from_clients(cls, target: Target) -> bool:
        return True

    @classmethod
    def fio_filename(cls, test: Test) -> str:
        return f"{test.target.path}/tankbench-{test.target.name}.fiodata"

    @classmethod
    def script_lines(cls, test: Test, campaign_id: str) -> list[str]:
        t, share = test.target, nfs_options(test.target).share
        ds = zfsmod.dataset_dir(test)
        return [
            *super(DatasetKind, cls).script_lines(test, campaign_id),
            "# Export the dataset to the clients only and mount it on each (as tankbench run does; see docs/fleet.md):",
            f"#   {exports_file(campaign_id)}: {export_line(ds, ['CLIENT'], share['export'], False).strip()}",
            "#   (CLIENT: each client's address as the server sees it; never *)",
            "#   exportfs -ra; on client j: mkdir -p "
            + shlex.quote(t.path)
            + " && "
            + shlex.join(
                mount_argv(f"<server>:{ds}/c<j>", t.path, share["nfs_version"], NFS_PORT, share["mount_options"])
            ),
        ]
