"""qemu for the lab: its command line (pure), starting it, recognising it, stopping it, KVM probe, QMP."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tankbench.diskmodels import data_disk_ids
from tankbench.errors import HostError
from tankbench.lab import build as labbuild
from tankbench.lab.state import LabConfig, LabState, labs_dir

Progress = Callable[[str], None]

GUEST_ADDR = "10.0.2.15"
#: single-threaded TCG: as fast as MTTCG on 2 cores and free of its rare boot oops (see docs/lab.md)
TCG_THREAD = os.environ.get("TANKBENCH_LAB_TCG_THREAD", "single")
#: extra guest kernel arguments, for experiments (e.g. "initcall_debug")
KERNEL_ARGS = os.environ.get("TANKBENCH_LAB_KERNEL_ARGS", "")
#: qemu processes this Python process started (so they can be reaped, not left as zombies)
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def guest_disk_paths(disks: int, slog: bool = False, l2arc: bool = False) -> list[str]:
    """The guest's stable paths for the data disks (then the log disk, then the cache disk)."""
    return [f"/dev/disk/by-id/virtio-{s}" for s in data_disk_ids(disks, slog, l2arc)]


#: PID 1 of each `LabConfig.init`
INITS = {"lab-init": "/usr/local/sbin/lab-init", "systemd": "/lib/systemd/systemd"}


def kernel_cmdline(pubkey_blob: str, init: str = "lab-init") -> str:
    """The guest kernel's command line: root by label, lab-init (or systemd) as PID 1, panics power the VM off."""
    return (
        f"console=ttyS0 root=LABEL={labbuild.ROOT_LABEL} rw init={INITS[init]} net.ifnames=0 "
        f"quiet loglevel=4 panic=-1 oops=panic lab.sshkey={pubkey_blob}" + (f" {KERNEL_ARGS}" if KERNEL_ARGS else "")
    )


def qemu_argv(
    *,
    name: str,
    image: labbuild.Image,
    config: LabConfig,
    accelerator: str,
    ssh_port: int,
    run_dir: Path,
    pubkey_blob: str,
) -> list[str]:
    """The qemu command line of a lab (pure). The root disk comes first (it is /dev/vda). ssh is the only port
    forwarded to the lab: nothing else in it is reachable from this machine (docs/security.md)."""
    accel = (
        ["-accel", "kvm", "-cpu", "host"]
        if accelerator == "kvm"
        else ["-accel", f"tcg,thread={TCG_THREAD}", "-cpu", "max"]
    )
    argv = [
        "qemu-system-x86_64",
        "-name",
        f"tankbench-lab-{name}",
        *accel,
        "-smp",
        str(config.cpus),
        "-m",
        str(config.memory_mb),
        "-nodefaults",
        "-display",
        "none",
        "-vga",
        "none",
        "-no-reboot",
        "-serial",
        f"file:{run_dir / 'console.log'}",
        "-monitor",
        "none",
        "-qmp",
        f"unix:{run_dir / 'qmp.sock'},server=on,wait=off",
        "-kernel",
        str(image.kernel),
        "-initrd",
        str(image.initrd),
        "-append",
        kernel_cmdline(pubkey_blob, init=config.init),
        "-drive",
        _root_drive(image, config, run_dir),
        "-device",
        "virtio-blk-pci,drive=root,serial=tbroot",
    ]
    argv += _data_disk_args(config, run_dir)
    argv += [
        "-netdev",
        f"user,id=n0,hostfwd=tcp:127.0.0.1:{ssh_port}-:22",
        "-device",
        "virtio-net-pci,netdev=n0",
    ]
    return argv


def _root_drive(image: labbuild.Image, config: LabConfig, run_dir: Path) -> str:
    """The root disk's -drive: the lab's own qcow2 overlay when its root persists, else the image with snapshot=on
    (writes go to a temporary file qemu deletes)."""
    if config.persistent_root:
        return f"file={run_dir / ROOT_OVERLAY},if=none,id=root,format=qcow2"
    return f"file={image.rootfs},if=none,id=root,format=raw,snapshot=on"


