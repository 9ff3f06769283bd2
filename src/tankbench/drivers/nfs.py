"""The nfs kind's driver: the dataset exported to the clients only and mounted on each, nfsd started (and a port
forwarded) on a server tankbench runs, fio run on the clients, the network counters of both sides read around
each run, everything tankbench made removed at the end."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

import tankbench.targets.netcount as netcount
import tankbench.targets.zfsplan as zfsmod
from tankbench.drivers.base import Capture, Workspace
from tankbench.drivers.clients import ClientLoad, ssh_client
from tankbench.drivers.dataset import DatasetDriver
from tankbench.drivers.file import lay_out_file
from tankbench.errors import HostError, UserError
from tankbench.hosts.base import Host
from tankbench.hosts.ssh import SshHost
from tankbench.model import Target, Test
from tankbench.targets.nfs import (
    EXPORTS_DIR,
    FORWARD_NOTE,
    MAKE_DIR,
    NFS_PORT,
    NfsKind,
    export_line,
    exports_file,
    made_note,
    mount_argv,
    nfs_options,
)

if TYPE_CHECKING:
    from tankbench.agent import FioRunExtras, FioRunRequest


class NfsDriver(NfsKind, DatasetDriver):
    """A share of a tagged dataset, mounted on the target's clients."""

    def __init__(self, ws: Workspace) -> None:
        super().__init__(ws)
        self.clients = ClientLoad(ws.host, ws.spec, ws.note)
        #: tankbench runs the server (a lab): it starts nfsd there, and forwards a port of this machine to it
        self.managed = ws.host.managed
        #: where the server sees its clients' connections come from, and where they reach it (a lab: slirp's gateway)
        self.nat = ws.host.nat_address
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
        for c in nfs_options(t).clients:
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
        if not self.managed and not self._nfsd_running():
            raise UserError(
                f"{where}: the NFS server is not running on {self.host.name}",
                "start it (systemctl start nfs-server); tankbench exports to it but does not start services on "
                "your hosts",
            )
        for j, h in enumerate(self.client_hosts(target)):
            at = f"{self.ws.spec.path}: target[{self._index(target)}].clients[{j}] = {nfs_options(target).clients[j].name!r}"
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
        if self.managed:
            self._own_server()

    def _own_server(self) -> None:
        """A machine tankbench runs (a lab) boots without services: start nfsd (NFSv3 off unless asked) and
        mountd, and forward a port of this machine's loopback to its 2049 (Host.forward_port)."""
        v3 = any(nfs_options(t).share.get("nfs_version") == "3" for t in self.ws.spec.targets if nfs_options(t).share)
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
            self.host.unforward(rule)
        self.port, self.forward = self.host.forward_port(NFS_PORT)
        self.host.run(["sh", "-c", f"echo {self.forward} > {FORWARD_NOTE}"], timeout=60, check=True)
        self.ws.note(f"lab NFS server: nfsd started, 127.0.0.1:{self.port} forwarded to its port 2049")

    def server_address(self, t: Target) -> str:
        """Where the clients reach the server: the target's `server_address`, the NAT's address of this machine for
        a lab (its port forwarded there), else the address tankbench reaches the host at."""
        if nfs_options(t).share.get("server_address"):
            return nfs_options(t).share["server_address"]
        if self.nat:
            return self.nat
        return str(getattr(self.host, "address", "")) or "localhost"

    def client_addresses(self, t: Target) -> list[str]:
        """Each client's address as the server sees it (its source address towards the server)."""
        if t.name in self.addresses:
            return self.addresses[t.name]
        if self.nat:  # every client comes from the NAT's address
            found = [self.nat]
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
        n = len(nfs_options(t).clients)
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
                nfs_options(t).share["nfs_version"],
                self.port,
                nfs_options(t).share["mount_options"],
            )
            res = h.run(argv, timeout=120)
            if res.returncode != 0:
                raise HostError(f"{h.name}: {shlex.join(argv)} failed: {res.stderr.strip()[-500:]}")
        self.ws.note(f"exported {ds_dir} to {', '.join(self.client_addresses(t))}; mounted on {n} client(s)")

    def _write_exports(self) -> None:
        """This campaign's exports file: what is shared now, to the clients only; `exportfs -ra` applies it."""
        lines = "".join(
            export_line(d, self.client_addresses(t), nfs_options(t).share["export"], bool(self.nat))
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
            if self.managed:
                self._own_server()
        return out

    def lay_out(self, test: Test) -> dict[str, Any]:
        return self.clients.lay_out(test, lambda h: lay_out_file(replace(self.ws, host=h), test, self))

    def run_fio(
        self, test: Test, request: FioRunRequest, on_event: Callable[[dict[str, Any]], None], timeout: float
    ) -> dict[str, Any]:
        hosts = self.client_hosts(test.target)
        before = {h.name: _net_dev(h) for h in hosts}
        res = self.clients.run(test, request)
        res["net_clients"] = {h.name: netcount.delta(before[h.name], _net_dev(h)) for h in hosts}
        return res

    def capture(self, test: Test) -> FioRunExtras:
        cap = super().capture(test)
        cap["capture_files"] = [*cap.get("capture_files", []), "/proc/net/dev", "/sys/class/net/*/speed"]
        # a shaped interface (tc) is limited to its rate whatever speed its NIC states (the lab's link model)
        cap["after_cmds"] = [*cap.get("after_cmds", []), ["tc", "qdisc", "show"]]
        return cap

    def after_run(self, test: Test, res: Mapping[str, Any], metrics: Mapping[str, float]) -> Capture:
        m, checks, samples = super().after_run(test, res, metrics)
        share = dict(nfs_options(test.target).share, server=self.server_address(test.target), port=self.port)
        return m, {**checks, **network_checks(res, metrics, test.ramp), "nfs.share": share}, samples

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
            rule = self.forward
            step("port forward", lambda: self.host.unforward(rule))
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


def io_window_s(res: Mapping[str, Any], metrics: Mapping[str, float], ramp_s: float) -> float:
    """The seconds the network counters' bytes are spread over: fio's I/O (its ramp and runtime), not the run's wall
    time — fio's start-up and exit (client/server set-up, the results sent back) move next to nothing, so bytes over
    the wall time understated the link's load during the I/O (bench/limiter: 83 % of a 24 Mb/s link over 9-10 s of
    wall time for 8 s of reads). The wall time when fio printed no runtime, or one longer than the wall."""
    wall = float(res.get("wall_s") or 0.0)
    runtime = float(metrics.get("fio.runtime_s") or 0.0)
    io = ramp_s + runtime
    return io if runtime > 0 and (wall <= 0 or io <= wall) else wall


def network_checks(res: Mapping[str, Any], metrics: Mapping[str, float], ramp_s: float) -> dict[str, Any]:
    """The server's and each client's network counters over fio's I/O, and what limited it (targets/netcount.py)."""
    before, after = res.get("files_before", {}), res.get("files_after", {})
    server = netcount.delta(before.get("/proc/net/dev", ""), after.get("/proc/net/dev", ""))
    iface, _ = netcount.busiest(server)
    speed = netcount.link_speed(str(after.get(f"/sys/class/net/{iface}/speed", "")))
    tc = next((str(o.get("stdout", "")) for o in res.get("after_outputs", []) if o.get("argv", [""])[0] == "tc"), "")
    shaped = netcount.shaped_rate(tc, iface)
    if shaped and (not speed or shaped < speed):
        speed = shaped
    total = dict(res.get("checks", {})).get("clients.total", {})
    client_mibs = (float(total.get("read_bw_bytes", 0)) + float(total.get("write_bw_bytes", 0))) / netcount.MIB
    cpu = None
    if "sys.cpu_user_pct" in metrics or "sys.cpu_sys_pct" in metrics:
        cpu = float(metrics.get("sys.cpu_user_pct", 0.0)) + float(metrics.get("sys.cpu_sys_pct", 0.0))
    seconds = io_window_s(res, metrics, ramp_s)
    judged = netcount.judge(seconds=seconds, server=server, speed_mbps=speed, client_mibs=client_mibs, cpu_pct=cpu)
    return {"net.server": server, "net.clients": dict(res.get("net_clients", {})), "net.window_s": seconds, **judged}


def _net_dev(h: Host) -> str:
    return h.run(["cat", "/proc/net/dev"], timeout=60, check=True).stdout
