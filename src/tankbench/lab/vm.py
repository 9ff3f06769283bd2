"""Run the lab VM: qemu (KVM if it works, else TCG) booting the cached image, reached over ssh.

Each lab has a name and its own runtime directory (${XDG_CACHE_HOME:-~/.cache}/tankbench/labs/<name>/) with
state.json (qemu pid, ports, settings), its ssh key and known_hosts, its sparse data disks and the console
log. Ports are chosen free at boot, so two labs with different names never collide.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tankbench.errors import HostError, UserError
from tankbench.hosts.base import Host
from tankbench.hosts.ssh import SshHost
from tankbench.lab import build as labbuild

Progress = Callable[[str], None]

GUEST_ADDR = "10.0.2.15"
GUEST_FIO_PORT = 8765
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
#: how long a boot may take before it counts as hung (TCG boots in ~30-60 s)
BOOT_TIMEOUT = float(os.environ.get("TANKBENCH_LAB_BOOT_TIMEOUT", "300"))
#: single-threaded TCG: as fast as MTTCG on 2 cores and free of its rare boot oops (see docs/lab.md)
TCG_THREAD = os.environ.get("TANKBENCH_LAB_TCG_THREAD", "single")
#: extra guest kernel arguments, for experiments (e.g. "initcall_debug")
KERNEL_ARGS = os.environ.get("TANKBENCH_LAB_KERNEL_ARGS", "")
#: qemu processes this Python process started (so they can be reaped, not left as zombies)
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


@dataclass
class LabConfig:
    """What a lab is booted with (the `lab up` options)."""

    disks: int = 2
    disk_size: int = 8 << 30
    slog: bool = False
    memory_mb: int = 3072
    cpus: int = 2


@dataclass
class LabState:
    """A running lab, as recorded in its state.json."""

    name: str
    pid: int
    ssh_port: int
    fio_port: int
    accelerator: str
    config: LabConfig
    image_key: str
    image_dir: str
    started_at: float
    ready_seconds: float = 0.0
    kernel_abi: str = ""
    zfs_version: str = ""
    panics: int = 0
    extra: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict[str, object]) -> LabState:
        d = dict(doc)
        d["config"] = LabConfig(**d["config"])  # type: ignore[arg-type]
        return cls(**d)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- pure helpers

def check_name(name: str) -> str:
    """A lab name is short, lowercase letters/digits/-/_ (it names a directory and a qemu process)."""
    if not NAME_RE.match(name or ""):
        raise UserError(f"invalid lab name {name!r}", "use 1-32 lowercase letters, digits, '-' or '_', e.g. 'default'")
    return name


def parse_size(text: str) -> int:
    """'8G', '512M', '1T', '1073741824' -> bytes (binary units); UserError for anything else."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", str(text), re.I)
    if not m:
        raise UserError(f"invalid disk size {text!r}", "use a number with K, M, G or T, e.g. 8G")
    value = float(m.group(1)) * (1 << (10 * " KMGT".index(m.group(2).upper() or " ")))
    if value < 64 << 20:
        raise UserError(f"disk size {text!r} is too small", "ZFS needs at least 64M per vdev; e.g. 8G")
    if value > 16 << 40:
        raise UserError(f"disk size {text!r} is too large", "the disks are sparse files; 8G to 100G is typical")
    return int(value) // 512 * 512


def data_disk_ids(disks: int, slog: bool = False) -> list[str]:
    """The serials of a lab's disks: tbdata0.. then tblog0 (pure)."""
    return [f"tbdata{i}" for i in range(disks)] + (["tblog0"] if slog else [])


def guest_disk_paths(disks: int, slog: bool = False) -> list[str]:
    """The guest's stable paths for the data disks (and the log disk last)."""
    return [f"/dev/disk/by-id/virtio-{s}" for s in data_disk_ids(disks, slog)]


def kernel_cmdline(pubkey_blob: str, fio_port: int = GUEST_FIO_PORT) -> str:
    """The guest kernel's command line: root by label, lab-init as PID 1, panics power the VM off."""
    return (f"console=ttyS0 root=LABEL={labbuild.ROOT_LABEL} rw init=/usr/local/sbin/lab-init net.ifnames=0 "
            f"quiet loglevel=4 panic=-1 oops=panic lab.sshkey={pubkey_blob} lab.fioport={fio_port}"
            + (f" {KERNEL_ARGS}" if KERNEL_ARGS else ""))


