"""`tankbench doctor`: read a live host's ZFS, memory, CPU, swap and VM disk configuration (read-only) and say what
the seeds learned about it: each finding with its evidence, its source, its fix and the campaign that measures it."""

from __future__ import annotations

import argparse
import sys

from tankbench import colour
from tankbench.cli._common import print_json
from tankbench.errors import UserError
from tankbench.hosts.base import Host


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "doctor",
        help="inspect a host's ZFS and VM configuration (read-only) and suggest campaigns",
        description="Read a host's pools, vdevs and sector sizes, dataset and zvol properties, ZFS module "
        "parameters, RAM and ARC, CPU flags, swap, and its VMs' disk configuration (libvirt, Proxmox) without "
        "changing anything, and report what the seed experiments learned about it: evidence, source, fix, and "
        "the campaign (a preset with overrides, ready to paste) that measures the effect on this host. "
        "Exit status: 0 nothing found, 1 findings, 2 bad input, 3 the host could not be read.",
    )
    p.add_argument(
        "--host",
        metavar="H",
        default="local",
        help="the host to read: `local` (default), `lab`, `lab:NAME`, `ssh://[user@]address[:port]` or a host file",
    )
    p.add_argument("--pool", metavar="POOL", default="", help="only findings about this pool (and host-wide ones)")
    p.add_argument(
        "--input",
        metavar="FILE",
        help="read a saved output of doctor's collection script instead of a host (see --script)",
    )
    p.add_argument("--script", action="store_true", help="print the read-only script doctor runs on the host, and exit")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.set_defaults(func=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    from tankbench.doctor.checks import diagnose, view
    from tankbench.doctor.collect import SCRIPT, collect

    if args.script:
        sys.stdout.write(SCRIPT)
        return 0
    host_option = "" if args.host == "local" else args.host
    if args.input:
        try:
            with open(args.input, encoding="utf-8") as fh:
                text = fh.read()
        except (OSError, UnicodeDecodeError) as e:
            raise UserError(f"--input {args.input}: cannot read it: {e}", "pass a file saved from --script") from None
        where = args.input
    else:
        host = open_doctor_host(args.host)
        try:
            text = collect(host)
        finally:
            host.close()
        where = host.name
    v = view(text, host_option)
    if "zpool-status" not in text:
        raise UserError(
            f"{where}: not an output of doctor's collection script",
            'save it with: sh -c "$(tankbench doctor --script)"',
        )
    findings = diagnose(v, args.pool)
    if args.json:
        print_json(
            {
                "host": where,
                "zfs_version": v.zfs_version,
                "pools": sorted(v.pools),
                "vms": [vm.name for vm in v.vms],
                "unread": v.unread,
                "findings": [f.to_json() for f in findings],
            }
        )
        return 1 if findings else 0
    out = sys.stdout
    out.write(f"doctor: {where}: pools {', '.join(sorted(v.pools)) or 'none'}; {len(v.vms)} VM config(s) read\n")
    if not v.zfs_version:
        out.write("Note: ZFS is not loaded on this host (no /sys/module/zfs/version): only VM and memory checks ran.\n")
    for what in v.unread:  # a VM config it could not read: its checks did not run, and that is said
        out.write(f"Note: could not read {what}: its VM checks did not run (run doctor as root to read it)\n")
    if not findings:
        out.write("No findings.\n")
        return 0
    for i, f in enumerate(findings, 1):
        out.write(f"\n{i}. [{colour.status(f.severity, out)}] {f.subject}: {f.title}\n")
        out.write(f"   evidence: {f.evidence}\n   source:   {f.source}\n   fix:      {f.fix}\n")
        if f.campaign:
            out.write("   measure:  " + "\n             ".join(f.campaign) + "\n")
        else:
            out.write("   measure:  no campaign (a safety matter, not a speed one)\n")
    out.write(f"\n{len(findings)} finding(s).\n")
    return 1


def open_doctor_host(option: str) -> Host:
    """The Host named by --host (never boots a lab: a lab must be up)."""
    from tankbench.campaign.schema import HostSpec
    from tankbench.cli._campaign import host_option
    from tankbench.doctor.facts import open_host_no_boot

    table, _, _ = host_option(option)
    t = table or {"kind": "local"}
    spec = HostSpec(
        kind=str(t.get("kind", "auto")),
        address=str(t.get("address", "")),
        user=str(t.get("user", "")),
        port=int(t.get("port", 22)),
        identity=str(t.get("identity", "")),
        lab_name=str(t.get("name", "default")),
    )
    return open_host_no_boot(spec)
