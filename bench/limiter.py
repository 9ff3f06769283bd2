"""Does tankbench name the right limiter? A small matrix of deliberately bounded runs in the lab, one per limiter
class (issue 32), each a campaign of its own on the lab's modelled disks; prints the limiter the physics implies
beside the one tankbench named, with the evidence figures. Exit status 1 when a class is named wrong.

| class | how the run is bounded |
|---|---|
| data-disks | 4k random reads (O_DIRECT, QD1) of a raw lab disk modelled as an `hdd` (40 IOPS) |
| log-device | 4k sync writes to a dataset whose log disk is an `hdd` model, its data disks unmodelled |
| cpu | 128k reads of an unwritten (sparse) file: ZFS answers holes from memory, the emulator's CPU is the limit |
| write-throttle | 1M buffered sequential writes to a dataset on `hdd` data disks, more than ZFS may hold dirty (zfs_dirty_data_max 16M: at the module's 10 % of the lab's 3 GiB the emulated writer, 9 MiB/s, never dirtied the 187 MB at which ZFS delays writers) |
| read-modify-write | 4k random writes into a zvol's 64k volblocks (primarycache=metadata: no block cached) on `hdd` disks |
| arc | 4k random reads of a 32M file the ARC holds (after a warm-up run) |
| network | 1M reads of an NFS share of the lab from a client lab, the server's link modelled at 24 Mb/s (`[host] link_mbps`: tc) |

Boots its own lab (`limiter-bench`; 3 data disks, a log and a cache disk: the seeds' shape) unless --lab names one; each campaign applies its
own disk models over QMP (no reboot). The network class boots a second lab as the NFS client (--no-network skips
it).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tankbench.analysis.analyse import analyse_journal
from tankbench.cli import main as tankbench_main
from tankbench.diskmodels import LabMachine
from tankbench.lab import control, vm

POOL = """
[pool]
name = "tblimit"
vdevs = ["/dev/disk/by-id/virtio-tbdata0"]
log = ["/dev/disk/by-id/virtio-tblog0"]
confirm = ["/dev/disk/by-id/virtio-tbdata0", "/dev/disk/by-id/virtio-tblog0"]
ashift = 12
"""


@dataclass(frozen=True)
class Case:
    """One deliberately bounded campaign: the limiter it must be named, and its campaign text."""

    expected: str
    host: str
    body: str
    pool: bool = True


#: the lab's shape: the seeds' (3 data disks, a log and a cache disk), so one lab serves both
SHAPE = "disks = 3\nslog = true\nl2arc = true\n"


def host_table(lab: str, disk: str, slog: str, arc: str = "128M", extra: str = "") -> str:
    return (
        f'[host]\nkind = "lab"\nname = "{lab}"\n{SHAPE}'
        f'disk_model = "{disk}"\nslog_model = "{slog}"\narc_max = "{arc}"\n{extra}'
    )


def cases(lab: str) -> list[Case]:
    run = '[campaign]\nname = "limiter-{name}"\nruntime = "{runtime}"\nramp = "0s"\ncooldown = "0s"\nrepeats = {repeats}\nwarmup = {warmup}\n'
    return [
        Case(
            "data-disks",
            host_table(lab, "hdd", "none"),
            run.format(name="disks", runtime="6s", repeats=1, warmup="false")
            + '[[target]]\nname = "disk"\nkind = "raw"\npath = "/dev/disk/by-id/virtio-tbdata2"\n'
            'confirm = "/dev/disk/by-id/virtio-tbdata2"\nsize = "256M"\n'
            '[matrix]\nrw = ["randread"]\nbs = ["4k"]\niodepth = [1]\nioengine = ["psync"]\nio = ["direct"]\n',
            pool=False,
        ),
        Case(
            "log-device",
            host_table(lab, "none", "hdd"),
            run.format(name="log", runtime="8s", repeats=1, warmup="false")
            + '[[target]]\nname = "fs"\nkind = "dataset"\nsize = "128M"\nprops = { recordsize = "4k" }\n'
            '[matrix]\nrw = ["randwrite"]\nbs = ["4k"]\niodepth = [1]\nioengine = ["psync"]\nio = ["buffered"]\n'
            'sync_mode = ["sync"]\n',
        ),
        Case(
            "cpu",
            host_table(lab, "hdd", "none"),
            run.format(name="cpu", runtime="6s", repeats=1, warmup="false")
            + '[[target]]\nname = "fs"\nkind = "dataset"\nsize = "1G"\nprops = { recordsize = "128k" }\n'
            '[matrix]\nlayout = ["unwritten"]\nrw = ["read"]\nbs = ["128k"]\nioengine = ["psync"]\nio = ["buffered"]\n',
        ),
        Case(
            "write-throttle",
            host_table(lab, "hdd", "none"),
            run.format(name="throttle", runtime="12s", repeats=1, warmup="false")
            + '[[target]]\nname = "fs"\nkind = "dataset"\nsize = "1G"\nprops = { recordsize = "1M" }\n'
            '[matrix]\nrw = ["write"]\nbs = ["1M"]\niodepth = [1]\nioengine = ["psync"]\nio = ["buffered"]\n'
            "tunables = [{ zfs_dirty_data_max = 16777216 }]\n",
        ),
        Case(
            "read-modify-write",
            host_table(lab, "hdd", "none"),  # ARC max 128M: 64M is below zfs_arc_min (1/32 of 3 GiB)
            run.format(name="rmw", runtime="12s", repeats=1, warmup="false")
            + '[[target]]\nname = "vol"\nkind = "zvol"\nsize = "256M"\n'
            'props = { volblocksize = "64k", primarycache = "metadata" }\n'
            '[matrix]\nrw = ["randwrite"]\nbs = ["4k"]\niodepth = [4]\nio = ["direct"]\n',
        ),
        Case(
            "arc",
            host_table(lab, "hdd", "none"),
            run.format(name="arc", runtime="5s", repeats=2, warmup="true")
            + '[[target]]\nname = "fs"\nkind = "dataset"\nsize = "32M"\nprops = { recordsize = "16k" }\n'
            '[matrix]\nrw = ["randread"]\nbs = ["4k"]\niodepth = [1]\nioengine = ["psync"]\nio = ["buffered"]\n',
        ),
    ]


NFS = """
[[target]]
name = "share"
kind = "nfs"
size = "256M"
clients = [{client}]
client_port = 8766
nfs_version = "4.2"
props = {{ recordsize = "1M" }}

