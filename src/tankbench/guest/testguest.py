"""The test guest as a Python object: boot it on a host, run fio in it, attach disks, ask qemu.

    with TestGuest(host, disks=[GuestDisk("tbd0", "/dev/zvol/tank/vol")]) as guest:
        run = guest.run_fio(job_text, disk="tbd0")    # fio JSON, guest wall time, guest /proc snapshots
        guest.block_settings()["tbd0"].cache_mode      # what qemu really uses, read back over QMP

qemu runs on the host under a small controller (tankbench/guest/controller.py, copied there like the
agent) that ends qemu when its stdin closes, so a guest never outlives the tankbench that started it.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from tankbench import bootlog
from tankbench.errors import HostError, UserError
from tankbench.guest import qemu
from tankbench.guest.initramfs import IN_IMAGE_DIR
from tankbench.guestconf.pauses import IoErrors, Pause, parse_io_errors, parse_pauses
from tankbench.hosts.base import Host, bootstrap_argv

Progress = Callable[[str], None]


def controller_source() -> bytes:
    """The controller program (stdlib only) that runs on the host next to qemu."""
    return resources.files("tankbench.guest").joinpath("controller.py").read_bytes()


def parse_diskstats(text: str) -> dict[str, tuple[int, ...]]:
    """/proc/diskstats -> {device: (reads, reads merged, sectors read, ms reading, writes, ...)} (pure)."""
    out: dict[str, tuple[int, ...]] = {}
    for line in text.splitlines():
        p = line.split()
        if len(p) >= 14:
            out[p[2]] = tuple(int(x) for x in p[3:])
    return out


def parse_stat(text: str) -> dict[str, tuple[int, ...]]:
    """/proc/stat -> {"cpu": (user, nice, system, idle, iowait, irq, softirq, steal, ...), "ctxt": (n,), …}."""
    out: dict[str, tuple[int, ...]] = {}
    for line in text.splitlines():
        p = line.split()
        if p and (p[0] == "cpu" or p[0] in ("ctxt", "processes", "procs_running", "procs_blocked")):
            out[p[0]] = tuple(int(x) for x in p[1:])
    return out


def parse_devices(text: str) -> dict[str, str]:
    """The guest's device list ("vdb tbd0 1073741824" lines) -> {serial: "/dev/vdb"} (pure)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        p = line.split()
        if len(p) == 3 and p[1]:
            out[p[1]] = f"/dev/{p[0]}"
    return out


def cache_mode(cache: dict[str, Any]) -> str:
    """query-block's {"writeback", "direct", "no-flush"} -> the -drive cache= name it amounts to (pure)."""
    key = (bool(cache.get("direct")), bool(cache.get("no-flush")), bool(cache.get("writeback")))
    for name, value in qemu.CACHE_FLAGS.items():
        if value == key:
            return name
    return f"direct={key[0]},no-flush={key[1]},writeback={key[2]}"


#: what a guest kernel prints when it dies: a panic, or an oops (the test guest boots with oops=panic)
PANIC_MARKS = ("Kernel panic", "Oops:")


def panicked(console: str) -> bool:
    """Whether a guest's console shows its kernel panicked or oopsed (pure)."""
    return any(m in console for m in PANIC_MARKS)


def panic_line(console: str) -> str:
    """The console's first panic or oops line, without its timestamp (pure; "" when there is none)."""
    for line in console.splitlines():
        if any(m in line for m in PANIC_MARKS):
            return line.split("]", 1)[-1].strip() if line.startswith("[") else line.strip()
    return ""


def boot_marks(console: str) -> dict[str, float]:
    """The guest's "TBGUEST <what> uptime=<s>" console lines -> {what: guest uptime} (pure)."""
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"TBGUEST (\S+) uptime=([\d.]+)", console)}


def cpu_khz(cpuinfo: str) -> int | None:
    """The first 'cpu MHz' of /proc/cpuinfo in kHz: the TSC rate the emulated guest is told (pure)."""
    m = re.search(r"^cpu MHz\s*:\s*([\d.]+)", cpuinfo, re.M)
    return int(float(m.group(1)) * 1000) if m else None


