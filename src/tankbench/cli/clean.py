"""`tankbench clean`: destroy the ZFS datasets, zvols and pool a campaign created — only those it tagged."""

from __future__ import annotations

import argparse
import sys

from tankbench.cli._campaign import add_campaign_options, load_campaign
from tankbench.drivers.zfs import ZfsProvisioner
from tankbench.drivers.zfsbase import require_zfs
from tankbench.errors import UserError
from tankbench.runner import leave_host, open_host
from tankbench.targets.zfsplan import TAG


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "clean",
        help="destroy what a campaign created on ZFS (tagged only)",
        description=f"Destroy the datasets, zvols and pool that CAMPAIGN created, identified by the {TAG} "
        "property set on each of them. Anything without that tag of its own (including a dataset a "
        "user created inside the campaign's) is kept, with every dataset above it. The journal is "
        "not touched.",
    )
    p.add_argument("campaign", metavar="CAMPAIGN", help="campaign file (TOML) or preset name")
    p.add_argument("--scale", metavar="NAME", default="", help="the [scale.NAME] the campaign ran with")
    p.add_argument(
        "--keep-lab",
        action="store_true",
        help="leave up a lab VM that clean booted (by default it is shut down again: clean leaves the lab as it "
        "found it)",
    )
    add_campaign_options(p)
    p.set_defaults(func=cmd_clean)


def cmd_clean(args: argparse.Namespace) -> int:
    spec = load_campaign(args)
    if spec.pool is None:
        raise UserError(
            f"{spec.path}: the campaign has no [pool]: nothing on ZFS to clean",
            "file and raw targets keep their test data; remove it yourself if you want",
        )

    def note(m: str) -> None:
        print(m, file=sys.stderr)

    host = open_host(spec, note)
    try:
        # as `run` refuses: a host without ZFS (no module, no zfs command) is the user's error, not a host failure
        require_zfs(
            spec.path,
            host.name,
            host.call_agent({"op": "probe", "paths": [], "block_devices": []}, timeout=300),
            "clean",
        )
        gone, kept = ZfsProvisioner(host, spec).clean()
    finally:
        leave_host(host, args.keep_lab, note)  # a lab clean booted goes down again; one that was up stays up
    for name in gone:
        print(f"destroyed {name}")
    for name in kept:
        print(f"kept {name} (not created by this campaign)")
    if not gone and not kept:
        print("nothing to clean")
    return 0