def qemu_argv(*, name: str, image: labbuild.Image, config: LabConfig, accelerator: str, ssh_port: int,
              fio_port: int, run_dir: Path, pubkey_blob: str, root_overlay: Path | None = None,
              incoming: str | None = None) -> list[str]:
    """The qemu command line of a lab (pure). The root disk comes first (it is /dev/vda)."""
    accel = ["-accel", "kvm", "-cpu", "host"] if accelerator == "kvm" else ["-accel", f"tcg,thread={TCG_THREAD}",
                                                                             "-cpu", "max"]
    if root_overlay is not None:
        root = f"file={root_overlay},if=none,id=root,format=qcow2"
    else:
        root = f"file={image.rootfs},if=none,id=root,format=raw,snapshot=on"
    argv = ["qemu-system-x86_64", "-name", f"tankbench-lab-{name}", *accel,
            "-smp", str(config.cpus), "-m", str(config.memory_mb),
            "-nodefaults", "-display", "none", "-vga", "none", "-no-reboot",
            "-serial", f"file:{run_dir / 'console.log'}", "-monitor", "none",
            "-qmp", f"unix:{run_dir / 'qmp.sock'},server=on,wait=off",
            "-kernel", str(image.kernel), "-initrd", str(image.initrd), "-append", kernel_cmdline(pubkey_blob),
            "-drive", root, "-device", "virtio-blk-pci,drive=root,serial=tbroot"]
    for serial in data_disk_ids(config.disks, config.slog):
        argv += ["-drive", f"file={run_dir / (serial + '.img')},if=none,id={serial},format=raw,discard=unmap",
                 "-device", f"virtio-blk-pci,drive={serial},serial={serial}"]
    argv += ["-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{ssh_port}-:22,"
                        f"hostfwd=tcp:127.0.0.1:{fio_port}-{GUEST_ADDR}:{GUEST_FIO_PORT}",
             "-device", "virtio-net-pci,netdev=n0",
             # a restored VM gets a new generation id, so its kernel reseeds its RNG (no shared randomness)
             "-device", "vmgenid,guid=auto"]
    if incoming:
        argv += ["-incoming", incoming]
    return argv


# ----------------------------------------------------------------------------- runtime directory

def labs_dir() -> Path:
    """Where running labs keep their state: ${XDG_CACHE_HOME:-~/.cache}/tankbench/labs."""
    return labbuild.cache_dir().parent / "labs"


def run_dir(name: str) -> Path:
    """The runtime directory of one lab (created)."""
    d = labs_dir() / check_name(name)
    d.mkdir(parents=True, exist_ok=True)
    return d


def free_port(exclude: Sequence[int] = ()) -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the kernel picks it)."""
    for _ in range(20):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in exclude and port not in _ports_of_other_labs():
            return port
    raise HostError("no free TCP port on 127.0.0.1")


def _ports_of_other_labs() -> set[int]:
    ports: set[int] = set()
    for st in labs_dir().glob("*/state.json"):
        try:
            doc = json.loads(st.read_text())
            ports |= {int(doc["ssh_port"]), int(doc["fio_port"])}
        except (OSError, ValueError, KeyError):
            continue
    return ports


@contextmanager
def _locked(name: str) -> Iterator[Path]:
    d = run_dir(name)
    with open(d / "lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield d
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def read_state(name: str) -> LabState | None:
    """The recorded state of a lab, or None if it was never started (or was shut down)."""
    path = labs_dir() / check_name(name) / "state.json"
    try:
        return LabState.from_json(json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError, KeyError):
        return None


def _write_state(d: Path, state: LabState) -> None:
    tmp = d / "state.json.tmp"
    tmp.write_text(json.dumps(state.to_json(), indent=2) + "\n")
    os.replace(tmp, d / "state.json")


def lab_names() -> list[str]:
    """Names of labs with a runtime directory."""
    return sorted(p.name for p in labs_dir().glob("*") if p.is_dir() and NAME_RE.match(p.name))


# ----------------------------------------------------------------------------- processes

def _proc_alive(pid: int) -> bool:
    child = _CHILDREN.get(pid)
    if child is not None:
        return child.poll() is None
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def is_our_qemu(pid: int, name: str) -> bool:
    """True if pid is alive and its command line is this lab's qemu (checked before any signal)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return False
    return (bool(args) and os.path.basename(args[0]).startswith(b"qemu-system")
            and f"tankbench-lab-{name}".encode() in args and _proc_alive(pid))