def _data_disk_args(config: LabConfig, run_dir: Path) -> list[str]:
    """The data disks' -drive/-device pairs, in the order of their serials (tbdata0…, then the log and cache)."""
    argv: list[str] = []
    for serial in data_disk_ids(config.disks, config.slog, config.l2arc):
        # qemu's default cache (writeback): a guest flush is an fdatasync of the image file. Not cache=unsafe: with
        # flushes dropped, a lab's writes piled up as the host's dirty memory (GBs), and any `sync` on the host (the
        # drain of every local run) then waited minutes for them (447 s seen in CI's integration tests beside a lab)
        argv += [
            "-drive",
            f"file={run_dir / (serial + '.img')},if=none,id={serial},format=raw,discard=unmap",
            "-device",
            f"virtio-blk-pci,drive={serial},serial={serial}",
        ]
    return argv


def proc_alive(pid: int) -> bool:
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
    return (
        bool(args)
        and os.path.basename(args[0]).startswith(b"qemu-system")
        and f"tankbench-lab-{name}".encode() in args
        and proc_alive(pid)
    )


def kvm_usable(image: labbuild.Image, progress: Progress) -> bool:
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
    argv = [
        "qemu-system-x86_64",
        "-accel",
        "kvm",
        "-cpu",
        "host",
        "-m",
        "256",
        "-nodefaults",
        "-display",
        "none",
        "-no-reboot",
        "-serial",
        f"file:{log}",
        "-kernel",
        str(image.kernel),
        "-append",
        "console=ttyS0 panic=-1",
    ]
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


#: a persistent root disk: a qcow2 overlay over the image's rootfs, in the lab's directory
ROOT_OVERLAY = "root.qcow2"


def make_root_overlay(d: Path, image: labbuild.Image) -> None:
    """The persistent root disk of a lab, made once (its writes survive the lab's reboots; `lab down` deletes it)."""
    if (d / ROOT_OVERLAY).exists():
        return
    res = subprocess.run(
        ["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", str(image.rootfs), str(d / ROOT_OVERLAY)],
        capture_output=True,
        text=True,
    )
    if res.returncode != 0:
        raise HostError(f"qemu-img could not make the lab's root overlay: {res.stderr.strip()}")


def make_disks(d: Path, config: LabConfig) -> None:
    for old in d.glob("tb*.img"):
        old.unlink()
    for serial in data_disk_ids(config.disks, config.slog, config.l2arc):
        with open(d / f"{serial}.img", "wb") as f:
            f.truncate(config.disk_size if serial.startswith("tbdata") else min(config.disk_size, 4 << 30))


def start_qemu(argv: list[str], d: Path) -> subprocess.Popen[bytes]:
    """Start qemu in a session of its own (Ctrl-C in the terminal that ran `lab up` does not kill the lab)."""
    (d / "console.log").write_text("")
    (d / "qmp.sock").unlink(missing_ok=True)
    with open(d / "qemu.log", "wb") as errlog:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=errlog, stderr=subprocess.STDOUT, start_new_session=True, cwd=d
        )
    _CHILDREN[proc.pid] = proc
    # reaped the moment it exits, whoever stops it: `lab down` from another process (the CLI, a test) cannot wait
    # for our child, which stayed a zombie in this process for as long as it lived (25 min in one CI run)
    threading.Thread(target=proc.wait, name=f"reap-qemu-{proc.pid}", daemon=True).start()
    return proc


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


def kill(state: LabState, grace: float = 10.0) -> None:
    """SIGTERM then SIGKILL the recorded qemu pid, only if it still is this lab's qemu."""
    pid = state.pid
    if not is_our_qemu(pid, state.name):
        reap(pid)
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and proc_alive(pid):
        time.sleep(0.2)
    if is_our_qemu(pid, state.name):
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and proc_alive(pid):
            time.sleep(0.1)
    reap(pid)


def reap(pid: int) -> None:
    child = _CHILDREN.pop(pid, None)
    if child is not None:
        try:
            child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
