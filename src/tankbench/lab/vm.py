"""The lab's lifecycle: boot it (KVM if it works, else TCG), wait until ssh and zfs answer, shut it down.

Where its state lives is lab/state.py; how qemu is started, recognised and stopped is lab/qemu.py; the lab as
a Host is hosts/lab.py (fed the facts of lab_fingerprint).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict

from tankbench import bootlog
from tankbench.errors import HostError, UserError
from tankbench.hosts.lab import LabHost
from tankbench.lab import build as labbuild
from tankbench.lab.qemu import (
    INITS,
    guest_disk_paths,
    is_our_qemu,
    kill,
    kvm_usable,
    make_disks,
    make_root_overlay,
    proc_alive,
    qemu_argv,
    qmp,
    reap,
    start_qemu,
)
from tankbench.lab.state import (
    LabConfig,
    LabState,
    check_name,
    cleanup,
    console,
    free_port,
    lab_fingerprint,
    lab_names,
    labs_dir,
    locked,
    read_state,
    write_state,
)

Progress = Callable[[str], None]

#: how long a boot may take before it counts as hung (TCG boots in ~30-60 s)
BOOT_TIMEOUT = float(os.environ.get("TANKBENCH_LAB_BOOT_TIMEOUT", "300"))


def _ssh_keypair(d: Path) -> str:
    key = d / "id_ed25519"
    if not key.exists():
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"tankbench-lab-{d.name}", "-f", str(key)],
            check=True,
            capture_output=True,
        )
    return (d / "id_ed25519.pub").read_text().split()[1]


def ssh_host(state: LabState, *, started_here: bool = False) -> LabHost:
    """The Host of a running lab (root on 127.0.0.1:<port>, the lab's key and known_hosts)."""
    return LabHost(
        state.name,
        ssh_port=state.ssh_port,
        lab_dir=labs_dir() / state.name,
        accelerator=state.accelerator,
        facts=lab_fingerprint(state),
        started_here=started_here,
    )


def _ready_probe(host: LabHost) -> bool:
    """ssh answers and the zfs module is live."""
    try:
        res = host.run(["cat", "/sys/module/zfs/initstate"], timeout=20)
    except HostError:
        return False
    return res.returncode == 0 and res.stdout.strip() == "live"


def _wait_ready(state: LabState, proc: subprocess.Popen[bytes], d: Path, t0: float) -> str:
    """Wait until ssh answers and zfs is loaded. Returns 'ready', 'panic' or raises HostError."""
    host = ssh_host(state)
    try:
        while True:
            text = console(d)
            if proc.poll() is not None:
                if "Kernel panic" in text or "Oops" in text:
                    return "panic"
                if "forwarding rule" in (d / "qemu.log").read_text(errors="replace"):
                    return "port-taken"  # another process took a port between our check and qemu's bind
                raise HostError(
                    f"lab {state.name}: qemu exited ({proc.returncode}) during boot: "
                    f"{(d / 'qemu.log').read_text(errors='replace')[-800:]}{text[-1500:]}"
                )
            if "Kernel panic" in text or "Oops:" in text:
                return "panic"  # oops=panic + panic=-1 normally make qemu exit; a hung qemu is killed instead
            if (
                state.config.init == "lab-init"
                and "LABMARK init-start" not in text
                and time.monotonic() - t0 > BOOT_TIMEOUT / 2
            ):
                return "panic"  # hung before userspace: count it as a failed boot and retry
            if "LABMARK zfs-failed" in text:
                raise HostError(
                    f"lab {state.name}: `modprobe zfs` failed in the guest; console log: "
                    f"{d / 'console.log'}\n{text[-1500:]}"
                )
            # systemd as PID 1 writes no LABMARKs: its units load zfs and start sshd; ssh + zfs is the probe
            booted = state.config.init == "systemd" or ("LABMARK sshd-started" in text and "LABMARK zfs-loaded" in text)
            if booted and _ready_probe(host):
                return "ready"
            if time.monotonic() - t0 > BOOT_TIMEOUT:
                raise HostError(
                    f"lab {state.name}: not ready after {BOOT_TIMEOUT:.0f} s; console log "
                    f"{d / 'console.log'}:\n{text[-1500:]}"
                )
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
    if config.init not in INITS:
        raise UserError(f"lab init {config.init!r} is unknown", f"use one of: {', '.join(INITS)}")


def up(
    name: str = "default",
    config: LabConfig | None = None,
    progress: Progress | None = None,
    *,
    reuse: bool = True,
    strict: bool = True,
) -> LabState:
    """Boot a lab (or return the running one): returns once ssh answers and zfs is loaded. A running lab with
    other disks is an error when `strict`, else it is returned as it runs."""
    return up_booted(name, config, progress, reuse=reuse, strict=strict)[0]


def up_booted(
    name: str, config: LabConfig | None, progress: Progress | None, *, reuse: bool = True, strict: bool = True
) -> tuple[LabState, bool]:
    """(state, booted here). A lab already up is reused when `reuse`; with `strict`, only if it has the
    disks asked for (a campaign's pool needs them), otherwise it is reported as it is."""
    config = config or LabConfig()
    progress = progress or _stderr
    check_name(name)
    _validate(config)
    with locked(name) as d:
        state = read_state(name)
        if state is not None and is_our_qemu(state.pid, name):
            if not reuse:
                raise UserError(f"lab {name!r} is already up", f"run `tankbench lab down --name {name}` first")
            if strict and _shape(state.config) != _shape(config):
                raise UserError(
                    f"lab {name!r} is up with {_disks(state.config)}, not {_disks(config)}",
                    f"run `tankbench lab down --name {name}` first, or use another lab name",
                )
            progress(
                f"lab {name}: already up (pid {state.pid}, ssh 127.0.0.1:{state.ssh_port}, {_disks(state.config)})"
            )
            return state, False
        if state is not None:
            cleanup(d)  # stale: qemu is gone (host rebooted, killed)
        image = labbuild.ensure_image(progress)
        accel = "kvm" if kvm_usable(image, progress) else "tcg"
        attempt = 0
        port_retries = 3
        while attempt < 2:
            attempt += 1
            outcome, state = _boot(name, d, image, config, accel, progress, panics=attempt - 1)
            if outcome == "ready":
                return state, True
            if outcome == "port-taken" and port_retries > 0:
                port_retries -= 1
                attempt -= 1
                progress(f"lab {name}: a forwarded port was taken meanwhile; retrying with new ports")
                reap(state.pid)
                continue
            # A guest panic (rare MTTCG/static-key race): qemu exited because of panic=-1 + -no-reboot.
            shutil.copy(d / "console.log", d / f"console.panic{attempt}.log")
            progress(f"lab {name}: the guest panicked during boot; retrying once")
            kill(state)
        cleanup(d)
        raise HostError(f"lab {name}: the guest panicked twice during boot; see {d}/console.panic*.log")


def _shape(config: LabConfig) -> tuple[int, bool, bool]:
    return config.disks, config.slog, config.l2arc


def _disks(config: LabConfig) -> str:
    return (
        f"{config.disks} data disk{'s' if config.disks != 1 else ''}{' + slog' if config.slog else ''}"
        f"{' + cache disk' if config.l2arc else ''}"
    )


def _prepare_run_dir(d: Path, image: labbuild.Image, config: LabConfig, keep_disks: bool) -> str:
    """The lab's run directory before a boot: its ssh key pair (the public blob returned), known_hosts, new empty
    data disks unless `keep_disks`, the root overlay of a persistent root."""
    blob = _ssh_keypair(d)
    _known_hosts(d, image)
    if not keep_disks:
        make_disks(d, config)
    if config.persistent_root:
        make_root_overlay(d, image)
    return blob


def _boot(
    name: str,
    d: Path,
    image: labbuild.Image,
    config: LabConfig,
    accel: str,
    progress: Progress,
    *,
    panics: int = 0,
    keep_disks: bool = False,
) -> tuple[str, LabState]:
    """Start qemu and wait for ssh + zfs; ('ready'|'panic'|'port-taken', state). Cleans up and re-raises on
    failure. `keep_disks`: boot on the data disks the lab had (a reboot after a crash), else new empty ones."""
    blob = _prepare_run_dir(d, image, config, keep_disks)
    ssh_port = free_port()
    argv = qemu_argv(
        name=name,
        image=image,
        config=config,
        accelerator=accel,
        ssh_port=ssh_port,
        run_dir=d,
        pubkey_blob=blob,
    )
    t0 = time.monotonic()
    progress(
        f"lab {name}: booting ({accel}, {config.cpus} cpus, {config.memory_mb} MiB, "
        f"{_disks(config)}; ssh 127.0.0.1:{ssh_port})"
    )
    proc = start_qemu(argv, d)
    state = LabState(
        name=name,
        pid=proc.pid,
        ssh_port=ssh_port,
        accelerator=accel,
        config=config,
        image_key=image.key,
        image_dir=str(image.dir),
        started_at=time.time(),
        kernel_abi=image.versions.kernel_abi,
        zfs_version=image.versions.zfs_version,
        panics=panics,
    )
    write_state(d, state)
    try:
        outcome = _wait_ready(state, proc, d, t0)
    except BaseException:
        kill(state)
        cleanup(d)
        raise
    if outcome == "ready":
        state.ready_seconds = round(time.monotonic() - t0, 1)
        write_state(d, state)
        progress(f"lab {name}: ready in {state.ready_seconds:.0f} s (ssh and zfs)")
        bootlog.record("lab", name, state.ready_seconds, accelerator=accel, panics=panics)
    return outcome, state


def down(name: str = "default", progress: Progress | None = None, timeout: float = 60.0) -> bool:
    """Shut a lab down cleanly (zpool export -a, sync, power off); kill its qemu only if that fails.

    Returns True if the guest powered off by itself, False if its qemu had to be killed.
    """
    progress = progress or _stderr
    check_name(name)
    if not (labs_dir() / name).is_dir():
        raise UserError(f"no lab named {name!r}", _names_hint())
    with locked(name) as d:
        state = read_state(name)
        if state is None:
            raise UserError(
                f"lab {name!r} is not up",
                "start it with `tankbench lab up" + ("" if name == "default" else f" --name {name}") + "`",
            )
        clean = False
        if is_our_qemu(state.pid, name):
            _resume_if_paused(d, name, progress)
            host = ssh_host(state)
            try:
                # lab-init powers off when the file appears; systemd as PID 1 is asked to
                res = host.run(
                    ["sh", "-c", "zpool export -a; sync; touch /run/tankbench-poweroff; " + SYSTEMD_OFF], timeout=30
                )
                if res.returncode == 0:
                    deadline = time.monotonic() + timeout
                    while time.monotonic() < deadline and proc_alive(state.pid):
                        time.sleep(0.2)
                    clean = not proc_alive(state.pid)
            except HostError:
                clean = False
            finally:
                host.close()
            if not clean:
                progress(f"lab {name}: the guest did not power off; stopping qemu (pid {state.pid})")
            kill(state)
        else:
            reap(state.pid)
            progress(f"lab {name}: qemu (pid {state.pid}) was no longer running")
        cleanup(d)
        progress(f"lab {name}: down")
        return clean


def _resume_if_paused(d: Path, name: str, progress: Progress) -> None:
    """A paused lab (stopped by a test or a debugger, or by qemu itself on a write error when the host's disk
    filled: werror=stop) cannot answer ssh: `lab down` waited 30 s for it and then killed qemu. Continue it first,
    so it exports its pools and powers off cleanly."""
    try:
        status = qmp(d, "query-status", timeout=5)
        state = str(status.get("status", "")) if isinstance(status, dict) else ""
        if state in ("paused", "io-error", "suspended"):
            progress(f"lab {name}: paused ({state}); continuing it to power it off cleanly")
            qmp(d, "cont", timeout=5)
    except (OSError, HostError, ValueError):
        pass  # no monitor: ssh decides, as before


#: under systemd (a lab booted with init = "systemd"), `lab down` powers off through it
SYSTEMD_OFF = 'if [ "$(cat /proc/1/comm)" = systemd ]; then systemctl poweroff --no-block; fi'


def reboot(name: str, progress: Progress | None = None, config: LabConfig | None = None) -> LabState:
    """Boot a lab again on the data disks it had (its pool survives, as on a machine that crashed and rebooted):
    after its kernel panicked (qemu exits: panic=-1, -no-reboot) or hung (its qemu is stopped first). The
    console log of the crashed boot is kept as console.crash-<time>.log; the root disk starts fresh (snapshot)
    unless the lab has a persistent root. `config`: boot with these settings instead (same disks), e.g. another
    init."""
    progress = progress or _stderr
    check_name(name)
    with locked(name) as d:
        old = read_state(name)
        if old is None:
            raise HostError(f"lab {name}: no state to reboot from (it was shut down)")
        if is_our_qemu(old.pid, name):
            progress(f"lab {name}: stopping its hung qemu (pid {old.pid}) to reboot it")
            kill(old)
        else:
            reap(old.pid)
        if (d / "console.log").exists():
            shutil.copy(d / "console.log", d / f"console.crash-{int(time.time())}.log")
        image = labbuild.ensure_image(progress)
        for attempt in range(3):
            outcome, state = _boot(
                name, d, image, config or old.config, old.accelerator, progress, panics=attempt, keep_disks=True
            )
            if outcome == "ready":
                return state
            progress(f"lab {name}: the reboot did not come up ({outcome}); trying again")
            kill(state)
        raise HostError(f"lab {name}: the reboot failed three times; see {d}/console.log")


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
        raise UserError(
            f"lab {name!r} is not up",
            "start it with `tankbench lab up" + ("" if name == "default" else f" --name {name}") + "`",
        )
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
        "name": name,
        "state": "up" if alive else "stale",
        "pid": state.pid,
        "accelerator": state.accelerator,
        "ssh": f"127.0.0.1:{state.ssh_port}",
        "ssh_port": state.ssh_port,
        "memory_mb": state.config.memory_mb,
        "cpus": state.config.cpus,
        "disks": guest_disk_paths(state.config.disks, state.config.slog, state.config.l2arc),
        "disk_size": state.config.disk_size,
        "slog": state.config.slog,
        "l2arc": state.config.l2arc,
        "machine": state.extra.get("machine", {}),
        "kernel": state.kernel_abi,
        "zfs": state.zfs_version,
        "image": state.image_key,
        "uptime_s": round(time.time() - state.started_at, 1),
        "ready_seconds": state.ready_seconds,
        "dir": str(d),
        "console_log": str(d / "console.log"),
        "ssh_key": str(d / "id_ed25519"),
    }
    return doc