def _ssh_keypair(d: Path) -> str:
    key = d / "id_ed25519"
    if not key.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"tankbench-lab-{d.name}",
                        "-f", str(key)], check=True, capture_output=True)
    return (d / "id_ed25519.pub").read_text().split()[1]


def ssh_host(state: LabState) -> SshHost:
    """The SshHost of a running lab (root on 127.0.0.1:<port>, the lab's key and known_hosts)."""
    d = labs_dir() / state.name
    name = "lab" if state.name == "default" else f"lab:{state.name}"
    host = SshHost("127.0.0.1", user="root", port=state.ssh_port, identity=str(d / "id_ed25519"),
                   known_hosts=str(d / "known_hosts"), strict_host_keys=True, connect_timeout=10,
                   control_dir=d, name=name, accelerator=state.accelerator,
                   extra_options=["-o", "HostKeyAlias=tankbench-lab"])
    host.lab_name = state.name  # type: ignore[attr-defined]
    return host


def _kvm_usable(image: labbuild.Image, progress: Progress) -> bool:
    """Probe KVM: boot the lab kernel without a root disk; it must reach its 'cannot mount root' panic fast.

    On some hosts /dev/kvm exists but the guest dies with an emulation failure and hangs, so the probe
    has a short timeout. The answer is cached per host boot.
    """
    forced = os.environ.get("TANKBENCH_LAB_ACCEL", "")
    if forced in ("kvm", "tcg"):
        return forced == "kvm"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    cache = labs_dir() / "kvm-probe.json"
    try:
        doc = json.loads(cache.read_text())
        if doc.get("boot_id") == boot_id:
            return bool(doc["kvm"])
    except (OSError, ValueError, KeyError):
        pass
    progress("lab: probing KVM (10 s at most)")
    log = labs_dir() / "kvm-probe.log"
    log.unlink(missing_ok=True)
    argv = ["qemu-system-x86_64", "-accel", "kvm", "-cpu", "host", "-m", "256", "-nodefaults", "-display", "none",
            "-no-reboot", "-serial", f"file:{log}", "-kernel", str(image.kernel),
            "-append", "console=ttyS0 panic=-1"]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ok = False
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if "Kernel panic" in text or "VFS:" in text:
            ok = True
            break
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    cache.write_text(json.dumps({"boot_id": boot_id, "kvm": ok}))
    return ok


def _console(d: Path) -> str:
    try:
        return (d / "console.log").read_text(errors="replace")
    except OSError:
        return ""


def _make_disks(d: Path, config: LabConfig) -> None:
    for old in d.glob("tb*.img"):
        old.unlink()
    for serial in data_disk_ids(config.disks, config.slog):
        with open(d / f"{serial}.img", "wb") as f:
            f.truncate(config.disk_size if serial.startswith("tbdata") else min(config.disk_size, 4 << 30))


def _start_qemu(argv: list[str], d: Path, keep_console: bool = False) -> subprocess.Popen[bytes]:
    if not keep_console:
        (d / "console.log").write_text("")
    (d / "qmp.sock").unlink(missing_ok=True)
    with open(d / "qemu.log", "wb") as errlog:
        # A session of its own: Ctrl-C in the terminal that ran `lab up` does not kill the lab.
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=errlog, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=d)
    _CHILDREN[proc.pid] = proc
    return proc


def _ready_probe(host: SshHost) -> bool:
    """ssh answers and the zfs module is live."""
    try:
        res = host.run(["cat", "/sys/module/zfs/initstate"], timeout=20)
    except HostError:
        return False
    return res.returncode == 0 and res.stdout.strip() == "live"


