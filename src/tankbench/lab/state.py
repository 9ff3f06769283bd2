"""Who is running: a lab's runtime directory, its recorded state, its lock, its ports (no qemu here).

Each lab has a name and its own runtime directory (${XDG_CACHE_HOME:-~/.cache}/tankbench/labs/<name>/) with
state.json (qemu pid, ports, settings), its ssh key and known_hosts, its sparse data disks and the console
log. Ports are chosen free at boot, so two labs with different names never collide.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tankbench.errors import HostError, UserError
from tankbench.lab import build as labbuild

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")


@dataclass
class LabConfig:
    """What a lab is booted with (the `lab up` options)."""

    disks: int = 2
    disk_size: int = 8 << 30
    slog: bool = False
    memory_mb: int = 3072
    #: a cache (L2ARC) disk, tbcache0
    l2arc: bool = False
    cpus: int = 2
    #: the root disk is a qcow2 overlay (root.qcow2 in the lab's directory, backed by the image's rootfs) kept
    #: across this lab's boots (reboot, crash), instead of a fresh snapshot at every boot; `lab down` deletes it
    persistent_root: bool = False
    #: PID 1: "lab-init" (the image's fast bash init) or "systemd" (a real boot: units, journald, networkd)
    init: str = "lab-init"


@dataclass
class LabState:
    """A running lab, as recorded in its state.json."""

    name: str
    pid: int
    ssh_port: int
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
        d.pop("fio_port", None)  # a lab booted by a tankbench whose labs still forwarded a fio server's port
        d["config"] = LabConfig(**d["config"])  # type: ignore[arg-type]
        return cls(**d)  # type: ignore[arg-type]


def check_name(name: str) -> str:
    """A lab name is short, lowercase letters/digits/-/_ (it names a directory and a qemu process)."""
    if not NAME_RE.match(name or ""):
        raise UserError(f"invalid lab name {name!r}", "use 1-32 lowercase letters, digits, '-' or '_', e.g. 'default'")
    return name


def parse_disk_size(text: str) -> int:
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
            ports |= {int(doc["ssh_port"])} | ({int(doc["fio_port"])} if "fio_port" in doc else set())
        except (OSError, ValueError, KeyError):
            continue
    return ports


@contextmanager
def locked(name: str) -> Iterator[Path]:
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


def write_state(d: Path, state: LabState) -> None:
    tmp = d / "state.json.tmp"
    tmp.write_text(json.dumps(state.to_json(), indent=2) + "\n")
    os.replace(tmp, d / "state.json")


def lab_names() -> list[str]:
    """Names of labs with a runtime directory."""
    return sorted(p.name for p in labs_dir().glob("*") if p.is_dir() and NAME_RE.match(p.name))


def console(d: Path) -> str:
    try:
        return (d / "console.log").read_text(errors="replace")
    except OSError:
        return ""


def cleanup(d: Path) -> None:
    """Forget a lab that is no longer running: state, disks, sockets (the console log stays for reading)."""
    for p in [d / "state.json", d / "qmp.sock", d / "root.qcow2", *d.glob("tb*.img"), *d.glob("cm-*")]:
        p.unlink(missing_ok=True)


def fs_type(path: Path) -> str:
    best, fstype = "", "unknown"
    target = str(path.resolve())
    with open("/proc/self/mounts", encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            mp = parts[1].replace("\\040", " ")
            if (target == mp or target.startswith(mp.rstrip("/") + "/")) and len(mp) >= len(best):
                best, fstype = mp, parts[2]
    return fstype


def lab_fingerprint(state: LabState) -> dict[str, object]:
    """How the lab emulates hardware, for honest labelling of every run measured in it (the LabHost's facts)."""
    return {
        "accelerator": state.accelerator,
        "lab_disk_backing": f"sparse file on {fs_type(labs_dir() / state.name)}",
        "lab_memory_mb": state.config.memory_mb,
        "lab_cpus": state.config.cpus,
        "lab_disk_size": state.config.disk_size,
        "lab_image": state.image_key,
        "lab_kernel": state.kernel_abi,
        "lab_zfs": state.zfs_version,
        "lab_emulated": state.accelerator != "kvm",
        "lab_l2arc": state.config.l2arc,
        # the disk models and the ARC size applied at campaign start (diskmodels.py, lab/vm.py)
        **dict(state.extra.get("machine") or {}),  # type: ignore[call-overload]
    }
