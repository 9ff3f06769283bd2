"""`tankbench clean` after an interrupted run: what still holds a campaign's dataset or zvol (issue 34 item 2).

After Ctrl-C or kill -9 mid-run, the run's fio may still hold its zvol or file: a buffered write's last close
flushes the page cache to the pool, which at a slow pool's pace takes minutes, in D state, where no signal acts.
`zfs destroy` then fails "dataset is busy". Before destroying, clean asks the host's agent who holds the dataset or
zvol (`op_holders`: open files, cwd, mappings, the device's kernel holders). tankbench's own fio (its command line
names the campaign's work directory: `<work root>/<campaign id>/…/job.fio`) is ended, by pid, and waited for;
anything else is named and left alone (`Error:` with its pid and command, and what to do). udev probing a zvol it
saw closed (systemd-udevd, blocked in D state behind the same flush as fio) is waited for with `udevadm settle`, in
the same deadline: it lets go by itself. A destroy still busy once nothing holds it is tried again after a settle.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tankbench.errors import HostError, UserError
from tankbench.hosts.base import Host

if TYPE_CHECKING:
    from tankbench.agent import HoldersRequest

#: how long clean waits for its own fio to let go (a buffered zvol write's final flush on a slow pool)
WAIT_S = 600.0
#: tries of `zfs destroy` that fail "busy" while nothing holds the dataset (udev's probe of a closed zvol)
DESTROY_TRIES = 5


#: udev's processes: a worker probes a zvol after its last writer closed it (read in D state while the pool drains)
UDEV = ("systemd-udevd", "(udev-worker)", "udevd")


def is_udev(h: dict[str, Any]) -> bool:
    """A holder that is udev probing the device: transient, it ends when its read does."""
    exe = str(h.get("cmdline", "")).split(" ", 1)[0].rsplit("/", 1)[-1]
    return h.get("comm") in UDEV or exe in UDEV


def _who(held: list[dict[str, Any]]) -> str:
    return "; ".join(
        f"pid {h['pid']} ({h['comm']}, state {h['state']}: {h['cmdline'][:120] or '?'}; {', '.join(h['uses'])})"
        for h in held[:5]
    )


def holders(host: Host, name: str, volume: bool, marker: str) -> tuple[list[dict[str, Any]], list[str]]:
    """(processes holding dataset/zvol `name`, the zvol's kernel holders) on the host."""
    req: HoldersRequest = {"op": "holders", "devices": [], "dirs": [], "marker": marker}
    if volume:
        req["devices"] = [f"/dev/zvol/{name}"]
    else:
        res = host.run(["zfs", "get", "-H", "-o", "value", "mountpoint", name], timeout=120)
        mountpoint = res.stdout.strip()
        if res.returncode == 0 and mountpoint.startswith("/"):
            req["dirs"] = [mountpoint]
    out = host.call_agent(req, timeout=300)
    return list(out.get("holders", [])), list(out.get("kernel", []))


def release(host: Host, name: str, volume: bool, marker: str, note: Callable[[str], None]) -> None:
    """Wait until nothing holds `name`: tankbench's own fio is ended (by pid) and waited for, and udev's probe of the
    zvol is waited out (`udevadm settle`), at most WAIT_S; UserError naming anything else that holds it."""
    deadline = time.monotonic() + WAIT_S
    told: set[str] = set()
    while True:
        held, kernel = holders(host, name, volume, marker)
        others = [h for h in held if not h["ours"] and not is_udev(h)]
        if others or kernel:
            raise UserError(
                f"{name} on {host.name} is in use by something that is not tankbench's: {_who(others) or ''}"
                + ("; kernel holders: " + ", ".join(kernel) if kernel else ""),
                "stop or close it (a VM, a mount, a partition table scan, LVM or device-mapper on a zvol, a shell "
                "in the directory), then run `tankbench clean` again; tankbench ends only its own processes",
            )
        ours = [h for h in held if h["ours"]]
        udev = [h for h in held if not h["ours"] and is_udev(h)]
        if not ours and not udev:
            return
        if ours and "ours" not in told:
            note(
                f"{name}: still held by tankbench's own fio from an interrupted run ({_who(ours)}): ending it and "
                f"waiting for it to let go (a buffered write's last flush), at most {WAIT_S / 60:.0f} min"
            )
            host.call_agent({"op": "end_pids", "pids": [(h["pid"], marker) for h in ours]}, timeout=120)
            told.add("ours")
        if udev and "udev" not in told:
            note(f"{name}: udev is probing it ({_who(udev)}): waiting for udev to let go (udevadm settle)")
            told.add("udev")
        if time.monotonic() > deadline:
            raise UserError(
                f"{name} on {host.name} is still held after {WAIT_S:.0f} s: {_who(ours + udev)}",
                "it is flushing writes to the pool (state D) or the pool hangs: see `zpool status` and `dmesg`; run "
                "`tankbench clean` again once it has ended",
            )
        if udev and not ours:
            host.run(["udevadm", "settle", "-t", "30"], timeout=60)
        time.sleep(1.0)  # polling: the flush ends when the pool has taken the data


def destroy(host: Host, name: str, volume: bool, marker: str, note: Callable[[str], None]) -> None:
    """`zfs destroy name` once nothing holds it (release); UserError with the real cause when it stays busy."""
    release(host, name, volume, marker, note)
    err = ""
    for attempt in range(DESTROY_TRIES):
        res = host.run(["zfs", "destroy", name], timeout=600)
        if res.returncode == 0:
            return
        err = res.stderr.strip()
        if "busy" not in err:
            raise HostError(f"zfs destroy {name} failed on {host.name}: {err}")
        host.run(["udevadm", "settle", "-t", "30"], timeout=60)  # udev probes a zvol it saw closed
        time.sleep(1.0 + attempt)
        release(host, name, volume, marker, note)
    raise UserError(
        f"zfs destroy {name} on {host.name}: {err}, and no process holds it",
        "something else keeps it busy: a mounted or cloned snapshot (`zfs list -t snapshot -r`, `zfs get origin`), "
        "an NFS or SMB share of it, a user hold (`zfs holds -r`), or a zvol in use as a vdev or swap; release "
        "it, then run `tankbench clean` again",
    )