class LabEntry(TypedDict, total=False):
    """One lab in `lab list`: name, state and held_bytes always; pid and ssh for a running lab."""

    name: str
    state: str  # up | stale | down
    held_bytes: int
    pid: int
    ssh: str


def listing() -> list[LabEntry]:
    """Every lab with a runtime directory on this machine: its name, state (up; stale: recorded as up, its qemu
    gone, its disks still here; down), the bytes its files hold (disk images are sparse: what they allocated), and
    the pid and ssh address of a running one."""
    out: list[LabEntry] = []
    for name in lab_names():
        doc = status(name)
        held = 0
        for p in (labs_dir() / name).iterdir():
            try:
                held += p.stat().st_blocks * 512 if p.is_file() else 0
            except OSError:  # removed meanwhile (a lab going down)
                pass
        entry = LabEntry(name=name, state=str(doc["state"]), held_bytes=held)
        if doc["state"] == "up":
            entry["pid"], entry["ssh"] = int(str(doc["pid"])), str(doc["ssh"])
        out.append(entry)
    return out


def lab_data_disks(name: str = "default") -> list[str]:
    """The guest's by-id paths of a running lab's data disks (the log disk, if any, is not included)."""
    state = require_up(name)
    return guest_disk_paths(state.config.disks)


def lab_cache_disks(name: str = "default") -> list[str]:
    """The guest's by-id path of the lab's cache (L2ARC) disk, if it was booted with one."""
    state = require_up(name)
    return guest_disk_paths(0, False, state.config.l2arc)


def lab_log_disks(name: str = "default") -> list[str]:
    """The guest's by-id path of the lab's log (SLOG) disk, if it was booted with one."""
    state = require_up(name)
    return guest_disk_paths(0, state.config.slog)


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