def _wait_ready(state: LabState, proc: subprocess.Popen[bytes], d: Path, t0: float, marks: bool = True) -> str:
    """Wait until ssh answers and zfs is loaded. Returns 'ready', 'panic' or raises HostError."""
    host = ssh_host(state)
    try:
        while True:
            console = _console(d)
            if proc.poll() is not None:
                if "Kernel panic" in console or "Oops" in console:
                    return "panic"
                if "forwarding rule" in (d / "qemu.log").read_text(errors="replace"):
                    return "port-taken"  # another process took a port between our check and qemu's bind
                raise HostError(f"lab {state.name}: qemu exited ({proc.returncode}) during boot: "
                                f"{(d / 'qemu.log').read_text(errors='replace')[-800:]}{console[-1500:]}")
            if "Kernel panic" in console or "Oops:" in console:
                return "panic"  # oops=panic + panic=-1 normally make qemu exit; a hung qemu is killed instead
            if "LABMARK init-start" not in console and time.monotonic() - t0 > BOOT_TIMEOUT / 2:
                return "panic"  # hung before userspace: count it as a failed boot and retry
            if "LABMARK zfs-failed" in console:
                raise HostError(f"lab {state.name}: `modprobe zfs` failed in the guest; console log: "
                                f"{d / 'console.log'}\n{console[-1500:]}")
            booted = not marks or ("LABMARK sshd-started" in console and "LABMARK zfs-loaded" in console)
            if booted and _ready_probe(host):
                return "ready"
            if time.monotonic() - t0 > BOOT_TIMEOUT:
                raise HostError(f"lab {state.name}: not ready after {BOOT_TIMEOUT:.0f} s; console log "
                                f"{d / 'console.log'}:\n{console[-1500:]}")
            time.sleep(0.5)
    finally:
        host.close()


def _known_hosts(d: Path, image: labbuild.Image) -> None:
    (d / "known_hosts").write_text(f"tankbench-lab {image.host_key}\n")


def _validate(config: LabConfig) -> None:
    if config.disks < 0 or config.disks > 16:
        raise UserError(f"--disks {config.disks} is out of range", "use 0 to 16 data disks")
    if config.memory_mb < 1024:
        raise UserError(f"--memory {config.memory_mb} is too small", "the guest needs at least 1024 MiB for zfs")
    if config.cpus < 1 or config.cpus > 64:
        raise UserError(f"--cpus {config.cpus} is out of range", "use 1 to 64")


def up(name: str = "default", config: LabConfig | None = None, progress: Progress | None = None,
       *, reuse: bool = True, overlay: bool = False, restore: bool = False) -> LabState:
    """Boot a lab (or return the running one): returns once ssh answers and zfs is loaded.

    overlay=True puts the root disk's writes in a qcow2 file in the lab's directory instead of qemu's
    hidden snapshot file, so that the VM state can be saved and restored (see save_state/restore).
    restore=True boots from a VM state saved right after a boot of the same image and config (saving one
    first if needed): seconds instead of half a minute under TCG. Falls back to a normal boot on any failure.
    """
    config = config or LabConfig()
    progress = progress or _stderr
    check_name(name)
    _validate(config)
    with _locked(name) as d:
        state = read_state(name)
        if state is not None and is_our_qemu(state.pid, name):
            if reuse:
                if (state.config.disks, state.config.slog) != (config.disks, config.slog):
                    raise UserError(f"lab {name!r} is up with {state.config.disks} disks"
                                    f"{' + slog' if state.config.slog else ''}, not {config.disks}"
                                    f"{' + slog' if config.slog else ''}",
                                    f"run `tankbench lab down --name {name}` first, or use another --name")
                progress(f"lab {name}: already up (pid {state.pid}, ssh 127.0.0.1:{state.ssh_port})")
                return state
            raise UserError(f"lab {name!r} is already up", f"run `tankbench lab down --name {name}` first")
        if state is not None:
            _cleanup(d)  # stale: qemu is gone (host rebooted, killed)
        image = labbuild.ensure_image(progress)
        accel = "kvm" if _kvm_usable(image, progress) else "tcg"
        if restore:
            restored = _up_restored(name, d, image, config, accel, progress)
            if restored is not None:
                return restored
        attempt = 0
        port_retries = 3
        while attempt < 2:
            attempt += 1
            outcome, state = _boot(name, d, image, config, accel, progress, panics=attempt - 1,
                                   overlay=d / "root.qcow2" if overlay else None)
            if outcome == "ready":
                return state
            if outcome == "port-taken" and port_retries > 0:
                port_retries -= 1
                attempt -= 1
                progress(f"lab {name}: a forwarded port was taken meanwhile; retrying with new ports")
                _reap(state.pid)
                continue
            # A guest panic (rare MTTCG/static-key race): qemu exited because of panic=-1 + -no-reboot.
            shutil.copy(d / "console.log", d / f"console.panic{attempt}.log")
            progress(f"lab {name}: the guest panicked during boot; retrying once")
            _kill(state)
        _cleanup(d)
        raise HostError(f"lab {name}: the guest panicked twice during boot; see {d}/console.panic*.log")


