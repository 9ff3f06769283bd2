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
from importlib import resources
from typing import Any

from tankbench import bootlog
from tankbench.errors import HostError, UserError
from tankbench.guest import qemu
from tankbench.guest.hotplug import HotPlug
from tankbench.guest.initramfs import IN_IMAGE_DIR
from tankbench.guest.records import GuestRun, OnPause, parse_devices
from tankbench.hosts.base import Host, bootstrap_argv

Progress = Callable[[str], None]


def controller_source() -> bytes:
    """The controller program (stdlib only) that runs on the host next to qemu."""
    return resources.files("tankbench.guest").joinpath("controller.py").read_bytes()


#: what a guest kernel prints when it dies: a panic, or an oops (the test guest boots with oops=panic)
PANIC_MARKS = ("Kernel panic", "Oops:")
#: boots of a test guest whose kernel panics during boot before the start fails (see _boot_again_on_panic)
BOOT_ATTEMPTS = 3


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


class TestGuest(HotPlug):
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
        self.panicked_boots: list[tuple[str, str]] = []  # (console log, panic line) of each boot that panicked
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
        self._boot_again_on_panic(accel)

    def _boot_again_on_panic(self, accel: str) -> None:
        """Boot; a guest kernel that panics or oopses during boot is booted again, up to BOOT_ATTEMPTS boots in
        all. Under nested TCG this is a rare fault of the emulators, not of the guest: an oops in interrupt
        context (once in CI), and a general protection fault at the IRET of sync_core while the kernel patched
        its own text (text_poke_early, with EFLAGS read as garbage: a corrupted register), twice in a row in one
        CI run (stop 42). Each boot has its own run directory, so every panicked boot's console stays readable."""
        for attempt in range(1, BOOT_ATTEMPTS + 1):
            try:
                self._boot(accel, self.boot_timeout)
                return
            except HostError as e:
                console = self._console_tail()
                self.close()
                if not panicked(console):
                    raise
                why = panic_line(console)
                self.panicked_boots.append((f"{self.run_dir}/console.log", why))
                if attempt == BOOT_ATTEMPTS:
                    raise HostError(
                        f"guest {self.name}: the guest kernel panicked under emulation in each of {BOOT_ATTEMPTS} "
                        f"boots ({why}); consoles: "
                        + ", ".join(f"{self.host.name}:{log}" for log, _ in self.panicked_boots)
                        + f"; the last one's last lines:\n{console[-1500:]}"
                    ) from e
                self.progress(
                    f"guest {self.name}: the guest kernel panicked under emulation ({why}); "
                    f"booting again ({attempt + 1} of {BOOT_ATTEMPTS})"
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
        if self.pid and process_ended(self.host, self.pid):
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

    def qmp(self, execute: str, **arguments: Any) -> Any:
        """One QMP command to this guest's qemu; its 'return' value."""
        return self._call({"op": "qmp", "execute": execute, "arguments": arguments or None}, 120)["return"]

    def console_log(self) -> str:
        """The guest's serial console so far (kernel messages and TBGUEST progress marks)."""
        return self.host.run(["cat", f"{self.run_dir}/console.log"], timeout=60).stdout

    def qemu_cpu_seconds(self) -> float:
        """CPU seconds (user+system) qemu has used on the host so far."""
        return float(self._call({"op": "cpu"}, 60)["qemu_cpu_s"])


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


def process_ended(host: Host, pid: int, settle_s: float = 3.0) -> bool:
    """Whether a process on `host` has ended: it is gone, or a zombie its parent has not reaped yet. A SIGKILLed
    qemu stays a zombie until its controller waits for it, and `kill -0` succeeds on a zombie: CI's guest-layers
    test killed the guest's qemu, the runner asked at once, and the campaign stopped on "the guest closed the
    control channel" instead of booting a new guest. A process still there is asked again for up to `settle_s`
    (one being torn down shows as a zombie a moment after its files close)."""
    deadline = time.monotonic() + settle_s
    while True:
        res = host.run(["cat", f"/proc/{pid}/stat"], timeout=60)
        text = res.stdout if res.returncode == 0 else ""
        state = text[text.rfind(")") + 2 :].split()[:1] if ")" in text else []
        if state in ([], ["Z"], ["X"]):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)