@dataclass(frozen=True)
class GuestRun:
    """One request the guest ran (fio or a shell script): status, outputs, timing and /proc snapshots."""

    rc: int
    stdout: str
    stderr: str
    fio: dict[str, Any] | None  # fio's JSON output (fio requests only; None if it produced none)
    guest_wall_s: float  # measured in the guest (its uptime before and after)
    host_wall_s: float  # the whole request as the controller on the host saw it
    qemu_cpu_s: float  # qemu's user+system CPU seconds on the host, cumulative, at the end of the request
    diskstats_before: dict[str, tuple[int, ...]] = field(default_factory=dict)
    diskstats_after: dict[str, tuple[int, ...]] = field(default_factory=dict)
    stat_before: dict[str, tuple[int, ...]] = field(default_factory=dict)
    stat_after: dict[str, tuple[int, ...]] = field(default_factory=dict)
    fio_error: str = ""  # why fio's output could not be parsed, if it could not
    io_log_last: dict[str, str] = field(default_factory=dict)  # {per-job I/O log (tbio_*.log): its last line}
    guest_start_s: float = 0.0  # the guest's uptime when the request started (its clock, for cross-checks)
    #: with on_pause: each stop of the VM on an I/O error and how it ended, and qemu's BLOCK_IO_ERROR counts
    pauses: tuple[Pause, ...] = ()
    io_errors: tuple[IoErrors, ...] = ()
    watch_error: str = ""  # why the controller's pause watch failed, if it did

    @classmethod
    def from_result(cls, ev: dict[str, Any]) -> GuestRun:
        """Build from the controller's result event."""
        files: dict[str, str] = ev.get("files", {})
        fio, err = None, ""
        if "fio.json" in files:
            text = files["fio.json"]
            try:
                fio = json.loads(text[text.index("{") :]) if "{" in text else None  # fio may print notes first
            except ValueError as e:
                err = f"{e}: {text[:300]!r}"

        def up(k: str) -> float:
            try:
                return float(files.get(k, "0").split()[0])
            except (ValueError, IndexError):
                return 0.0

        return cls(
            rc=int(ev["rc"]),
            stdout=files.get("stdout", ""),
            stderr=files.get("stderr", ""),
            fio=fio,
            guest_wall_s=round(up("after.uptime") - up("before.uptime"), 3),
            host_wall_s=float(ev.get("host_wall_s", 0.0)),
            qemu_cpu_s=float(ev.get("qemu_cpu_s", 0.0)),
            diskstats_before=parse_diskstats(files.get("before.diskstats", "")),
            diskstats_after=parse_diskstats(files.get("after.diskstats", "")),
            stat_before=parse_stat(files.get("before.stat", "")),
            stat_after=parse_stat(files.get("after.stat", "")),
            fio_error=err,
            guest_start_s=up("before.uptime"),
            io_log_last={
                name: text.strip().splitlines()[-1]
                for name, text in files.items()
                if name.startswith("tbio_") and text.strip()
            },
            pauses=parse_pauses(ev.get("pauses", ())),
            io_errors=parse_io_errors(ev.get("io_errors", ())),
            watch_error=str(ev.get("watch_error", "")),
        )


