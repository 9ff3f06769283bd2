"""`tankbench lab {build,up,status,list,ssh,down}`: the throwaway VM with real OpenZFS."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from tankbench.cli._common import print_json
from tankbench.errors import UserError
from tankbench.lab import build as labbuild
from tankbench.lab import qemu, vm
from tankbench.lab import state as state_mod
from tankbench.units import human

HONEST = (
    "Under TCG (no KVM) the lab measures an emulator: use it to check that a campaign works, "
    "never to decide between configurations."
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `lab` and its subcommands."""
    p = subparsers.add_parser(
        "lab",
        help="the lab VM: real OpenZFS under qemu, driven over ssh",
        description="A throwaway qemu VM with real OpenZFS, built from Debian packages and cached. " + HONEST,
    )
    sub = p.add_subparsers(dest="lab_command", metavar="ACTION")

    def show_help(_args: argparse.Namespace) -> int:
        p.print_help()
        return 2

    p.set_defaults(func=show_help)

    _register_build_up(sub)
    _register_status_ssh_down(sub)


def _register_build_up(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`lab build` and `lab up`."""
    b = sub.add_parser(
        "build",
        help="build (or check) the lab image",
        description=(
            "Build the lab image from Debian packages (bookworm-backports kernel + zfs-dkms), cached under "
            "${XDG_CACHE_HOME:-~/.cache}/tankbench/lab (the path it prints when ready). A cold build takes about 10 "
            "minutes; later calls only check versions."
        ),
    )
    b.add_argument("--force", action="store_true", help="rebuild the modules, guest and image from scratch")
    b.set_defaults(func=cmd_build)

    u = sub.add_parser(
        "up",
        help="boot a lab (returns when ssh answers and zfs is loaded)",
        description="Boot a lab VM: KVM if it works here, else TCG. Data disks are fresh sparse "
        "files seen in the guest as /dev/disk/by-id/virtio-tbdata0 … A lab that is "
        "already up is reported as it is (exit 0), unless an option given here "
        "contradicts how it runs.",
    )
    _name(u)
    u.add_argument("--disks", type=int, help="number of data disks (default 2)")
    u.add_argument("--disk-size", help="size of each sparse data disk (default 8G)")
    u.add_argument("--slog", action="store_true", default=None, help="add a log disk (virtio-tblog0)")
    u.add_argument("--memory", type=int, help="guest memory in MiB (default 3072)")
    u.add_argument("--cpus", type=int, help="guest CPUs (default 2)")
    u.set_defaults(func=cmd_up)


def _register_status_ssh_down(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`lab status`, `lab ssh` and `lab down`."""
    s = sub.add_parser(
        "status", help="show a lab's state", description="Show whether a lab is up, its ports, disks and accelerator."
    )
    _name(s)
    s.add_argument("--json", action="store_true", help="print JSON")
    s.set_defaults(func=cmd_status)

    ls = sub.add_parser(
        "list",
        help="list the labs on this machine and the space they hold",
        description="Every lab on this machine: up, stale (its qemu is gone, e.g. after a reboot or a kill -9, and "
        "its disk images still hold space: `tankbench lab down --name NAME` frees them) or down (only its keys and "
        "console log are left; shown with --all).",
    )
    ls.add_argument("--all", action="store_true", help="also the labs that are down")
    ls.add_argument("--json", action="store_true", help="print JSON (every lab)")
    ls.set_defaults(func=cmd_list)

    h = sub.add_parser(
        "ssh",
        help="ssh into a lab, or run a command there",
        description="Open a shell in the lab, or run CMD there and exit with its status. One "
        "argument is run by the guest's shell; several are quoted word by word.",
    )
    _name(h)
    h.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD", help="command to run in the guest")
    h.set_defaults(func=cmd_ssh)

    d = sub.add_parser(
        "down",
        help="shut a lab down cleanly",
        description="zpool export -a, sync and power off in the guest; if it does not power off, "
        "stop only the qemu process this lab recorded.",
    )
    _name(d)
    d.set_defaults(func=cmd_down)


def _name(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--name", default="default", help="lab name (default 'default'); labs with different names run side by side"
    )


def cmd_build(args: argparse.Namespace) -> int:
    """Build or refresh the image."""
    try:
        image = labbuild.build(force=args.force)
    except labbuild.LabBuildError as e:
        print(f"Error: {e}", file=sys.stderr)
        print(
            f"Hint: all build logs are in {labbuild.cache_dir() / 'logs'}; rerun `tankbench lab build` "
            "to resume from the failed step.",
            file=sys.stderr,
        )
        return 3
    print(f"{image.dir} (kernel {image.versions.kernel_abi}, zfs {image.versions.zfs_version})")
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    """Boot a lab, or report the one that is up (idempotent)."""
    asked = {
        "disks": args.disks,
        "disk_size": state_mod.parse_disk_size(args.disk_size) if args.disk_size else None,
        "slog": args.slog,
        "memory_mb": args.memory,
        "cpus": args.cpus,
    }
    given = {k: v for k, v in asked.items() if v is not None}
    running = state_mod.read_state(args.name)
    if running is not None and qemu.is_our_qemu(running.pid, args.name):
        differ = {k: v for k, v in given.items() if getattr(running.config, k) != v}
        if differ:
            now = ", ".join(f"{k} {getattr(running.config, k)}" for k in differ)
            raise UserError(
                f"lab {args.name!r} is already up with {now}",
                f"run `tankbench lab down --name {args.name}` first to boot it with other settings",
            )
    config = state_mod.LabConfig(**given)
    try:
        state = vm.up(args.name, config, strict=False)  # options that contradict it were refused above
    except labbuild.LabBuildError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 3
    doc = vm.status(state.name)
    disks = doc["disks"]
    shown = " ".join(map(str, disks)) if isinstance(disks, list) else str(disks)
    print(
        f"lab {state.name} up: ssh root@127.0.0.1 -p {state.ssh_port} -i {doc['ssh_key']}  ({state.accelerator}; disks {shown})"
    )
    if state.accelerator != "kvm":
        print(f"Note: {HONEST}", file=sys.stderr)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """Print a lab's status."""
    doc = vm.status(args.name)
    if args.json:
        print_json(doc)
        return 0 if doc["state"] == "up" else 1
    if doc["state"] == "down":
        print(f"lab {args.name}: down")
        return 1
    for key in (
        "name",
        "state",
        "pid",
        "accelerator",
        "ssh",
        "cpus",
        "memory_mb",
        "disks",
        "kernel",
        "zfs",
        "uptime_s",
        "ready_seconds",
        "dir",
    ):
        value = doc[key]
        shown = " ".join(map(str, value)) if isinstance(value, list) else value
        print(f"{key:13} {shown}")
    return 0 if doc["state"] == "up" else 1


def cmd_list(args: argparse.Namespace) -> int:
    """List the labs and what they hold (exit 0, also when there are none)."""
    labs = vm.listing()
    if args.json:
        print_json(labs)
        return 0
    shown = [lab for lab in labs if args.all or lab["state"] != "down"]
    if shown:
        print(f"{'NAME':30} {'STATE':6} {'HELD':>9}  SSH")
    for lab in shown:
        print(f"{lab['name']:30} {lab['state']:6} {human(lab['held_bytes']):>9}  {lab.get('ssh', '')}")
    hidden = len(labs) - len(shown)
    if not labs:
        print("no labs on this machine; start one with `tankbench lab up`")
    elif hidden:
        print(f"({hidden} lab(s) down, with only their keys and console logs: --all lists them)")
    stale = [lab for lab in labs if lab["state"] == "stale"]
    if stale:
        held = human(sum(lab["held_bytes"] for lab in stale))
        print(f"{len(stale)} stale lab(s) hold {held}: `tankbench lab down --name NAME` frees one")
    return 0


def cmd_ssh(args: argparse.Namespace) -> int:
    """Run a command in the lab (exit status of the remote command), or open a shell."""
    state = vm.require_up(args.name)
    host = vm.ssh_host(state)
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        if sys.stdin is None or not sys.stdin.isatty():  # None: started with stdin closed (<&-)
            raise UserError("no command given and stdin is not a terminal", "use `tankbench lab ssh -- CMD …`")
        os.execvp("ssh", host.interactive_command())
    argv = host.shell_command(cmd[0]) if len(cmd) == 1 else host.command(cmd)
    return subprocess.run(argv).returncode


def cmd_down(args: argparse.Namespace) -> int:
    """Shut a lab down."""
    vm.down(args.name)
    return 0