def _boot(name: str, d: Path, image: labbuild.Image, config: LabConfig, accel: str, progress: Progress, *,
          panics: int = 0, overlay: Path | None = None, incoming: str | None = None) -> tuple[str, LabState]:
    """Start qemu and wait for ssh + zfs; ('ready'|'panic', state). Cleans up and re-raises on failure."""
    blob = _ssh_keypair(d)
    _known_hosts(d, image)
    if incoming is None:
        _make_disks(d, config)
        if overlay is not None:
            overlay.unlink(missing_ok=True)
            subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", str(image.rootfs), "-F", "raw",
                            str(overlay)], check=True, capture_output=True)
    ssh_port = free_port()
    fio_port = free_port(exclude=[ssh_port])
    argv = qemu_argv(name=name, image=image, config=config, accelerator=accel, ssh_port=ssh_port,
                     fio_port=fio_port, run_dir=d, pubkey_blob=blob, root_overlay=overlay, incoming=incoming)
    t0 = time.monotonic()
    what = "restoring saved state" if incoming else "booting"
    progress(f"lab {name}: {what} ({accel}, {config.cpus} cpus, {config.memory_mb} MiB, "
             f"{config.disks} data disks{' + slog' if config.slog else ''}; ssh 127.0.0.1:{ssh_port})")
    proc = _start_qemu(argv, d, keep_console=incoming is not None)
    state = LabState(name=name, pid=proc.pid, ssh_port=ssh_port, fio_port=fio_port, accelerator=accel,
                     config=config, image_key=image.key, image_dir=str(image.dir), started_at=time.time(),
                     kernel_abi=image.versions.kernel_abi, zfs_version=image.versions.zfs_version,
                     panics=panics, extra={"overlay": overlay is not None, "restored": incoming is not None})
    _write_state(d, state)
    try:
        if incoming:
            _resume_after_incoming(d, proc)
        outcome = _wait_ready(state, proc, d, t0, marks=incoming is None)
    except BaseException:
        _kill(state)
        _cleanup(d)
        raise
    if outcome == "ready":
        state.ready_seconds = round(time.monotonic() - t0, 1)
        _write_state(d, state)
        progress(f"lab {name}: ready in {state.ready_seconds:.0f} s (ssh and zfs)")
    return outcome, state


# ----------------------------------------------------------------------------- saved VM state (experiment)

def qmp(d: Path, command: str, arguments: dict[str, object] | None = None, timeout: float = 30) -> object:
    """Send one command to a lab's QMP socket and return its 'return' value."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(d / "qmp.sock"))
        f = s.makefile("rwb")

        def reply() -> dict[str, object]:
            while True:
                line = f.readline()
                if not line:
                    raise HostError("QMP connection closed")
                msg = json.loads(line)
                if "return" in msg or "error" in msg:
                    return dict(msg)

        f.readline()  # greeting
        for cmd, args in (("qmp_capabilities", None), (command, arguments)):
            f.write(json.dumps({"execute": cmd, **({"arguments": args} if args else {})}).encode() + b"\n")
            f.flush()
            msg = reply()
            if "error" in msg:
                raise HostError(f"QMP {cmd}: {msg['error']}")
        return msg["return"]


def _resume_after_incoming(d: Path, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    """The state was saved paused, so the restored VM waits paused: continue it once loading is done."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            st = qmp(d, "query-status")
        except (OSError, HostError):
            time.sleep(0.1)
            continue
        if isinstance(st, dict) and st.get("status") in ("paused", "postmigrate", "prelaunch"):
            qmp(d, "cont")
            return
        if isinstance(st, dict) and st.get("status") == "running":
            return
        time.sleep(0.1)
    raise HostError(f"the saved VM state did not load within {timeout:.0f} s (see {d / 'qemu.log'})")


