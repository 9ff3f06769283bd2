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
after every run (/proc/net/dev) and a run says what limited it (targets/netcount.py).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import Any

import tankbench.targets.netcount as netcount
import tankbench.targets.zfs as zfsmod
from tankbench.errors import HostError, UserError
from tankbench.hosts.base import Host
from tankbench.hosts.lab import LabHost
from tankbench.hosts.ssh import SshHost
from tankbench.keys import Keys
from tankbench.model import Target, Test
from tankbench.targets.base import Capture, Workspace
from tankbench.targets.clients import ClientLoad, parse_clients, ssh_client
from tankbench.targets.dataset import DatasetKind
from tankbench.targets.file import lay_out_file

#: NFS versions a mount may ask for (`vers=`)
NFS_VERSIONS = ("3", "4", "4.0", "4.1", "4.2")
#: how the server commits writes: `sync` (before it answers, the NFS default) or `async` (unsafe, faster)
EXPORT_MODES = ("sync", "async")
#: mount options tankbench sets itself (the version, the server's port)
OWN_MOUNT_OPTIONS = ("vers", "nfsvers", "port", "addr", "clientaddr")
_OPTIONS_RE = re.compile(r"^[A-Za-z0-9_]+(=[A-Za-z0-9_.:-]+)?(,[A-Za-z0-9_]+(=[A-Za-z0-9_.:-]+)?)*$")
_ADDRESS_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.:-]*$")
#: slirp's address of the host (as a lab guest sees this machine, and as a lab sees connections forwarded to it)
SLIRP_HOST = "10.0.2.2"
NFS_PORT = 2049
#: in a lab server: the port forward (`tcp:127.0.0.1:P`) a run added, so a run after a kill -9 removes it
FORWARD_NOTE = "/run/tankbench-nfs.forward"
EXPORTS_DIR = "/etc/exports.d"
_EXAMPLE = (
    '[[target]] name = "share" kind = "nfs" size = "1G" clients = ["root@10.0.0.2", "root@10.0.0.3"] '
    'nfs_version = "4.2" export = "sync" mount_options = "rsize=1048576,wsize=1048576"'
)


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
    short = "nfs"
    # a cold-cache run would export and import the pool under the clients' mounts
    cold_cache_cycles_pool = False
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
        return replace(target, path=mount_dir(name), clients=clients, client_port=port, share=share)

    @classmethod
    def fio_filename(cls, test: Test) -> str:
        return f"{test.target.path}/tankbench-{test.target.name}.fiodata"

    @classmethod
    def script_lines(cls, test: Test, campaign_id: str) -> list[str]:
        t = test.target
        ds = zfsmod.dataset_dir(test)
        return [
            *super(DatasetKind, cls).script_lines(test, campaign_id),
            "# Export the dataset to the clients only and mount it on each (as tankbench run does; see docs/fleet.md):",
            f"#   {exports_file(campaign_id)}: {export_line(ds, ['CLIENT'], t.share['export'], False).strip()}",
            "#   (CLIENT: each client's address as the server sees it; never *)",
            "#   exportfs -ra; on client j: mkdir -p "
            + shlex.quote(t.path)
            + " && "
            + shlex.join(
                mount_argv(f"<server>:{ds}/c<j>", t.path, t.share["nfs_version"], NFS_PORT, t.share["mount_options"])
            ),
        ]

    # -- run time ------------------------------------------------------------------------------
    def __init__(self, ws: Workspace) -> None:
        super().__init__(ws)
        self.clients = ClientLoad(ws.host, ws.spec, ws.note)
        self.lab = isinstance(ws.host, LabHost)
        #: the port clients mount from (a lab's forward of its 2049, set up at setup())
        self.port = NFS_PORT
        self.forward = ""
        self.nfsd_started = False
        #: target name -> the dataset directory exported and mounted now
        self.shared: dict[str, str] = {}
        #: (client name, directory) that tankbench created (removed with rmdir at the end)
        self.made_dirs: set[tuple[str, str]] = set()
        self.addresses: dict[str, list[str]] = {}
        self.hosts: dict[str, SshHost] = {}

    def client_hosts(self, t: Target) -> list[SshHost]:
        out = []
        for c in t.clients:
            if c.name not in self.hosts:
                self.hosts[c.name] = ssh_client(c)
            out.append(self.hosts[c.name])
        return out

    def check(self, target: Target, probe: Mapping[str, Any]) -> None:
        try:
            self._check(target, probe)
        except BaseException:
            self._close()  # a refused campaign never reaches finish()
            raise

    def _close(self) -> None:
        for h in self.hosts.values():
            h.close()
        self.hosts.clear()

    def _check(self, target: Target, probe: Mapping[str, Any]) -> None:
        self.clients.check(target)  # every client: not the server, reachable, same fio, port free, directory usable
        super().check(target, probe)  # ZFS on the host
        where = f"{self.ws.spec.path}: target {target.name!r}"
        if self.host.run(["sh", "-c", "command -v exportfs"], timeout=60).returncode != 0:
            raise UserError(
                f"{where}: {self.host.name} has no NFS server (exportfs not found)",
                "install it (Debian: apt-get install nfs-kernel-server)",
            )
        if not self.lab and not self._nfsd_running():
            raise UserError(
                f"{where}: the NFS server is not running on {self.host.name}",
                "start it (systemctl start nfs-server); tankbench exports to it but does not start services on "
                "your hosts",
            )
        for j, h in enumerate(self.client_hosts(target)):
            at = f"{self.ws.spec.path}: target[{self._index(target)}].clients[{j}] = {target.clients[j].name!r}"
            if h.run(["sh", "-c", "command -v mount.nfs || test -x /sbin/mount.nfs"], timeout=60).returncode != 0:
                raise UserError(
                    f"{at}: has no NFS client (mount.nfs not found)", "install it (Debian: apt-get install nfs-common)"
                )
            state = h.run(
                ["sh", "-c", 'd="$1"; findmnt -n -o SOURCE -M "$d"; [ -d "$d" ] && ls -A "$d" | head -1']
                + ["sh", target.path],
                timeout=60,
            ).stdout.split()
            if state and not self._ours(state[0]):
                raise UserError(
                    f"{at}: {target.path} is {'a mount point' if ':' in state[0] else 'not empty'} there",
                    f"tankbench mounts the share on an empty {target.path}; unmount or empty it",
                )

    def _ours(self, source: str) -> bool:
        """Whether a mount's source is a share of this campaign's datasets (left mounted by a killed run: the
        run that resumes unmounts it)."""
        return ":" in source and source.split(":", 1)[1].startswith(zfsmod.root_mountpoint(self.ws.zfs.root) + "/")

    def _index(self, t: Target) -> int:
        return next((n for n, x in enumerate(self.ws.spec.targets) if x.name == t.name), 0)

    def _nfsd_running(self) -> bool:
        res = self.host.run(["cat", "/proc/fs/nfsd/threads"], timeout=60)
        return res.returncode == 0 and res.stdout.strip().isdigit() and int(res.stdout.strip()) > 0

    def setup(self) -> None:
        super().setup()
        if self.lab:
            self._lab_server()

    def _lab_server(self) -> None:
        """A lab boots without services: start nfsd (NFSv3 off unless asked) and mountd, and forward a port of
        this machine's loopback to its 2049 (QMP `hostfwd_add`: no change to how labs boot)."""
        from tankbench.lab.qemu import qmp
        from tankbench.lab.state import free_port

        assert isinstance(self.host, LabHost)
        v3 = any(t.share.get("nfs_version") == "3" for t in self.ws.spec.targets if t.share)
        no3 = "" if v3 else "-N 3"
        # everything in a lab is tankbench's: an nfsd or a forward left by a killed run is taken over and ended
        script = (
            f"cat {FORWARD_NOTE} 2>/dev/null; rm -f {FORWARD_NOTE}; mkdir -p /var/lib/nfs/v4recovery {EXPORTS_DIR}; "
            "mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd; exportfs -ra; "
            f"pidof rpc.mountd >/dev/null || rpc.mountd {no3}; "
            f'[ "$(cat /proc/fs/nfsd/threads)" -gt 0 ] || rpc.nfsd {no3} 4'
        )
        old = self.host.run(["sh", "-c", script], timeout=120, check=True).stdout.split()
        self.nfsd_started = True
        for rule in old:
            qmp(self.host.lab_dir, "human-monitor-command", {"command-line": f"hostfwd_remove n0 {rule}"})
        self.port = free_port()
        self.forward = f"tcp:127.0.0.1:{self.port}"
        said = qmp(self.host.lab_dir, "human-monitor-command", {"command-line": f"hostfwd_add n0 {self.forward}-:2049"})
        if str(said).strip():  # HMP says nothing when it worked
            self.forward = ""
            raise HostError(f"{self.host.name}: forwarding 127.0.0.1:{self.port} to its NFS port: {said}")
        self.host.run(["sh", "-c", f"echo {self.forward} > {FORWARD_NOTE}"], timeout=60, check=True)
        self.ws.note(f"lab NFS server: nfsd started, 127.0.0.1:{self.port} forwarded to its port 2049")

    def server_address(self, t: Target) -> str:
        """Where the clients reach the server: the target's `server_address`, slirp's host for a lab, else the
        address tankbench reaches the host at."""
        if t.share.get("server_address"):
            return t.share["server_address"]
        if self.lab:
            return SLIRP_HOST
        return str(getattr(self.host, "address", "")) or "localhost"

    def client_addresses(self, t: Target) -> list[str]:
        """Each client's address as the server sees it (its source address towards the server)."""
        if t.name in self.addresses:
            return self.addresses[t.name]
        if self.lab:
            found = [SLIRP_HOST]
        else:
            server = self.server_address(t)
            found = []
            for h in self.client_hosts(t):
                out = h.run(
                    ["sh", "-c", 'ip -o route get "$(getent ahosts "$1" | head -n1 | cut -d" " -f1)"', "sh", server],
                    timeout=60,
                ).stdout.split()
                src = out[out.index("src") + 1] if "src" in out[:-1] else ""
                if not src:
                    raise HostError(f"{h.name}: cannot tell its address towards {server} (ip route get)")
                found.append(src)
        self.addresses[t.name] = sorted(set(found))
        return self.addresses[t.name]

    def provision(self, test: Test) -> None:
        t = test.target
        ds_dir = zfsmod.dataset_dir(test)
        if self.shared.get(t.name) not in (None, ds_dir):
            self.unshare(t)  # a dataset that is exported and mounted cannot be destroyed
        super().provision(test)  # the test's dataset, tagged (the previous one destroyed)
        if self.shared.get(t.name) != ds_dir:
            self.share(t, ds_dir)

    def share(self, t: Target, ds_dir: str) -> None:
        """Export the dataset's directory to the clients and mount client j's sub-directory on client j."""
        n = len(t.clients)
        dirs = " ".join(shlex.quote(f"{ds_dir}/c{j}") for j in range(n))
        self.host.run(["sh", "-c", f"mkdir -p {dirs}"], timeout=60, check=True)
        self.shared[t.name] = ds_dir
        self._write_exports()
        for j, h in enumerate(self.client_hosts(t)):
            # made here, or by an earlier (killed) run of this campaign: its note beside the directory says so
            made = h.run(["sh", "-c", MAKE_DIR, "sh", t.path, made_note(t.path), self.ws.spec.campaign_id], timeout=60)
            if made.returncode != 0:
                raise HostError(f"{h.name}: cannot create {t.path}: {made.stderr.strip()}")
            if "made" in made.stdout:
                self.made_dirs.add((h.name, t.path))
            # a share of this campaign left mounted by a killed run (the preflight let only ours through)
            h.run(["sh", "-c", 'if mountpoint -q "$1"; then umount "$1"; fi', "sh", t.path], timeout=120, check=True)
            argv = mount_argv(
                f"{self.server_address(t)}:{ds_dir}/c{j}",
                t.path,
                t.share["nfs_version"],
                self.port,
                t.share["mount_options"],
            )
            res = h.run(argv, timeout=120)
            if res.returncode != 0:
                raise HostError(f"{h.name}: {shlex.join(argv)} failed: {res.stderr.strip()[-500:]}")
        self.ws.note(f"exported {ds_dir} to {', '.join(self.client_addresses(t))}; mounted on {n} client(s)")

    def _write_exports(self) -> None:
        """This campaign's exports file: what is shared now, to the clients only; `exportfs -ra` applies it."""
        lines = "".join(
            export_line(d, self.client_addresses(t), t.share["export"], self.lab)
            for t in self.ws.spec.targets
            if (d := self.shared.get(t.name))
        )
        path = exports_file(self.ws.spec.campaign_id)
        if lines:
            script = f"mkdir -p {EXPORTS_DIR} && cat > {shlex.quote(path)} && exportfs -ra"
            self.host.run(["sh", "-c", script], input=lines.encode(), timeout=120, check=True)
        else:
            self.host.run(["sh", "-c", f"rm -f {shlex.quote(path)}; exportfs -ra"], timeout=120, check=True)

    def unshare(self, t: Target) -> None:
        """Unmount on every client (then remove the mount directory tankbench made), unexport."""
        errors = []
        for h in self.client_hosts(t):
            res = h.run(["sh", "-c", 'if mountpoint -q "$1"; then umount "$1"; fi', "sh", t.path], timeout=120)
            if res.returncode != 0:
                errors.append(f"{h.name}: umount {t.path}: {res.stderr.strip()}")
        self.shared.pop(t.name, None)
        self._write_exports()
        if errors:
            raise HostError("; ".join(errors))

    def recover(self, rebooted: bool) -> dict[str, Any]:
        """After the server rebooted: its exports, nfsd and a lab's forward are gone and the clients' mounts are
        stale; they are let go (lazily: a hard mount of a dead server would hang a plain umount), and the next
        run shares again."""
        out = super().recover(rebooted)
        if rebooted:
            for t in [t for t in self.ws.spec.targets if t.name in self.shared]:
                for h in self.client_hosts(t):
                    h.run(["sh", "-c", 'if mountpoint -q "$1"; then umount -f -l "$1"; fi', "sh", t.path], timeout=120)
                self.shared.pop(t.name, None)
            self.forward, self.nfsd_started = "", False
            if self.lab:
                self._lab_server()
        return out

    def lay_out(self, test: Test) -> dict[str, Any]:
        return self.clients.lay_out(test, lambda h: lay_out_file(replace(self.ws, host=h), test, self))

    def run_fio(
        self, test: Test, request: dict[str, Any], on_event: Callable[[dict[str, Any]], None], timeout: float
    ) -> dict[str, Any]:
        hosts = self.client_hosts(test.target)
        before = {h.name: _net_dev(h) for h in hosts}
        res = self.clients.run(test, request)
        res["net_clients"] = {h.name: netcount.delta(before[h.name], _net_dev(h)) for h in hosts}
        return res

    def capture(self, test: Test) -> dict[str, Any]:
        cap = super().capture(test)
        cap["capture_files"] = [*cap.get("capture_files", []), "/proc/net/dev", "/sys/class/net/*/speed"]
        # a shaped interface (tc) is limited to its rate whatever speed its NIC states (the lab's link model)
        cap["after_cmds"] = [*cap.get("after_cmds", []), ["tc", "qdisc", "show"]]
        return cap

    def after_run(self, test: Test, res: Mapping[str, Any], metrics: Mapping[str, float]) -> Capture:
        m, checks, samples = super().after_run(test, res, metrics)
        before, after = res.get("files_before", {}), res.get("files_after", {})
        server = netcount.delta(before.get("/proc/net/dev", ""), after.get("/proc/net/dev", ""))
        iface, _ = netcount.busiest(server)
        speed = netcount.link_speed(str(after.get(f"/sys/class/net/{iface}/speed", "")))
        tc = next(
            (str(o.get("stdout", "")) for o in res.get("after_outputs", []) if o.get("argv", [""])[0] == "tc"), ""
        )
        shaped = netcount.shaped_rate(tc, iface)
        if shaped and (not speed or shaped < speed):
            speed = shaped
        seconds = float(res.get("wall_s") or 0.0)
        total = dict(res.get("checks", {})).get("clients.total", {})
        client_mibs = (float(total.get("read_bw_bytes", 0)) + float(total.get("write_bw_bytes", 0))) / netcount.MIB
        cpu = None
        if "sys.cpu_user_pct" in metrics or "sys.cpu_sys_pct" in metrics:
            cpu = float(metrics.get("sys.cpu_user_pct", 0.0)) + float(metrics.get("sys.cpu_sys_pct", 0.0))
        checks = dict(checks)
        checks["net.server"] = server
        checks["net.clients"] = dict(res.get("net_clients", {}))
        checks["nfs.share"] = dict(test.target.share, server=self.server_address(test.target), port=self.port)
        checks.update(
            netcount.judge(
                seconds=seconds,
                server=server,
                speed_mbps=speed,
                client_mibs=client_mibs,
                cpu_pct=cpu,
            )
        )
        return m, checks, samples

    def finish(self) -> None:
        """Unmount, remove the mount directories tankbench made, unexport, destroy the datasets (tag read back),
        stop the fio servers, stop a lab's nfsd and its forward; each step whatever the others did."""
        errors: list[str] = []

        def step(what: str, fn: Callable[[], object]) -> None:
            try:
                fn()
            except (HostError, UserError, OSError) as e:
                errors.append(f"{what}: {e}")

        for t in [t for t in self.ws.spec.targets if t.name in self.shared]:
            step(f"unshare {t.name}", partial(self.unshare, t))
        for name, path in sorted(self.made_dirs):
            if name in self.hosts:
                argv = ["sh", "-c", 'rmdir "$1" && rm -f "$2"', "sh", path, made_note(path)]
                step(f"rmdir {path} on {name}", partial(self.hosts[name].run, argv, timeout=60, check=True))
        self.made_dirs.clear()
        if self.ws.zfs_ready:
            for t in self.ws.spec.targets:
                ds = self.ws.zfs.current.pop(t.name, None) if t.kind == self.kind else None
                if ds:
                    step(f"destroy {ds}", partial(self.ws.zfs.destroy, ds))
        step("fio servers", self.clients.stop)
        if self.forward:
            from tankbench.lab.qemu import qmp

            assert isinstance(self.host, LabHost)
            lab_dir = self.host.lab_dir
            rule = f"hostfwd_remove n0 {self.forward}"
            step("port forward", lambda: qmp(lab_dir, "human-monitor-command", {"command-line": rule}))
            step("port forward note", lambda: self.host.run(["rm", "-f", FORWARD_NOTE], timeout=60, check=True))
            self.forward = ""
        if self.nfsd_started:
            stop = "rpc.nfsd 0; for p in $(pidof rpc.mountd); do kill $p; done"
            step("nfsd", lambda: self.host.run(["sh", "-c", stop], timeout=60, check=True))
            self.nfsd_started = False
        self._close()
        if errors:
            self.ws.note("warning: network share clean-up: " + "; ".join(errors))

    def device_paths(self, test: Test) -> list[str]:
        return super().device_paths(test)  # the pool's disks on the server


def _net_dev(h: Host) -> str:
    return h.run(["cat", "/proc/net/dev"], timeout=60, check=True).stdout
