"""The lab as a Host for a campaign: booted (or found up) with the campaign's machine model (disk models, ARC
size), and driven through its LabHost's controls (hosts/lab.py `LabControl`): booted again on its disks when it
died, its machine model set again after a reboot, a port of this machine forwarded to it, shut down when the
campaign booted it. The runner and the kinds ask the Host (revive, after_reboot, forward_port, leave), never this
module by name."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tankbench import diskmodels
from tankbench.diskmodels import MODELS, LabMachine
from tankbench.errors import HostError
from tankbench.hosts.lab import LabHost
from tankbench.lab import vm
from tankbench.lab.qemu import is_our_qemu, qmp
from tankbench.lab.state import (
    LabConfig,
    LabState,
    console,
    free_port,
    lab_fingerprint,
    locked,
    read_state,
    write_state,
)
from tankbench.units import fmt_size

Progress = Callable[[str], None]
#: what the console of a lab whose kernel panicked shows (its qemu may still run: a panic that did not end it)
PANIC_MARKS = ("Kernel panic", "end Kernel panic")


class VmControl:
    """The controls of one lab (hosts/lab.py LabControl), with the machine model the campaign asked for."""

    def __init__(self, machine: LabMachine | None = None) -> None:
        self.machine = machine or LabMachine()

    def revive(self, host: LabHost, note: Progress) -> str | None:
        """A lab whose qemu exited, or whose console shows a kernel panic, is booted again on its disks: the
        crashed boot's console; None when it runs."""
        name = host.lab_name
        state = read_state(name)
        if state is None:
            raise HostError(f"lab {name} was shut down (`tankbench lab down`?); the campaign stops")
        text = console(host.lab_dir)
        alive = is_our_qemu(state.pid, name)
        if alive and not any(m in text for m in PANIC_MARKS):
            return None
        note(
            f"lab {name}: "
            + ("its kernel panicked" if alive else "its qemu exited (the kernel crashed or qemu was killed)")
            + "; booting it again on its disks"
        )
        new = vm.reboot(name, note)
        host.rebind(new.ssh_port, lab_fingerprint(new))
        return text

    def apply_machine(self, host: LabHost, note: Progress) -> None:
        """After a reboot: the disk models and the ARC size again (a fresh boot has neither)."""
        apply_machine(host.lab_name, host, self.machine, note)

    def forward(self, host: LabHost, port: int) -> tuple[int, str]:
        """A free port of this machine's loopback forwarded to the lab's `port` (QMP `hostfwd_add`: no change to
        how labs boot): (that port, its rule)."""
        local = free_port()
        rule = f"tcp:127.0.0.1:{local}"
        said = qmp(host.lab_dir, "human-monitor-command", {"command-line": f"hostfwd_add n0 {rule}-:{port}"})
        if str(said).strip():  # HMP says nothing when it worked
            raise HostError(f"{host.name}: forwarding 127.0.0.1:{local} to its port {port}: {said}")
        return local, rule

    def unforward(self, host: LabHost, rule: str) -> None:
        """Remove a forward (QMP `hostfwd_remove`; one that is gone already is no error)."""
        qmp(host.lab_dir, "human-monitor-command", {"command-line": f"hostfwd_remove n0 {rule}"})

    def down(self, host: LabHost, note: Progress) -> None:
        vm.down(host.lab_name, note)

    def unmodel(self, host: LabHost, note: Progress) -> None:
        """A lab that stays up keeps no disk model or ARC size of this campaign: a later campaign that reaches it as
        an ssh host (a host file) sets none, and would measure throttled disks without knowing (docs/unattended.md)."""
        state = read_state(host.lab_name)
        machine = dict(state.extra.get("machine", {})) if state is not None else {}  # type: ignore[call-overload]
        modelled = any(": not modelled" not in str(d) for d in dict(machine.get("lab_disk_models", {})).values())
        if not (modelled or machine.get("lab_arc_max")):
            return
        try:
            apply_machine(host.lab_name, host, LabMachine(), note)
        except HostError as e:  # a lab that went away meanwhile has nothing to keep
            note(f"lab {host.lab_name}: its disk models could not be set back to none ({e})")


def lab_host(
    name: str = "default",
    *,
    disks: int = 2,
    slog: bool = False,
    machine: LabMachine | None = None,
    progress: Callable[[str], None] | None = None,
) -> LabHost:
    """The lab as a Host: builds the image if missing, boots the lab unless it is up, applies the campaign's
    disk models and ARC size (`machine`; no models and the module's ARC when None), returns its LabHost with its
    controls (`started_here` tells whether this call booted it)."""
    machine = machine or LabMachine()
    state, booted = vm.up_booted(name, LabConfig(disks=disks, slog=slog, l2arc=machine.l2arc), progress)
    host = vm.ssh_host(state, started_here=booted)
    host.lab_control = VmControl(machine)
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
        state = vm.require_up(name)
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
        state.extra["machine"] = {
            **diskmodels.fingerprint(models, machine.arc_max, c_max, machine.link_mbps),
            "lab_vdev_open_timeout_ms": _open_timeout(name, host),
        }
        write_state(d, state)
    progress(
        f"lab {name}: disks {diskmodels.summary(models)}; ARC max "
        + (fmt_size(c_max) if machine.arc_max else f"{fmt_size(c_max)} (the module's default)")
    )
    return state


#: `zpool create` on a whole disk partitions it and then waits zfs_vdev_open_timeout_ms (1 s by default) for udev's
#: link to the new partition: on the lab's throttled disks under TCG, re-creating a pool on disks a previous campaign
#: used took longer ("open error=2 timeout=1003444490/1000000000" in the ZFS debug log) and failed "cannot create
#: 'tblimit': no such pool or dataset", the driver's retry too (bench/limiter, 3 times). The lab's own kernel waits
#: 30 s (a real host's parameter is the user's: tankbench never changes it).
OPEN_TIMEOUT_MS = 30000


def _open_timeout(name: str, host: LabHost) -> int:
    """Set the lab kernel's zfs_vdev_open_timeout_ms to OPEN_TIMEOUT_MS and read it back (the runs' fingerprint
    records it: a fact of the lab's kernel, like the ARC's size); 0 where the module has no such parameter."""
    p = "/sys/module/zfs/parameters/zfs_vdev_open_timeout_ms"
    res = host.run(
        ["sh", "-c", f"if [ -e {p} ]; then echo {OPEN_TIMEOUT_MS} > {p} && cat {p}; else echo 0; fi"], timeout=60
    )
    got = res.stdout.strip()
    if res.returncode != 0 or not got.isdigit() or int(got) not in (0, OPEN_TIMEOUT_MS):
        raise HostError(f"lab {name}: could not set zfs_vdev_open_timeout_ms: {got} {res.stderr.strip()}")
    return int(got)


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


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