@functools.cache
def qemu_version() -> str:
    """`qemu-system-x86_64 --version`'s first line (a saved VM state only loads into the same qemu)."""
    try:
        out = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UserError("qemu-system-x86_64 is not installed", "run ./scripts/setup (as root)") from e
    return out.splitlines()[0] if out else "unknown"


def saved_key(image: labbuild.Image, config: LabConfig, accelerator: str) -> str:
    """What a saved VM state depends on: image, every qemu device and size, accelerator, qemu build."""
    doc = json.dumps({"image": image.key, "config": asdict(config), "accel": accelerator, "tcg": TCG_THREAD,
                      "qemu": qemu_version()}, sort_keys=True)
    return hashlib.sha256(doc.encode()).hexdigest()[:16]


def _save(d: Path, state: LabState, key: str, progress: Progress) -> Path:
    """Pause a freshly booted lab, write RAM+devices (migration) and the root overlay to <lab>/saved, stop it."""
    out = d / "saved"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    t0 = time.monotonic()
    try:
        qmp(d, "stop")
        qmp(d, "migrate", {"uri": f"exec:cat > {out / 'vmstate.bin'}"})
        while True:
            info = qmp(d, "query-migrate")
            st = info.get("status") if isinstance(info, dict) else None
            if st == "completed":
                break
            if st in ("failed", "cancelled"):
                raise HostError(f"lab {state.name}: saving VM state {st}: {info}")
            time.sleep(0.2)
        # paused, so the overlay matches the memory image exactly
        shutil.copy2(d / "root.qcow2", out / "root.qcow2")
        (out / "state.json").write_text(json.dumps(state.to_json()))
        (out / "key").write_text(key)
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    finally:
        try:
            qmp(d, "quit")
        except (HostError, OSError):
            pass
        _kill(state)
        _cleanup(d)
    progress(f"lab {state.name}: VM state saved in {time.monotonic() - t0:.1f} s "
             f"({(out / 'vmstate.bin').stat().st_size >> 20} MiB)")
    return out


def _restore(name: str, d: Path, image: labbuild.Image, progress: Progress) -> LabState:
    saved = d / "saved"
    old = LabState.from_json(json.loads((saved / "state.json").read_text()))
    _cleanup(d)
    _make_disks(d, old.config)
    shutil.copy2(saved / "root.qcow2", d / "root.qcow2")
    outcome, state = _boot(name, d, image, old.config, old.accelerator, progress, overlay=d / "root.qcow2",
                           incoming=f"exec:cat {saved / 'vmstate.bin'}")
    if outcome != "ready":
        _kill(state)
        _cleanup(d)
        raise HostError(f"lab {name}: the restored guest panicked")
    # the guest's clock stood still while it was saved
    host = ssh_host(state)
    try:
        host.run(["date", "-s", f"@{int(time.time())}"], timeout=30)
    finally:
        host.close()
    return state


def _up_restored(name: str, d: Path, image: labbuild.Image, config: LabConfig, accel: str,
                 progress: Progress) -> LabState | None:
    """Boot from a saved state (saving one first if there is none for this image/config); None on failure."""
    key = saved_key(image, config, accel)
    saved = d / "saved"
    if not ((saved / "key").exists() and (saved / "key").read_text() == key):
        shutil.rmtree(saved, ignore_errors=True)
        try:
            outcome, state = _boot(name, d, image, config, accel, progress, overlay=d / "root.qcow2")
        except HostError as e:
            progress(f"lab {name}: boot for the saved state failed ({e}); booting normally")
            return None
        if outcome != "ready":
            _kill(state)
            _cleanup(d)
            return None
        _save(d, state, key, progress)
    try:
        return _restore(name, d, image, progress)
    except HostError as e:
        progress(f"lab {name}: restoring the saved state failed ({e}); discarding it and booting normally")
        shutil.rmtree(saved, ignore_errors=True)
        return None