[matrix]
rw = ["read"]
bs = ["1M"]
iodepth = [1]
io = ["buffered"]
"""
#: the network class's link model (Mb/s): well under what the emulator's user-mode network moves
LINK_MBPS = 24


def network_case(lab: str, entry: str) -> Case:
    """1M reads of an NFS share of the lab, from a client lab (its clients entry), the link modelled at LINK_MBPS."""
    run = '[campaign]\nname = "limiter-network"\nruntime = "8s"\nramp = "0s"\ncooldown = "0s"\nrepeats = 1\nwarmup = false\n'
    return Case(
        "network",
        host_table(lab, "none", "none", extra=f"link_mbps = {LINK_MBPS}\n"),
        run + NFS.format(client=entry),
    )


@dataclass(frozen=True)
class Named:
    expected: str
    kind: str
    detail: str
    evidence: str


def run_case(name: str, case: Case, work: Path, note: Callable[[str], None]) -> list[Named]:
    """Run one campaign, clean up what it created, and read each measured test's limiter from the report's
    analysis."""
    d = work / name
    d.mkdir()
    campaign = d / "c.toml"
    campaign.write_text(case.body + ("\n" + POOL if case.pool else "") + "\n" + case.host)
    journal = d / "j.sqlite"
    rc = tankbench_main(["run", str(campaign), "--journal", str(journal), "--quiet"])
    tankbench_main(["clean", str(campaign)])
    if rc not in (0, 1):
        note(f"{name}: tankbench run exited {rc}")
        if rc == 2 or not journal.exists():  # refused, or stopped before its first run: no journal to read
            return [Named(case.expected, f"(run exited {rc})", "", "see the error above")]
    a = analyse_journal(str(journal))
    out = []
    for t in a.dataset.tests:
        if t.limit is not None:
            out.append(Named(case.expected, t.limit.kind, t.limit.detail, t.limit.evidence))
    return out or [Named(case.expected, "(no measured run)", "", "")]


def client_lab(name: str, tmp: Path) -> str:
    """Boot the network class's NFS client lab; its [[target]] clients entry (its known_hosts written in tmp)."""
    from tankbench.lab.state import LabConfig, labs_dir

    vm.up(name, LabConfig(disks=0, memory_mb=1024, cpus=1))
    st = vm.require_up(name)
    image_key = (labs_dir() / name / "known_hosts").read_text().split(None, 1)[1]
    kh = tmp / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{st.ssh_port} {image_key}")
    key = labs_dir() / name / "id_ed25519"
    return f'{{ address = "127.0.0.1", port = {st.ssh_port}, identity = "{key}", known_hosts = "{kh}" }}'


def print_named(n: Named) -> bool:
    ok = n.kind == n.expected
    named = n.kind + (f" ({n.detail})" if n.detail else "")
    print(f"{n.expected:<18} {named:<26} {n.evidence}" + ("" if ok else "   <- WRONG"), flush=True)
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(
        prog="bench/limiter", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--lab", default="", help="a running lab with 3 data disks, a log and a cache disk (default: boot one)"
    )
    ap.add_argument("--only", default="", help="comma-separated classes to run (default: all)")
    ap.add_argument("--no-network", action="store_true", help="skip the network class (it boots a client lab)")
    args = ap.parse_args()
    lab = args.lab or "limiter-bench"
    client = f"{lab[:26]}-nfsc"
    wanted = [c for c in args.only.split(",") if c]
    network = not args.no_network and (not wanted or "network" in wanted)
    machine = LabMachine(l2arc=True)
    host = vm.ssh_host(vm.require_up(lab)) if args.lab else control.lab_host(lab, disks=3, slog=True, machine=machine)
    wrong = 0
    try:
        with tempfile.TemporaryDirectory(prefix="tb-limiter-") as tmp:
            todo = [c for c in cases(lab) if not wanted or c.expected in wanted]
            if network:
                todo.append(network_case(lab, client_lab(client, Path(tmp))))
            print(f"{'expected':<18} {'named':<26} evidence")
            for c in todo:
                for n in run_case(c.expected, c, Path(tmp), lambda m: print(m, file=sys.stderr)):
                    wrong += not print_named(n)
    finally:
        host.close()
        if network and vm.read_state(client) is not None:
            vm.down(client)
        if not args.lab:
            vm.down(lab)
    print("every class named right" if not wrong else f"{wrong} run(s) named wrong")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