def guest_metrics(run: GuestRun, device: str) -> dict[str, float]:
    """`guest.*` metrics of one request from the guest's /proc snapshots before and after it (pure): CPU shares
    (user, system incl. irq/softirq, iowait, steal), context switches, and the I/O the guest's kernel sent to
    its disk `device` ("/dev/sda"): operations, bytes and the average request size it issued to qemu."""
    out: dict[str, float] = {}
    a, b = run.stat_before.get("cpu"), run.stat_after.get("cpu")
    if a and b and len(a) >= 8 and len(b) >= 8:
        d = [y - x for x, y in zip(a, b)]
        total = sum(d[:8]) or 1
        out["guest.cpu_user_pct"] = round(100.0 * (d[0] + d[1]) / total, 2)
        out["guest.cpu_sys_pct"] = round(100.0 * (d[2] + d[5] + d[6]) / total, 2)
        out["guest.cpu_iowait_pct"] = round(100.0 * d[4] / total, 2)
        out["guest.cpu_steal_pct"] = round(100.0 * d[7] / total, 2)
    if "ctxt" in run.stat_before and "ctxt" in run.stat_after:
        out["guest.ctxt"] = float(run.stat_after["ctxt"][0] - run.stat_before["ctxt"][0])
    name = device.removeprefix("/dev/")
    da, db = run.diskstats_before.get(name), run.diskstats_after.get(name)
    if da and db:
        reads, read_sectors = db[0] - da[0], db[2] - da[2]
        writes, write_sectors = db[4] - da[4], db[6] - da[6]
        out["guest.disk_reads"] = float(reads)
        out["guest.disk_writes"] = float(writes)
        out["guest.disk_read_bytes"] = float(read_sectors * 512)
        out["guest.disk_write_bytes"] = float(write_sectors * 512)
        if reads + writes:
            out["guest.disk_avg_io_bytes"] = round((read_sectors + write_sectors) * 512 / (reads + writes), 1)
        if len(db) >= 17 and len(da) >= 17:  # kernels >= 5.5: flush requests completed (field 16 after the name)
            out["guest.disk_flushes"] = float(db[15] - da[15])
    return out


@dataclass(frozen=True)
class OnPause:
    """What the controller does when qemu stops the VM on an I/O error during a request: run `argv` on the host
    (e.g. free space; nothing when empty), then resume the VM; after `max_pauses` pauses it leaves the VM
    stopped (the request then times out, and the caller must free space and `cont` itself)."""

    argv: tuple[str, ...] = ()
    max_pauses: int = 3
    timeout: float = 300.0  # seconds the host command may take

    def request(self) -> dict[str, Any]:
        """The request field the controller reads."""
        return {"argv": list(self.argv), "max_pauses": self.max_pauses, "timeout": self.timeout}


@dataclass(frozen=True)
class BlockSettings:
    """A disk's settings as qemu reports them (QMP query-block + qom-get), not as tankbench asked."""

    node: str
    device: str  # qdev id, e.g. "dev-tbd0"
    driver: str  # raw | qcow2
    file: str
    cache_mode: str  # none | writeback | writethrough | directsync | unsafe
    cache: dict[str, bool]
    cluster_size: int | None
    write_cache: str  # the device's write-cache property ("on"/"off"/"auto")
    iothread: str | None
    werror: str = ""  # the device's werror property ("auto": the block backend's default, enospc)
    model: str = ""  # the device's QOM type: virtio-blk-pci (q35), virtio-blk-device (microvm), scsi-hd