def save_state(name: str, progress: Progress | None = None) -> Path:
    """Save a lab booted with overlay=True (no pool created yet) to <lab>/saved and stop it."""
    progress = progress or _stderr
    with _locked(name) as d:
        state = require_up(name)
        if not state.extra.get("overlay"):
            raise UserError(f"lab {name!r} was not booted with a root overlay", "boot it with up(..., overlay=True)")
        image = labbuild.load_image(Path(state.image_dir))
        return _save(d, state, saved_key(image, state.config, state.accelerator), progress)


def restore(name: str, progress: Progress | None = None) -> LabState:
    """Boot a lab from its saved state (fresh blank data disks, new ports); ready when ssh + zfs answer."""
    progress = progress or _stderr
    check_name(name)
    with _locked(name) as d:
        saved = d / "saved"
        if not (saved / "vmstate.bin").exists():
            raise UserError(f"lab {name!r} has no saved state", "boot it once with `tankbench lab up --restore`")
        old = LabState.from_json(json.loads((saved / "state.json").read_text()))
        image = labbuild.load_image(Path(old.image_dir)) if Path(old.image_dir).exists() else None
        if image is None or (saved / "key").read_text() != saved_key(image, old.config, old.accelerator):
            raise UserError(f"the saved state of lab {name!r} is from another image or qemu",
                            "boot it with `tankbench lab up --restore` to save a new one")
        if (st := read_state(name)) is not None and is_our_qemu(st.pid, name):
            raise UserError(f"lab {name!r} is already up", f"run `tankbench lab down --name {name}` first")
        return _restore(name, d, image, progress)


def _kill(state: LabState, grace: float = 10.0) -> None:
    """SIGTERM then SIGKILL the recorded qemu pid, only if it still is this lab's qemu."""
    pid = state.pid
    if not is_our_qemu(pid, state.name):
        _reap(pid)
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _proc_alive(pid):
        time.sleep(0.2)
    if is_our_qemu(pid, state.name):
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and _proc_alive(pid):
            time.sleep(0.1)
    _reap(pid)


def _reap(pid: int) -> None:
    child = _CHILDREN.pop(pid, None)
    if child is not None:
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def _cleanup(d: Path) -> None:
    """Forget a lab that is no longer running: state, disks, sockets (the console log stays for reading)."""
    for p in [d / "state.json", d / "qmp.sock", d / "root.qcow2", *d.glob("tb*.img"), *d.glob("cm-*")]:
        p.unlink(missing_ok=True)


def down(name: str = "default", progress: Progress | None = None, timeout: float = 60.0) -> bool:
    """Shut a lab down cleanly (zpool export -a, sync, power off); kill its qemu only if that fails.

    Returns True if the guest powered off by itself, False if its qemu had to be killed.
    """
    progress = progress or _stderr
    check_name(name)
    if not (labs_dir() / name).is_dir():
        raise UserError(f"no lab named {name!r}", _names_hint())
    with _locked(name) as d:
        state = read_state(name)
        if state is None:
            raise UserError(f"lab {name!r} is not up", "start it with `tankbench lab up"
                            + ("" if name == "default" else f" --name {name}") + "`")
        clean = False
        if is_our_qemu(state.pid, name):
            host = ssh_host(state)
            try:
                res = host.run(["sh", "-c", "zpool export -a; sync; touch /run/tankbench-poweroff"], timeout=30)
                if res.returncode == 0:
                    deadline = time.monotonic() + timeout
                    while time.monotonic() < deadline and _proc_alive(state.pid):
                        time.sleep(0.2)
                    clean = not _proc_alive(state.pid)
            except HostError:
                clean = False
            finally:
                host.close()
            if not clean:
                progress(f"lab {name}: the guest did not power off; stopping qemu (pid {state.pid})")
            _kill(state)
        else:
            _reap(state.pid)
            progress(f"lab {name}: qemu (pid {state.pid}) was no longer running")
        _cleanup(d)
        progress(f"lab {name}: down")
        return clean


