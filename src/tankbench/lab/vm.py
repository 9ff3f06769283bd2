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
from typing import Any

from tankbench import bootlog
from tankbench.errors import HostError, UserError
from tankbench.hosts.lab import LabHost
from tankbench.lab import build as labbuild
from tankbench.lab import diskmodels
from tankbench.lab.diskmodels import MODELS, LabMachine
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
from tankbench.units import fmt_size

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
    return _up(name, config, progress, reuse=reuse, strict=strict)[0]


def _up(
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
    blob = _ssh_keypair(d)
    _known_hosts(d, image)
    if not keep_disks:
        make_disks(d, config)
    if config.persistent_root:
        make_root_overlay(d, image)
    ssh_port = free_port()
    fio_port = free_port(exclude=[ssh_port])
    argv = qemu_argv(
        name=name,
        image=image,
        config=config,
        accelerator=accel,
        ssh_port=ssh_port,
        fio_port=fio_port,
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
        fio_port=fio_port,
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
        "fio_server": f"127.0.0.1:{state.fio_port}",
        "fio_port": state.fio_port,
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


# ----------------------------------------------------------------------------- API for the runner


def lab_host(
    name: str = "default",
    *,
    disks: int = 2,
    slog: bool = False,
    machine: LabMachine | None = None,
    progress: Callable[[str], None] | None = None,
) -> LabHost:
    """The lab as a Host: builds the image if missing, boots the lab unless it is up, applies the campaign's
    disk models and ARC size (`machine`; no models and the module's ARC when None), returns its LabHost
    (`started_here` tells whether this call booted it)."""
    machine = machine or LabMachine()
    state, booted = _up(name, LabConfig(disks=disks, slog=slog, l2arc=machine.l2arc), progress)
    host = ssh_host(state, started_here=booted)
    try:
        state = apply_machine(name, host, machine, progress or _stderr)
    except BaseException:
        host.close()
        raise
    host.facts = lab_fingerprint(state)
    return host


def apply_machine(name: str, host: LabHost, machine: LabMachine, progress: Progress) -> LabState:
    """Throttle each of a running lab's drives to its model (QMP block_set_io_throttle: at once, no reboot)
    and set the ARC's maximum; read both back and record them in the lab's state (the runs' fingerprint).

    Every drive is set, to `none` too, so a lab reused from an earlier campaign never keeps its models."""
    with locked(name) as d:
        state = require_up(name)
        models = machine.models(state.config.disks, state.config.slog)
        for drive, model in models.items():
            qmp(d, "block_set_io_throttle", {"device": drive, **MODELS[model].throttle()})
        applied = {str(b["device"]): b for b in _block_info(d) if str(b.get("device", "")) in models}
        for drive, model in models.items():
            want = MODELS[model].throttle()
            got = applied.get(drive, {})
            if got.get("bps", 0) != want["bps"] or got.get("iops", 0) != want["iops"]:
                raise HostError(f"lab {name}: drive {drive} did not take disk model {model!r} (QMP says {got})")
        # the module's own c_max, read before anything changed it (zfs_arc_max = 0 does not restore it)
        if "arc_default" not in state.extra:
            state.extra["arc_default"] = _arc_c_max(name, host, "")
        default = int(state.extra["arc_default"])  # type: ignore[call-overload]
        arc = machine.arc_max or default
        c_max = _arc_c_max(name, host, f"echo {arc} > /sys/module/zfs/parameters/zfs_arc_max && ")
        if c_max != arc:
            raise HostError(
                f"lab {name}: zfs_arc_max {arc} was not taken (the ARC's c_max is {c_max}); "
                "it cannot be set below zfs_arc_min (1/32 of the guest's memory)"
            )
        _shape_link(name, host, machine.link_mbps)
        state.extra["machine"] = diskmodels.fingerprint(models, machine.arc_max, c_max, machine.link_mbps)
        write_state(d, state)
    progress(
        f"lab {name}: disks {diskmodels.summary(models)}; ARC max "
        + (fmt_size(c_max) if machine.arc_max else f"{fmt_size(c_max)} (the module's default)")
    )
    return state


def _shape_link(name: str, host: LabHost, mbps: int) -> None:
    """Shape the lab's NIC to its link model (0: unshaped) and check the qdisc took the rate."""
    res = host.run(["sh", "-c", diskmodels.link_script("eth0", mbps)], timeout=60)
    shaped = f"rate {mbps}Mbit" in res.stdout or f"rate {mbps // 1000}Gbit" in res.stdout
    if (mbps and (res.returncode != 0 or not shaped)) or (not mbps and "tbf" in res.stdout):
        raise HostError(f"lab {name}: the network link model of {mbps} Mb/s was not taken: {res.stdout} {res.stderr}")


def _arc_c_max(name: str, host: LabHost, before: str) -> int:
    """The ARC's c_max in the guest, after the shell command `before` (e.g. setting zfs_arc_max)."""
    res = host.run(["sh", "-c", before + "awk '$1 == \"c_max\" {print $3}' /proc/spl/kstat/zfs/arcstats"], timeout=60)
    if res.returncode != 0 or not res.stdout.strip().isdigit():
        raise HostError(f"lab {name}: could not set or read the ARC's size: {res.stderr.strip()}")
    return int(res.stdout.strip())


def _block_info(d: Path) -> list[dict[str, Any]]:
    """query-block's drives with their throttle settings: [{'device': id, 'bps': .., 'iops': ..}, ...]."""
    out: list[dict[str, Any]] = []
    blocks = qmp(d, "query-block")
    for b in blocks if isinstance(blocks, list) else []:
        inserted = b.get("inserted") or {}
        out.append({"device": b.get("device", ""), "bps": inserted.get("bps", 0), "iops": inserted.get("iops", 0)})
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