class TestGuest:
    """A test guest on a host: boot on enter, power off on exit; one boot serves many fio runs."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        host: Host,
        disks: Sequence[qemu.GuestDisk] = (),
        *,
        name: str = "tbguest",
        accel: str = "auto",
        machine: str = "microvm",
        memory_mb: int = 512,
        cpus: int = 1,
        cpu_model: str | None = None,
        kernel: str | None = None,
        initrd: str | None = None,
        boot_timeout: float = 900.0,
        progress: Progress | None = None,
    ) -> None:
        if accel not in ("auto", "tcg", "kvm"):
            raise UserError(f"guest accel = {accel!r} is not supported", "use 'auto', 'tcg' or 'kvm'")
        qemu.machine_args(machine)  # validates
        ids = [d.id for d in disks]
        if len(set(ids)) != len(ids):
            raise UserError(f"guest disks: duplicate id in {ids}", "give every disk its own id")
        self.host = host
        self.disks: dict[str, qemu.GuestDisk] = {d.id: d for d in disks}
        self.name = name
        self.accel = accel
        self.machine = machine
        self.memory_mb = memory_mb
        self.cpus = cpus
        self.cpu_model = cpu_model
        self.kernel = kernel
        self.initrd = initrd
        self.boot_timeout = boot_timeout
        self.progress = progress or (lambda s: None)
        self.run_dir = ""  # the guest's sockets and logs on the host: set when it starts
        self.pid = 0
        self.boot_s = 0.0
        self.devices: dict[str, str] = {}
        self.accel_used = ""
        self.fio_version = ""  # the guest's fio, from the image's manifest (unknown for uploaded artefacts)
        self._hotplugged: dict[str, dict[str, object]] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: list[bytes] = []
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> TestGuest:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _resolve_accel(self) -> str:
        if self.accel != "auto":
            return self.accel
        if self.host.accelerator == "tcg":  # an emulated host (the lab under TCG): nested KVM stalls there
            return "tcg"
        return "kvm" if self.host.run(["test", "-w", "/dev/kvm"], timeout=30).returncode == 0 else "tcg"

    def _artefacts(self) -> tuple[str, str]:
        if self.kernel and self.initrd:
            return self.kernel, self.initrd
        res = self.host.run(["cat", f"{IN_IMAGE_DIR}/manifest.json"], timeout=30)
        if res.returncode != 0:
            raise UserError(
                f"{self.host.name}: no test guest in {IN_IMAGE_DIR}",
                "pass kernel= and initrd= (see upload_artefacts) or use the lab",
            )
        manifest = json.loads(res.stdout)
        self.fio_version = str(manifest.get("fio", ""))
        return manifest["kernel"], f"{IN_IMAGE_DIR}/initramfs.img"

    def argv(self, accel: str, tsc_khz: int | None) -> list[str]:
        """The qemu argv this guest boots with."""
        kernel, initrd = self._artefacts()
        return qemu.guest_argv(
            name=self.name,
            kernel=kernel,
            initrd=initrd,
            run_dir=self.run_dir,
            disks=list(self.disks.values()),
            accel=accel,
            machine=self.machine,
            memory_mb=self.memory_mb,
            cpus=self.cpus,
            tsc_khz=tsc_khz,
            cpu_model=self.cpu_model,
        )

    def start(self) -> None:
        """Boot the guest; returns when its runner answers (raises HostError if it does not).

        accel="auto" tries KVM where /dev/kvm is usable and the host is not itself emulated, and falls back
        to TCG if the KVM guest is not ready within a minute (on some hosts KVM exists but guests hang).
        """
        accel = self._resolve_accel()
        if accel == "kvm" and self.accel == "auto":
            try:
                self._boot("kvm", min(self.boot_timeout, 60.0))
                return
            except HostError as e:
                self.progress(f"guest {self.name}: KVM boot failed ({e}); booting under TCG")
                self.close()
            accel = "tcg"
        self._boot_once_more_on_panic(accel)

    def _boot_once_more_on_panic(self, accel: str) -> None:
        """Boot; a guest kernel that panics or oopses during boot (a rare fault of nested emulation: an oops in
        interrupt context, seen once in CI) is booted once more, as the lab's own boot is."""
        for attempt in (1, 2):
            try:
                self._boot(accel, self.boot_timeout)
                return
            except HostError as e:
                console = self._console_tail()
                self.close()
                if not panicked(console):
                    raise
                why = panic_line(console)
                if attempt == 2:
                    raise HostError(
                        f"guest {self.name}: the guest kernel panicked under emulation, twice during boot ({why}); "
                        f"console: {self.host.name}:{self.run_dir}/console.log, its last lines:\n{console[-1500:]}"
                    ) from e
                self.progress(
                    f"guest {self.name}: the guest kernel panicked under emulation ({why}); booting once more"
                )

    def crashed(self) -> str:
        """Why this guest is gone while its host is not ("" while it runs): its kernel panicked or oopsed (a rare
        fault of nested emulation, seen in CI during a fio run: an oops in the maple tree on munmap), or its qemu
        or controller ended."""
        console = self._console_tail()
        if panicked(console):
            return f"its kernel panicked ({panic_line(console)})"
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return "its controller ended"
        if self.pid and self.host.run(["kill", "-0", str(self.pid)], timeout=60).returncode != 0:
            return f"its qemu (pid {self.pid}) ended"
        return ""

    def _console_tail(self) -> str:
        """The last 8 KiB of the guest's console ("" when it cannot be read)."""
        try:
            return self.host.run(["tail", "-c", "8192", f"{self.run_dir}/console.log"], timeout=60).stdout
        except HostError:
            return ""

    def _boot(self, accel: str, timeout: float) -> None:
        # the controller is fed through stdin and checked against its sha256, like the agent: never a file on
        # the host that another user could plant; its sockets and logs live in the user's 0700 directory (a new
        # one per boot, so a failed boot's console stays readable beside the next one's)
        self.run_dir = f"{self.host.private_dir('guests')}/{self.name}-{uuid.uuid4().hex[:8]}"
        self.accel_used = accel
        tsc = cpu_khz(self.host.run(["cat", "/proc/cpuinfo"], timeout=30).stdout) if accel == "tcg" else None
        argv = self.argv(accel, tsc)
        self.progress(
            f"guest {self.name}: booting on {self.host.name} ({self.machine}, {accel}, {len(self.disks)} disks)"
        )
        source = controller_source()
        self._proc = subprocess.Popen(
            self.host.command(bootstrap_argv(self.host.python, source)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        assert self._proc.stdin is not None
        self._proc.stdin.write(source)  # the bootstrap reads exactly these bytes; requests follow
        self._proc.stdin.flush()
        threading.Thread(target=self._drain, daemon=True).start()
        ev = self._call(
            {"op": "start", "argv": argv, "dir": self.run_dir, "timeout": timeout}, timeout + 60, want="ready"
        )
        self.pid = int(ev["pid"])
        self.boot_s = float(ev["boot_s"])
        self.devices = parse_devices(ev.get("devices", ""))
        self.progress(f"guest {self.name}: ready in {self.boot_s:.0f} s (qemu pid {self.pid})")
        bootlog.record("guest", self.name, self.boot_s, accelerator=accel, machine=self.machine, on=self.host.name)

    def close(self) -> None:
        """Power the guest off (its qemu is ended if it does not) and stop the controller."""
        proc = self._proc
        if proc is None:
            return
        try:
            if proc.poll() is None:
                self._call({"op": "quit"}, 120)
        except HostError:
            pass
        finally:
            self._proc = None
            try:
                if proc.stdin:
                    proc.stdin.close()  # the controller ends qemu on EOF, whatever happened before
            except OSError:
                pass
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def facts(self) -> dict[str, object]:
        """What a fingerprint records of a running guest: how it is emulated and what runs fio in it."""
        return {
            "guest_accelerator": self.accel_used,
            "guest_nested": self.host.accelerator == "tcg",  # a guest inside an emulated host
            "guest_machine": self.machine,
            "guest_cpus": self.cpus,
            "guest_cpu_model": self.cpu_model or ("host" if self.accel_used == "kvm" else "max"),
            "guest_memory_mb": self.memory_mb,
            "guest_fio": self.fio_version,
        }

    # ------------------------------------------------------------------ the wire
    def _drain(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stderr is not None
        for line in proc.stderr:
            self._stderr.append(line)
            del self._stderr[:-100]

    def _call(self, request: dict[str, Any], timeout: float, want: str = "result") -> dict[str, Any]:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise HostError(f"guest {self.name} is not running")
        with self._lock:
            timer = threading.Timer(timeout, proc.kill)
            timer.start()
            try:
                proc.stdin.write(json.dumps(request).encode() + b"\n")
                proc.stdin.flush()
                for raw in proc.stdout:
                    ev = json.loads(raw)
                    if ev.get("event") == want:
                        return dict(ev)
                    if ev.get("event") == "error":
                        raise HostError(f"guest {self.name}: {request.get('op')}: {ev.get('message')}")
            except (OSError, ValueError) as e:
                raise HostError(f"guest {self.name}: controller connection: {e}") from e
            finally:
                timer.cancel()
        tail = b"".join(self._stderr).decode(errors="replace")[-800:]
        raise HostError(
            f"guest {self.name}: the controller on {self.host.name} ended ({request.get('op')}); "
            f"see {self.run_dir}/console.log and qemu.log there. {tail}"
        )

    # ------------------------------------------------------------------ requests
    def run_fio(
        self, job_text: str, disk: str | None = None, timeout: float = 3600.0, on_pause: OnPause | None = None
    ) -> GuestRun:
        """Run one fio job file in the guest; `disk` (an id) sets filename= to that disk's guest device.
        `on_pause`: resume the VM when qemu stops it on an I/O error (see OnPause); GuestRun.pauses says how."""
        if disk is not None:
            job_text = f"[global]\nfilename={self.device(disk)}\n{job_text}"
        return self._request("fio", job_text, timeout, on_pause)

    def exec(self, script: str, timeout: float = 600.0, on_pause: OnPause | None = None) -> GuestRun:
        """Run a busybox shell script in the guest (e.g. mkfs, dd, a marker write)."""
        return self._request("exec", script, timeout, on_pause)

    def _request(self, gop: str, payload: str, timeout: float, on_pause: OnPause | None) -> GuestRun:
        req: dict[str, Any] = {"op": "guest", "gop": gop, "payload": payload, "timeout": timeout}
        extra = 0.0
        if on_pause is not None:
            req["on_pause"] = on_pause.request()
            # each pause may run the host command before the guest can go on: the controller waits for it
            extra = on_pause.max_pauses * on_pause.timeout
        return GuestRun.from_result(self._call(req, timeout + extra + 60))

    def refresh_devices(self) -> dict[str, str]:
        """Ask the guest which disks it sees: {disk id (serial): guest device path}."""
        ev = self._call({"op": "guest", "gop": "devices", "payload": "", "timeout": 60}, 120)
        self.devices = parse_devices(ev["files"].get("devices", ""))
        return self.devices

    def device(self, disk: str) -> str:
        """The guest's device path of a disk id, e.g. "/dev/vdb"."""
        if disk not in self.devices:
            self.refresh_devices()
        if disk not in self.devices:
            raise HostError(f"guest {self.name}: no disk with serial {disk!r} (it sees {self.devices})")
        return self.devices[disk]

    def qmp(self, execute: str, **arguments: Any) -> Any:
        """One QMP command to this guest's qemu; its 'return' value."""
        return self._call({"op": "qmp", "execute": execute, "arguments": arguments or None}, 120)["return"]

    def console_log(self) -> str:
        """The guest's serial console so far (kernel messages and TBGUEST progress marks)."""
        return self.host.run(["cat", f"{self.run_dir}/console.log"], timeout=60).stdout

    def qemu_cpu_seconds(self) -> float:
        """CPU seconds (user+system) qemu has used on the host so far."""
        return float(self._call({"op": "cpu"}, 60)["qemu_cpu_s"])

    # ------------------------------------------------------------------ disks
    def attach(self, disk: qemu.GuestDisk, timeout: float = 120.0) -> str:
        """Hot-plug a disk (QMP blockdev-add + device_add); returns its guest device path once the guest sees it.

        virtio-scsi disks go on the spare controller every guest boots with; virtio-blk disks need PCI
        hot-plug (machine = "q35"): microvm's virtio-mmio devices cannot be hot-plugged.
        """
        if disk.id in self.disks:
            raise UserError(f"guest {self.name}: a disk with id {disk.id!r} is already attached", "detach it first")
        if disk.bus == "virtio-blk" and self.machine != "q35":
            raise UserError(
                f"guest {self.name}: cannot hot-plug a virtio-blk disk on machine {self.machine!r}",
                "use bus = 'virtio-scsi', machine = 'q35', or attach the disk at boot",
            )
        if disk.bus == "virtio-blk":
            used = {str(d.get("bus")) for d in self._hotplugged.values()}
            free = [f"hp{i}" for i in range(qemu.HOTPLUG_PORTS) if f"hp{i}" not in used]
            if not free:
                raise UserError(
                    f"guest {self.name}: all {qemu.HOTPLUG_PORTS} hot-plug ports are in use", "detach a disk first"
                )
            dev = qemu.device(disk, self.machine, bus=free[0])
        else:
            dev = qemu.device(disk, self.machine, bus="scsihp.0")
            dev.pop("iothread", None)
        qemu.check_iothreads([disk], self.machine, self.accel_used)
        if disk.iothread and disk.bus == "virtio-blk":
            self.qmp("object-add", **{"qom-type": "iothread", "id": f"io-{disk.id}"})
        self.qmp("blockdev-add", **qemu.blockdev(disk))
        try:
            self.qmp("device_add", **dev)
        except HostError:
            self.qmp("blockdev-del", **{"node-name": disk.id})
            raise
        self.disks[disk.id] = disk
        self._hotplugged[disk.id] = dev
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if disk.id in self.refresh_devices():
                return self.devices[disk.id]
            time.sleep(1.0)
        raise HostError(f"guest {self.name}: hot-plugged disk {disk.id} did not appear in the guest in {timeout:.0f} s")

    def detach(self, disk_id: str, timeout: float = 120.0) -> None:
        """Unplug a hot-plugged disk (device_del, wait until qemu has released it, blockdev-del)."""
        if disk_id not in self._hotplugged:
            raise UserError(
                f"guest {self.name}: disk {disk_id!r} was not hot-plugged",
                "only disks added with attach() can be detached",
            )
        self.qmp("device_del", id=f"dev-{disk_id}")
        deadline = time.monotonic() + timeout
        qdev = re.compile(rf"(^|/)dev-{disk_id}(/|$)")  # virtio-blk-pci reports ".../dev-<id>/virtio-backend"
        while any(qdev.search(str(b.get("qdev", ""))) for b in self.qmp("query-block")):
            if time.monotonic() > deadline:
                raise HostError(f"guest {self.name}: disk {disk_id} still attached {timeout:.0f} s after device_del")
            time.sleep(0.5)
        self.qmp("blockdev-del", **{"node-name": disk_id})
        if self.disks[disk_id].iothread and self.disks[disk_id].bus == "virtio-blk":
            self.qmp("object-del", id=f"io-{disk_id}")
        del self._hotplugged[disk_id]
        del self.disks[disk_id]
        self.devices.pop(disk_id, None)

    def block_settings(self) -> dict[str, BlockSettings]:
        """Every disk's settings as qemu reports them, by disk id (QMP query-block and qom-get)."""
        out: dict[str, BlockSettings] = {}
        for b in self.qmp("query-block"):
            ins = b.get("inserted") or {}
            node = ins.get("node-name", "")
            if node not in self.disks:
                continue
            qdev = f"/machine/peripheral/dev-{node}"
            wce = self.qmp("qom-get", path=qdev, property="write-cache")
            model = self.qmp("qom-get", path=qdev, property="type")
            werror = self.qmp("qom-get", path=qdev, property="werror")
            iothread = None
            if self.disks[node].bus == "virtio-blk":
                found = self.qmp("qom-get", path=qdev, property="iothread")  # "/objects/io-<id>" or ""
                iothread = str(found).rsplit("/", 1)[-1] if found else None
            image = ins.get("image") or {}
            out[node] = BlockSettings(
                node=node,
                device=str(b.get("qdev", "")),
                driver=str(ins.get("drv", "")),
                file=str(ins.get("file", "")),
                cache_mode=cache_mode(ins.get("cache", {})),
                cache=dict(ins.get("cache", {})),
                cluster_size=image.get("cluster-size"),
                write_cache=str(wce),
                iothread=iothread,
                werror=str(werror),
                model=str(model),
            )
        return out


def upload_artefacts(host: Host, kernel: bytes, initrd: bytes) -> tuple[str, str]:
    """Copy a test guest's kernel and initramfs to a host without them (not the lab); their paths there."""
    key = hashlib.sha256(kernel + initrd).hexdigest()[:16]
    d = f"{host.private_dir('guest-artefacts')}/{key}"  # a 0700 directory of the host's user, not /var/tmp
    paths = (f"{d}/vmlinuz", f"{d}/initramfs.img")
    if host.run(["test", "-s", paths[0], "-a", "-s", paths[1]], timeout=60).returncode != 0:
        host.run(["mkdir", "-p", d], check=True, timeout=60)
        host.write_file(paths[0], kernel)
        host.write_file(paths[1], initrd)
    return paths