def _names_hint() -> str:
    names = [n for n in lab_names() if read_state(n) is not None]
    return f"running labs: {', '.join(names)}" if names else "no lab is up; start one with `tankbench lab up`"


def require_up(name: str) -> LabState:
    """The state of a lab that must be running; UserError (with a hint) otherwise."""
    check_name(name)
    state = read_state(name)
    if state is None or not is_our_qemu(state.pid, name):
        if not (labs_dir() / name).is_dir():
            raise UserError(f"no lab named {name!r}", _names_hint())
        raise UserError(f"lab {name!r} is not up", "start it with `tankbench lab up"
                        + ("" if name == "default" else f" --name {name}") + "`")
    return state


def status(name: str = "default") -> dict[str, object]:
    """A lab's state as a plain dict for `lab status` (state 'up', 'down' or 'stale')."""
    check_name(name)
    state = read_state(name)
    d = labs_dir() / name
    if state is None:
        return {"name": name, "state": "down", "dir": str(d)}
    alive = is_our_qemu(state.pid, name)
    doc: dict[str, object] = {
        "name": name, "state": "up" if alive else "stale", "pid": state.pid, "accelerator": state.accelerator,
        "ssh": f"127.0.0.1:{state.ssh_port}", "ssh_port": state.ssh_port, "fio_server": f"127.0.0.1:{state.fio_port}",
        "fio_port": state.fio_port, "memory_mb": state.config.memory_mb, "cpus": state.config.cpus,
        "disks": guest_disk_paths(state.config.disks, state.config.slog), "disk_size": state.config.disk_size,
        "slog": state.config.slog, "kernel": state.kernel_abi, "zfs": state.zfs_version,
        "image": state.image_key, "uptime_s": round(time.time() - state.started_at, 1),
        "ready_seconds": state.ready_seconds, "dir": str(d), "console_log": str(d / "console.log"),
        "ssh_key": str(d / "id_ed25519"),
    }
    return doc


# ----------------------------------------------------------------------------- API for the runner

def lab_host(name: str = "default", *, disks: int = 2, slog: bool = False,
             progress: Callable[[str], None] | None = None) -> SshHost:
    """The lab as a Host: builds the image if missing, boots the lab unless it is up, returns its SshHost."""
    state = up(name, LabConfig(disks=disks, slog=slog), progress)
    return ssh_host(state)


def lab_data_disks(name: str = "default") -> list[str]:
    """The guest's by-id paths of a running lab's data disks (the log disk, if any, is not included)."""
    state = require_up(name)
    return guest_disk_paths(state.config.disks)


def lab_log_disks(name: str = "default") -> list[str]:
    """The guest's by-id path of the lab's log (SLOG) disk, if it was booted with one."""
    state = require_up(name)
    return guest_disk_paths(0, state.config.slog)


def _fs_type(path: Path) -> str:
    best, fstype = "", "unknown"
    target = str(path.resolve())
    with open("/proc/self/mounts", encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            mp = parts[1].replace("\\040", " ")
            if (target == mp or target.startswith(mp.rstrip("/") + "/")) and len(mp) >= len(best):
                best, fstype = mp, parts[2]
    return fstype


def lab_fingerprint(host: Host) -> dict[str, object]:
    """How the lab emulates hardware, for honest labelling of every run measured in it."""
    name = getattr(host, "lab_name", None)
    if name is None:
        raw = host.name
        name = "default" if raw == "lab" else raw.split(":", 1)[1] if raw.startswith("lab:") else "default"
    state = require_up(name)
    d = labs_dir() / name
    return {
        "accelerator": state.accelerator,
        "lab_disk_backing": f"sparse file on {_fs_type(d)}",
        "lab_memory_mb": state.config.memory_mb,
        "lab_cpus": state.config.cpus,
        "lab_disk_size": state.config.disk_size,
        "lab_image": state.image_key,
        "lab_kernel": state.kernel_abi,
        "lab_zfs": state.zfs_version,
        "lab_emulated": state.accelerator != "kvm",
    }


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
