#!/usr/bin/env python3
"""tankbench agent: runs on the benchmarked host (local, ssh or lab VM) next to fio. Stdlib only.

Protocol: tankbench starts it with `python3 -I -c <bootstrap>` and sends this file's source on stdin (see
hosts/base.py: it is never installed as a file); then one JSON request line on stdin; JSON event lines on stdout, the last one
{"event": "result", ...} or {"event": "error", "message": ...}. A first request {"op": "session"} keeps the agent
for many requests instead (serve(): each one ends with {"event": "end"}). stdin stays open: when it reaches EOF
(tankbench exited, was killed, or its ssh connection dropped) the agent ends the processes it started
(by process group) and exits, so a killed campaign never leaves fio running behind it.

Ops: probe, prepare_file, prepare_raw, fio_run, cooldown, end_pids, dirs, key, noise.
"""

# annotations stay unevaluated strings: the agent runs on whatever python3 >= 3.7 a host has, so they may use
# newer syntax (dict[str, int], X | None), while the typing names used at run time exist since 3.7
from __future__ import annotations

import glob
import json
import os
import queue
import shlex
import signal
import stat
import subprocess
import sys
import threading
import time
import zlib
from typing import TYPE_CHECKING, Any, NamedTuple, overload

if TYPE_CHECKING:  # typing-only names (TypedDict is 3.8+): never imported on the host
    from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
    from typing import Literal, Required, TypedDict, Union

    # -- the protocol: each op's request and its result event, shared with tankbench's callers ----------------
    # One JSON line in, event lines out: the request is one of these TypedDicts (a plain dict on the wire, so
    # this file stays one source that ships on stdin), checked by mypy at every caller (`host.call_agent` is
    # overloaded on the request type and returns the op's result type). The op names are the `op` literals.

    class SessionRequest(TypedDict):
        """Keep the agent for many requests (serve())."""

        op: Literal["session"]

    class DirsRequest(TypedDict, total=False):
        """Secure subdirectories of the agent's state root (e.g. "work", "keys")."""

        op: Required[Literal["dirs"]]
        names: Required[list[str]]
        root: str

    class DirsResult(TypedDict):
        event: str
        dirs: dict[str, str]

    class KeyRequest(TypedDict, total=False):
        """Ensure (or, with action = "remove", remove) a ZFS key file."""

        op: Required[Literal["key"]]
        dir: Required[str]
        name: Required[str]
        action: Literal["ensure", "remove"]

    class KeyResult(TypedDict, total=False):
        event: str
        path: str
        created: bool
        removed: bool

    class ProbeRequest(TypedDict, total=False):
        """Fingerprint facts, and what the runner needs to know of each path and block device."""

        op: Required[Literal["probe"]]
        paths: Required[list[str]]
        block_devices: Required[list[str]]
        #: job files for `fio --parse-only` (the campaign's distinct jobs)
        fio_parse: list[str]

    class ProbeResult(TypedDict):
        event: str
        fio_parse: dict[str, Any] | None
        fingerprint: dict[str, Any]
        paths: dict[str, dict[str, Any]]
        block_devices: dict[str, dict[str, Any]]
        zfs_params: dict[str, str]
        load1: float
        dirty_bytes: int
        swap_used_bytes: int
        zfs: bool
        boot_id: str

    class PrepareFileRequest(TypedDict, total=False):
        """Lay out and verify a test's file(s)."""

        op: Required[Literal["prepare_file"]]
        path: Required[str]
        paths: list[str]
        size: Required[int]
        layout: str
        force: bool
        sync_cmd: list[str]

    class PrepareRawRequest(TypedDict, total=False):
        """Lay out and verify a region of a block device."""

        op: Required[Literal["prepare_raw"]]
        path: Required[str]
        size: Required[int]
        layout: str
        force: bool

    class LayoutResult(TypedDict):
        event: str
        checks: dict[str, Any]

    class NoiseRequest(TypedDict, total=False):
        """Scrub/resilver, other I/O on the disks, swap traffic, load over a window (also a fio_run's `noise`)."""

        op: Literal["noise"]
        pool: str | None
        devices: list[str]
        window_s: float
        since: dict[str, Any]
        since_from: str
        confirm: dict[str, Any]

    class CooldownRequest(TypedDict, total=False):
        """Wait until the host is quiet (fixed, or auto: txg, disks, dirty, load)."""

        op: Required[Literal["cooldown"]]
        fixed_s: float
        max_s: float
        load1: float | None
        dirty_bytes: int | None
        mode: Literal["fixed", "auto"]
        devices: list[str]
        pool: str
        idle_iops: float
        idle_s: float
        idle_from: dict[str, list[dict[str, Any]]]
        poll_s: float
        counters_devices: list[str]

    class FioRunExtras(TypedDict, total=False):
        """What a target kind adds to a run's fio_run request (its `capture`): files read around fio, a command
        during it and commands after it, the sync that makes it durable, the layout to measure after it."""

        capture_files: list[str]
        during_cmd: list[str]
        after_cmds: list[list[str]]
        sync_cmd: list[str]
        layout_after: PrepareFileRequest

    class FioRunRequest(FioRunExtras, total=False):
        """fio (or a copy command) once under the watchdog with samplers; or, with `observe`, only the samplers
        and captures while the job runs elsewhere (a test guest)."""

        op: Required[Literal["fio_run"]]
        job_text: str
        argv: list[str]
        deadline_s: Required[float]
        hung_after_s: float
        workdir: Required[str]
        devices: list[str]
        interval: float
        drain_max_s: float
        noise: NoiseRequest
        observe: bool

    class FioRunResult(TypedDict, total=False):
        event: str
        io_log_last: dict[str, Any]
        exit_status: int | None
        timed_out: bool
        wall_s: float | None
        drain_s: float
        fio_json: str
        stderr_tail: str
        samples: dict[str, list[float]]
        metrics: dict[str, float]
        checks: dict[str, Any]
        counters: dict[str, Any]
        counters_exit: dict[str, Any]
        noise: dict[str, Any] | None
        pid: int
        files_before: dict[str, Any]
        files_after: dict[str, Any]
        during_output: str
        after_outputs: list[dict[str, Any]]
        layout_after: dict[str, Any] | None

    class EndPidsRequest(TypedDict):
        """End fio processes of this campaign by pid (each with the job file it must have open)."""

        op: Literal["end_pids"]
        pids: list[tuple[int, str]]

    class EndPidsResult(TypedDict):
        event: str
        ended: list[int]

    class HoldersRequest(TypedDict):
        """Who holds a dataset (files under `dirs`) or a zvol (`devices`); `marker` names tankbench's own fio."""

        op: Literal["holders"]
        devices: list[str]
        dirs: list[str]
        marker: str

    class HoldersResult(TypedDict):
        event: str
        holders: list[dict[str, Any]]
        kernel: list[str]

    #: every request the agent takes
    AgentRequest = Union[
        SessionRequest,
        DirsRequest,
        KeyRequest,
        ProbeRequest,
        PrepareFileRequest,
        PrepareRawRequest,
        NoiseRequest,
        CooldownRequest,
        FioRunRequest,
        EndPidsRequest,
        HoldersRequest,
    ]

    #: device name -> (reads, read_sectors, writes, write_sectors), from /proc/diskstats
    DiskStats = dict[str, tuple[int, int, int, int]]

    class Measure(TypedDict):
        """What _measure_file found about one test file."""

        apparent: int
        allocated: int
        data: int | None
        ratio: float
        zeros: float

    class Snapshot(TypedDict):
        """One Sampler reading of the kernel's counters."""

        t: float
        stat: dict[str, Any]
        disk: DiskStats
        mem: dict[str, int]
        load: tuple[float, float, float]
        arc: dict[str, int]


#: where the kernel's views are; tests point these at fake trees (tests/unit/test_agent_*.py)
PROC = "/proc"
SYS = "/sys"

_children: list[int] = []  # process groups started by this agent
_lock = threading.Lock()
_stdout_lock = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    """Print one event line (thread-safe)."""
    fields["event"] = event
    with _stdout_lock:
        sys.stdout.write(json.dumps(fields, default=str) + "\n")
        sys.stdout.flush()


def _end_children() -> None:
    with _lock:
        pids = list(_children)
    end_trees(pids)


def _live(pid: int) -> bool:
    """Whether a process runs (a zombie has ended: it only waits for its parent to reap it)."""
    text = read_text(PROC + "/%d/stat" % pid, None)
    return text is not None and stat_fields(text)[1][:1] != ["Z"]


def end_trees(tops: Iterable[int], grace_s: float = 2.0) -> list[int]:
    """End each process in `tops` and everything under it (fio's job processes call setsid: neither a signal to
    fio's process group nor fio's own end reaches them, and they went on writing until their runtime ended):
    SIGTERM and SIGCONT to the whole tree, SIGKILL to what still runs after `grace_s`. Returns the pids signalled.
    A process in D state (a hung device) ends only when its I/O returns: the caller sees it still there."""
    tree: list[int] = []
    for top in tops:
        tree += [p for p in tree_pids(top) if p not in tree]
    _signal_all(tree, signal.SIGTERM)
    _signal_all(tree, signal.SIGCONT)  # a stopped process acts on SIGTERM only once continued
    deadline = time.monotonic() + grace_s
    while any(_live(p) for p in tree) and time.monotonic() < deadline:
        time.sleep(0.05)
    _signal_all([p for p in tree if _live(p)], signal.SIGKILL)
    return tree


_stop = threading.Event()  # set by a {"stop": true} line after the request (an observing fio_run ends)


def _watch_stdin() -> None:
    """EOF on stdin means our parent is gone: stop what we started and exit. A {"stop": true} line ends an
    observing fio_run (the job ran elsewhere, e.g. in a test guest)."""
    for msg in _stdin_messages():
        if msg.get("stop"):
            _stop.set()
    _end_children()
    os._exit(75)


def _stdin_messages() -> Iterator[dict[str, Any]]:
    """Our stdin's lines as JSON objects ({"op": "?"} for a line that is not JSON), until EOF or a read error."""
    buf = b""
    try:
        while True:
            chunk = os.read(0, 65536)
            if not chunk:
                return
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    msg = json.loads(line.decode() or "{}")
                except ValueError:
                    msg = {"op": "?"}
                yield msg if isinstance(msg, dict) else {"op": "?"}
    except OSError:
        return


# ---------------------------------------------------------------- /proc readers
@overload
def read_text(path: str, default: str = ...) -> str: ...
@overload
def read_text(path: str, default: None) -> str | None: ...
def read_text(path: str, default: str | None = "") -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def meminfo(root: str = "") -> dict[str, int]:
    out = {}
    for line in read_text(root + PROC + "/meminfo").splitlines():
        parts = line.split()
        if len(parts) >= 2:
            mult = 1024 if len(parts) > 2 and parts[2] == "kB" else 1
            out[parts[0].rstrip(":")] = int(parts[1]) * mult
    return out


def loadavg(root: str = "") -> tuple[float, float, float]:
    parts = read_text(root + PROC + "/loadavg", "0 0 0 0/0 0").split()
    return float(parts[0]), float(parts[1]), float(parts[2])


def procstat() -> dict[str, Any]:
    """/proc/stat: "cpu" -> [user nice system idle iowait irq softirq steal] jiffies, the other fields -> int."""
    out: dict[str, Any] = {}
    for line in read_text(PROC + "/stat").splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "cpu":
            vals = [int(x) for x in parts[1:]]
            vals += [0] * (8 - len(vals))
            out["cpu"] = vals[:8]  # user nice system idle iowait irq softirq steal
        elif parts[0] in ("ctxt", "processes", "procs_running", "procs_blocked"):
            out[parts[0]] = int(parts[1])
    return out


def diskstats(names: Iterable[str], root: str = "") -> DiskStats:
    """{name: (reads, read_sectors, writes, write_sectors)} for the named devices."""
    out = {}
    wanted = set(names)
    for line in read_text(root + PROC + "/diskstats").splitlines():
        p = line.split()
        if len(p) >= 10 and p[2] in wanted:
            out[p[2]] = (int(p[3]), int(p[5]), int(p[7]), int(p[9]))
    return out


def vmstat() -> dict[str, int]:
    """/proc/vmstat counters (pswpin/pswpout: pages swapped in/out since boot)."""
    out = {}
    for line in read_text(PROC + "/vmstat").splitlines():
        p = line.split()
        if len(p) == 2 and p[1].isdigit():
            out[p[0]] = int(p[1])
    return out


def counters(devices: Iterable[str]) -> dict[str, Any]:
    """A snapshot of what a noise window compares: the clock, the devices' I/O counters and swap counters. The
    noise op of a later request can start its window here instead of waiting one out (see op_noise)."""
    vm = vmstat()
    return {
        "t": time.monotonic(),
        "boot_id": read_text(PROC + "/sys/kernel/random/boot_id", "").strip(),
        "disk": diskstats(devices),
        "vm": {"pswpin": vm.get("pswpin", 0), "pswpout": vm.get("pswpout", 0)},
    }


def arcstats() -> dict[str, int]:
    out = {}
    text = read_text(PROC + "/spl/kstat/zfs/arcstats")
    for line in text.splitlines()[2:]:
        p = line.split()
        if len(p) == 3:
            try:
                out[p[0]] = int(p[2])
            except ValueError:
                pass
    return out


# ---------------------------------------------------------------- devices
def _sys_block_name(major: int, minor: int) -> str | None:
    link = SYS + "/dev/block/%d:%d" % (major, minor)
    if not os.path.exists(link):
        return None
    return os.path.realpath(link)


def physical_devices(path: str) -> list[str]:
    """Whole disks under a path (a block device or a file's filesystem); [] when there are none (tmpfs, zfs)."""
    try:
        st = os.stat(path)
    except OSError:
        return []
    dev = st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev
    sysdir = _sys_block_name(os.major(dev), os.minor(dev))
    return _disks_of(sysdir) if sysdir else []


def _disks_of(sysdir: str, depth: int = 0) -> list[str]:
    if depth > 8:
        return []
    name = os.path.basename(sysdir)
    if os.path.exists(os.path.join(sysdir, "partition")):
        return _disks_of(os.path.dirname(sysdir), depth + 1)
    slaves = os.path.join(sysdir, "slaves")
    if os.path.isdir(slaves) and os.listdir(slaves):
        out: list[str] = []
        for s in sorted(os.listdir(slaves)):
            out += _disks_of(os.path.realpath(os.path.join(slaves, s)), depth + 1)
        return sorted(set(out))
    return [name]


def block_info(path: str) -> dict[str, Any]:
    """What the safety check needs about a block device: mounts, holders, partitions, signatures."""
    info: dict[str, Any] = {"path": path, "exists": os.path.exists(path)}
    if not info["exists"]:
        return info
    st = os.stat(path)
    info["is_block"] = stat.S_ISBLK(st.st_mode)
    if not info["is_block"]:
        return info
    real = os.path.realpath(path)
    info["realpath"] = real
    sysdir = _sys_block_name(os.major(st.st_rdev), os.minor(st.st_rdev))
    name = os.path.basename(sysdir) if sysdir else os.path.basename(real)
    info["name"] = name
    info["size_bytes"] = int(read_text(os.path.join(sysdir or "", "size"), "0") or 0) * 512 if sysdir else 0
    holders = os.path.join(sysdir or "", "holders")
    info["holders"] = sorted(os.listdir(holders)) if sysdir and os.path.isdir(holders) else []
    parts: list[str] = []
    if sysdir:
        for entry in sorted(os.listdir(sysdir)):
            if entry.startswith(name) and os.path.exists(os.path.join(sysdir, entry, "partition")):
                parts.append(entry)
    info["partitions"] = parts
    majmin = {"%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))}
    for p in parts:
        majmin.add(read_text(os.path.join(sysdir or "", p, "dev")).strip())  # parts come from sysdir
    mounts: list[str] = []
    for line in read_text(PROC + "/self/mountinfo").splitlines():
        f = line.split()
        if len(f) > 4 and f[2] in majmin:
            mounts.append(f[4])
    devnames = {"/dev/" + n for n in [name] + parts}
    for line in read_text(PROC + "/swaps").splitlines()[1:]:
        f = line.split()
        if f and os.path.realpath(f[0]) in devnames:
            mounts.append("[swap]")
    info["mounts"] = mounts
    info["zpool"] = imported_pool_of({real} | {"/dev/" + p for p in parts})
    info["writable"] = _may(real, os.R_OK | os.W_OK)
    sigs: list[str] = []
    for dev in [real] + ["/dev/" + p for p in parts]:
        error = _blkid(dev, real, sigs)
        if error:
            info["blkid_error"] = error
    info["signatures"] = sigs
    model = read_text(os.path.join(sysdir or "", "device", "model")).strip() if sysdir else ""
    info["model"] = model
    return info


#: where blkid lives: root's PATH has the sbin directories, a user's often does not
BLKID_PATH = "/usr/local/sbin:/usr/sbin:/sbin:/usr/local/bin:/usr/bin:/bin"


def _may(path: str, mode: int) -> bool:
    """Whether this process (its effective ids, where the OS can tell) may open `path` with `mode`."""
    if os.access in os.supports_effective_ids:
        return os.access(path, mode, effective_ids=True)
    return os.access(path, mode)


def _blkid(dev: str, real: str, sigs: list[str]) -> str:
    """Append the signatures blkid finds on `dev` to `sigs`; return why it could not read them ("" if it could).
    blkid exits 2 both for "no signature" and for "cannot open": only an empty stderr (and a readable device)
    means the device is blank; a device this user cannot read is never reported as blank."""
    if not _may(dev, os.R_OK):
        return "%s: permission denied" % dev
    env = dict(os.environ, PATH=os.pathsep.join(p for p in (os.environ.get("PATH", ""), BLKID_PATH) if p))
    try:
        out = subprocess.run(["blkid", "-p", "-o", "export", dev], capture_output=True, text=True, timeout=30, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    kv = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    for key in ("TYPE", "PTTYPE"):
        if kv.get(key):
            sigs.append("%s%s=%s" % ("" if dev == real else dev + ":", key, kv[key]))
    if out.returncode not in (0, 2) or (out.returncode == 2 and out.stderr.strip()):
        return out.stderr.strip() or "blkid exited %d" % out.returncode
    return ""


def imported_pool_of(devices: set[str]) -> str:
    """The imported ZFS pool that uses one of these device nodes (or a partition of them), or "": a pool's vdevs
    have no holders and no mounts, so only `zpool list -v -P` tells that a disk is in use. "" without ZFS."""
    try:
        names = subprocess.run(["zpool", "list", "-H", "-o", "name"], capture_output=True, text=True, timeout=60)
        out = subprocess.run(["zpool", "list", "-v", "-H", "-P"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    pools = set(names.stdout.split())
    pool = ""
    for line in out.stdout.splitlines():
        words = line.split()
        if not words:
            continue
        if words[0] in pools:  # a pool's own line; its vdevs follow (in any indentation)
            pool = words[0]
        elif words[0].startswith("/") and os.path.realpath(words[0]) in devices:
            return pool
    return ""


# ---------------------------------------------------------------- private directories
class UnsafePath(Exception):
    """A directory tankbench keeps job files or keys in could be changed by another user."""


def state_root() -> str:
    """Where this host's user keeps tankbench's job files and keys: ~/.cache/tankbench of the user the agent
    runs as (from the password database, not $HOME, which sudo may carry over from another user)."""
    import pwd

    try:
        home = pwd.getpwuid(os.geteuid()).pw_dir
    except KeyError:
        home = ""
    if not home or home == "/" or not os.path.isdir(home):
        return "/var/tmp/tankbench-%d" % os.geteuid()
    return os.path.join(home, ".cache", "tankbench")


def _check_ancestors(path: str) -> None:
    """Every directory above `path` must be owned by root or us and not writable by others (unless
    sticky, like /tmp: then only the owner of the entry below may replace it, and that is checked next)."""
    uid = os.geteuid()
    parts = os.path.realpath(path).split("/")
    for i in range(1, len(parts)):
        d = "/".join(parts[:i]) or "/"
        try:
            st = os.lstat(d)
        except FileNotFoundError:
            return  # not created yet: secure_dir creates the rest itself (0700) and checks again
        if st.st_uid not in (0, uid):
            raise UnsafePath("%s is owned by uid %d" % (d, st.st_uid))
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            raise UnsafePath("%s is writable by group or others (mode %o)" % (d, stat.S_IMODE(st.st_mode)))


def secure_dir(path: str) -> str:
    """Create `path` (mode 0700) if needed and prove only this user can change what is in it; return its
    real path. Raise UnsafePath for a symlink, a non-directory, another owner or an unsafe ancestor."""
    uid = os.geteuid()
    _check_ancestors(path)  # before creating anything inside a directory someone else controls
    old = os.umask(0o077)
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    finally:
        os.umask(old)
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UnsafePath("%s is not a directory (a symlink or a file)" % path)
    if st.st_uid != uid:
        raise UnsafePath("%s is owned by uid %d, not %d" % (path, st.st_uid, uid))
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)  # ours: tighten it (an older tankbench or a umask of 022 made it)
    _check_ancestors(path)
    return os.path.realpath(path)


def op_dirs(req: DirsRequest) -> None:
    """Secure the named subdirectories of state_root() (e.g. "work", "keys") and return their paths."""
    root = req.get("root") or state_root()
    try:
        dirs = dict((name, secure_dir(os.path.join(root, name))) for name in req.get("names", []))
    except UnsafePath as e:
        emit(
            "error",
            message="unsafe directory: %s (tankbench keeps job files and keys only where no other "
            "user can change them: fix the owner or mode, or remove it)" % e,
        )
        return
    emit("result", dirs=dirs)


def op_key(req: KeyRequest) -> None:
    """Ensure (or remove) a 32-byte raw ZFS key file, mode 0600, in a secure directory."""
    directory = secure_dir(req["dir"])
    name = req["name"]
    if "/" in name or name in ("", ".", ".."):
        raise ValueError("bad key file name %r" % name)
    path = os.path.join(directory, name)
    if req.get("action") == "remove":
        try:
            os.unlink(path)
            removed = True
        except FileNotFoundError:
            removed = False
        emit("result", path=path, removed=removed)
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_size != 32:
            raise UnsafePath("%s exists and is not a 32-byte key file of ours" % path) from None
        if stat.S_IMODE(st.st_mode) != 0o600:
            os.chmod(path, 0o600)
        emit("result", path=path, created=False)
        return
    try:
        os.write(fd, os.urandom(32))
        os.fsync(fd)
    finally:
        os.close(fd)
    emit("result", path=path, created=True)


def not_regular_test_files(directory: str) -> list[str]:
    """tankbench's test file names in a directory that are not plain files (a symlink to a disk or to someone's
    file, a device node): laying one out would write through it."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    return [n for n in names if n.startswith("tankbench-") and n.endswith(".fiodata")
            and not stat.S_ISREG(os.lstat(os.path.join(directory, n)).st_mode)]  # fmt: skip


def free_bytes(path: str) -> int:
    """Bytes an unprivileged write may still take on the filesystem of `path` (-1 if unknown)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1
    return st.f_bavail * st.f_frsize


def allocated_bytes(path: str) -> int:
    """Bytes a plain file holds on disk (what rewriting it frees first); 0 for anything else."""
    try:
        st = os.lstat(path)
    except OSError:
        return 0
    return st.st_blocks * 512 if stat.S_ISREG(st.st_mode) else 0


def test_file_bytes(directory: str) -> int:
    """Bytes tankbench's test files in a directory hold (laying them out again reuses that room)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    return sum(allocated_bytes(os.path.join(directory, n)) for n in names
               if n.startswith("tankbench-") and n.endswith(".fiodata"))  # fmt: skip


def refuse_no_room(path: str, size: int) -> None:
    """Raise unless a file of `size` bytes fits where `path` is: never fill someone's filesystem or pool."""
    free = free_bytes(os.path.dirname(path) or ".")
    if free >= 0 and size > free + allocated_bytes(path):
        raise ValueError("%s: %d bytes to lay out, but only %d are free there: tankbench never fills a filesystem"
                         % (path, size, free + allocated_bytes(path)))  # fmt: skip


def refuse_not_regular(path: str) -> None:
    """Raise unless `path` is absent or a plain file: never write through a symlink or into a device."""
    if os.path.lexists(path) and not stat.S_ISREG(os.lstat(path).st_mode):
        raise ValueError("%s is a symlink or not a regular file: tankbench writes only its own test files" % path)


# ---------------------------------------------------------------- ops
def fio_parse_only(chunks: list[str]) -> dict[str, Any]:
    """`fio --parse-only` over the campaign's job files (each chunk: [global] + job sections, file options left
    out): a typo in [fio] or a value fio does not take is refused before anything is written. {"ok": True} or the
    first refusal's words."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tankbench-parse-") as d:
        for i, text in enumerate(chunks):
            path = os.path.join(d, f"jobs-{i}.fio")
            with open(path, "w") as f:
                f.write(text)
            try:
                r = subprocess.run(["fio", "--parse-only", path], capture_output=True, text=True, timeout=120)
            except (OSError, subprocess.TimeoutExpired) as e:
                return {"ok": False, "error": f"fio --parse-only could not run: {e}"}
            if r.returncode != 0:
                said = [ln.strip() for ln in (r.stderr + r.stdout).splitlines() if ln.strip()]
                return {"ok": False, "error": "; ".join(said[:6]) or f"exit status {r.returncode}"}
    return {"ok": True}


def _cpu_model() -> str:
    """The first "model name" of /proc/cpuinfo ("" when there is none)."""
    for line in read_text(PROC + "/cpuinfo").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return ""


def _os_release() -> dict[str, str]:
    """/etc/os-release as {key: value}, quotes removed."""
    out: dict[str, str] = {}
    for line in read_text("/etc/os-release").splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            out[k] = v.strip('"')
    return out


def _zfs_params(zfs_version: str) -> dict[str, str]:
    """Every ZFS module parameter and its value ({} without the module)."""
    pdir = SYS + "/module/zfs/parameters"
    if not zfs_version or not os.path.isdir(pdir):
        return {}
    return {name: read_text(os.path.join(pdir, name)).strip() for name in sorted(os.listdir(pdir))}


def _path_facts(p: str) -> dict[str, Any]:
    """What the runner needs to know about a path it will use (or its parent, when the path does not exist yet)."""
    entry: dict[str, Any] = {"exists": os.path.exists(p), "is_dir": os.path.isdir(p)}
    parent = os.path.dirname(p.rstrip("/")) or "/"
    entry["parent_is_dir"] = os.path.isdir(parent)
    entry["writable"] = os.access(p if entry["exists"] else parent, os.W_OK)
    entry["devices"] = physical_devices(p if entry["exists"] else parent)
    entry["not_regular"] = not_regular_test_files(p) if entry["is_dir"] else []
    entry["free_bytes"] = free_bytes(p if entry["exists"] else parent)
    entry["test_file_bytes"] = test_file_bytes(p) if entry["is_dir"] else 0
    return entry


def op_probe(req: ProbeRequest) -> None:
    """Fingerprint facts, plus what the runner needs to know about each path it will use."""
    uname = os.uname()
    try:
        fio = subprocess.run(["fio", "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError:
        fio = ""
    osrel = _os_release()
    zfs_version = read_text(SYS + "/module/zfs/version").strip()
    paths = {p: _path_facts(p) for p in req.get("paths", [])}
    blocks = {p: block_info(p) for p in req.get("block_devices", [])}
    models: dict[str, str] = {}
    for info in list(paths.values()):
        for d in info["devices"]:
            models[d] = read_text(SYS + "/block/%s/device/model" % d).strip()
    for b in blocks.values():
        if b.get("name"):
            models[b["name"]] = b.get("model", "")
    mem = meminfo()
    load = loadavg()
    parsed = fio_parse_only(list(req["fio_parse"])) if fio and req.get("fio_parse") else None
    emit(
        "result",
        fio_parse=parsed,
        fingerprint={
            "kernel": uname.release,
            "arch": uname.machine,
            "hostname": uname.nodename,
            "os": osrel.get("PRETTY_NAME", ""),
            "cpu_model": _cpu_model(),
            "cpu_count": os.cpu_count(),
            "mem_bytes": mem.get("MemTotal", 0),
            "fio_version": fio,
            "python": sys.version.split()[0],
            "zfs_version": zfs_version,
            "device_models": models,
        },
        paths=paths,
        block_devices=blocks,
        zfs_params=_zfs_params(zfs_version),
        load1=load[0],
        dirty_bytes=dirty_bytes(mem),
        swap_used_bytes=mem.get("SwapTotal", 0) - mem.get("SwapFree", 0),
        zfs=bool(zfs_version),
        boot_id=read_text(PROC + "/sys/kernel/random/boot_id").strip(),
    )


def _sample_layout(path: str, size: int, samples: int = 16, chunk: int = 65536) -> tuple[float, float]:
    """(compressed/original size, fraction of zero bytes) of evenly spread samples, read once.
    A ratio near 1.0 means incompressible data: the file or region really holds written random blocks."""
    raw = comp = zeros = 0
    with open(path, "rb") as f:
        for i in range(samples):
            f.seek(max(0, (size - chunk) * i // max(1, samples - 1)))
            data = f.read(chunk)
            raw += len(data)
            comp += len(zlib.compress(data, 1))
            zeros += data.count(0)
    return (comp / raw, zeros / raw) if raw else (0.0, 0.0)


# ---------------------------------------------------------------- layouts
#: every layout writes in 4 KiB blocks; compressible:<N>% = (100 - N)% random bytes then N% zeros per block
BLOCK = 4096


def layout_block_source(layout: str) -> Callable[[int], bytes]:
    """A function n -> bytes producing the layout's data (n a multiple of 4 KiB, or the tail)."""
    if layout == "zero":
        return lambda n: bytes(n)
    if layout.startswith("compressible:"):
        keep = BLOCK * (100 - int(layout.split(":")[1].rstrip("%"))) // 100

        def compressible(n: int) -> bytes:
            out = bytearray(n)
            for off in range(0, n, BLOCK):
                m = min(keep, n - off)
                out[off : off + m] = os.urandom(m)
            return bytes(out)

        return compressible
    return os.urandom


def expected_ratio(layout: str) -> tuple[float, float]:
    """The sample compress ratio (zlib level 1) a correctly laid-out file shows, and the tolerance."""
    if layout.startswith("compressible:"):
        return (100 - int(layout.split(":")[1].rstrip("%"))) / 100.0, 0.1
    return {"random": (1.0, 0.1), "zero": (0.0, 0.05), "unwritten": (0.0, 0.05)}[layout]


def data_bytes(path: str, size: int) -> int | None:
    """Bytes of the file that are data, not holes (SEEK_DATA/SEEK_HOLE); None where the filesystem cannot say.
    Compressed blocks are data: this tells holes (a sparse, never-written file) from compression."""
    total = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        off = 0
        while off < size:
            try:
                start = os.lseek(fd, off, os.SEEK_DATA)
            except OSError as e:
                if e.errno == 6:  # ENXIO: no data after off
                    break
                return None
            end = os.lseek(fd, start, os.SEEK_HOLE)
            total += max(0, min(end, size) - start)
            off = end
    finally:
        os.close(fd)
    return total


def zfs_dataset_of(path: str) -> tuple[str, str] | tuple[None, None]:
    """(dataset, pool) holding a file (from the mount table) or a zvol device path; (None, None) if not ZFS."""
    if path.startswith("/dev/zvol/"):
        ds = path[len("/dev/zvol/") :]
        return ds, ds.split("/")[0]
    best: tuple[str, str | None] = ("", None)
    real = os.path.realpath(path)
    for line in read_text("/proc/self/mountinfo").splitlines():
        f = line.split(" - ")
        if len(f) != 2:
            continue
        mnt, (fstype, source) = f[0].split()[4], f[1].split()[:2]
        if fstype == "zfs" and (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best[0]):
            best = (mnt, source)
    if best[1] is None:
        return None, None
    return best[1], best[1].split("/")[0]


def zfs_space(dataset: str) -> dict[str, Any]:
    """The dataset's (or zvol's) space figures from `zfs get -Hp`: used, logicalused, referenced, … ({} on error)."""
    props = "used,logicalused,referenced,logicalreferenced,compressratio,compression,volsize"
    try:
        cp = subprocess.run(
            ["zfs", "get", "-Hp", "-o", "property,value", props, dataset], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    out: dict[str, Any] = {}  # int for a number, else str (e.g. compression, compressratio)
    for line in cp.stdout.splitlines():
        k, _, v = line.partition("\t")
        if v and v != "-":
            out[k] = int(v) if v.isdigit() else v
    return out


def _run_quiet(argv: Sequence[str], timeout: float = 600) -> None:
    try:
        subprocess.run(argv, timeout=timeout, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        pass


def _flush(sync_cmd: Sequence[str] | None, max_s: float = 600.0) -> None:
    """`sync`, then e.g. `zpool sync POOL`: ZFS updates st_blocks (and space figures) only when the txg holding
    the writes has synced."""
    for argv in (["sync"], sync_cmd):
        if argv:
            _run_quiet(argv, max_s)


def _settled_stat(path: str, max_s: float = 10.0) -> os.stat_result:
    """stat() once st_blocks stops changing (after a flush it is final; a short poll guards against a txg that
    was still syncing). Compressed files never reach their apparent size on disk: never wait for that."""
    t0 = time.monotonic()
    st = os.stat(path)
    while time.monotonic() - t0 < max_s:
        time.sleep(0.2)
        again = os.stat(path)
        if again.st_blocks == st.st_blocks and again.st_size == st.st_size:
            break
        st = again
    return st


#: path -> (the file's stat signature, its sampled (ratio, zeros)) when this agent process last sampled it
_sampled: dict[str, tuple[tuple[int, ...], tuple[float, float]]] = {}


def _signature(st: os.stat_result) -> tuple[int, ...]:
    """What changes whenever a file's content may have: the kernel sets ctime on every write (through write(2),
    O_DIRECT or a written mmap page) and nothing in user space can set it back."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_blocks, st.st_mtime_ns, st.st_ctime_ns)


def _measure_file(path: str, settle: bool = False) -> Measure:
    """What a file really is: apparent, allocated and data (not hole) bytes, sampled content."""
    return _measure_reusing(path, settle=settle)[0]


def _measure_reusing(path: str, settle: bool = False, reuse: bool = False) -> tuple[Measure, bool]:
    """_measure_file, and with `reuse` the samples this agent process read earlier stand when the file's stat
    signature is unchanged since (a run that only read the file); the bool says whether they did."""
    st = _settled_stat(path) if settle else os.stat(path)
    data = data_bytes(path, st.st_size)
    sig = _signature(st)
    earlier = _sampled.get(path)
    if reuse and earlier is not None and earlier[0] == sig:
        (ratio, zeros), reused = earlier[1], True
    else:
        ratio, zeros = _sample_layout(path, st.st_size) if st.st_size else (0.0, 1.0)
        _sampled[path], reused = (sig, (ratio, zeros)), False
    m: Measure = {"apparent": st.st_size, "allocated": st.st_blocks * 512, "data": data, "ratio": ratio, "zeros": zeros}
    return m, reused


def _file_ok(m: Measure, size: int, layout: str, zero_holes: bool = False) -> tuple[bool, str]:
    """(verified, why not) for one measured file against its layout. `zero_holes`: the filesystem stores zero
    blocks as holes (ZFS with compression on), so a zero layout has no data blocks there."""
    want, tol = expected_ratio(layout)
    if m["apparent"] != size:
        return False, "size %d, expected %d" % (m["apparent"], size)
    if layout == "unwritten":
        if m["data"] is None:
            ok = m["allocated"] <= max(65536, size // 100)
        else:
            ok = m["data"] <= size // 100
        return (ok and m["zeros"] == 1.0), "" if ok and m["zeros"] == 1.0 else "the file holds written blocks"
    if m["data"] is not None and m["data"] < size * 0.98 and not (layout == "zero" and zero_holes):
        return False, "holes: only %d of %d bytes are data" % (m["data"], size)
    if abs(m["ratio"] - want) > tol:
        return False, "sampled compress ratio %.2f, expected %.2f for layout %s" % (m["ratio"], want, layout)
    if layout == "zero" and m["zeros"] < 1.0:
        return False, "not all sampled bytes are zero"
    return True, ""


def _write_file(path: str, size: int, layout: str) -> None:
    if layout == "unwritten":  # what fio creates for a new file before it writes: size set, no blocks
        if os.path.exists(path):
            os.unlink(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        finally:
            os.close(fd)
        return
    source = layout_block_source(layout)
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(1 << 20, left)
            f.write(source(n))
            left -= n
        f.flush()
        os.fsync(f.fileno())


def layout_checks(
    layout: str,
    files: Sequence[Measure],
    laid_out: bool,
    seconds: float,
    zfs: dict[str, Any] | None = None,
    notes: Sequence[str] = (),
) -> dict[str, Any]:
    """The checks every layout records: totals over the files, holes vs compression, the verdict."""
    apparent = sum(m["apparent"] for m in files)
    allocated = sum(m["allocated"] for m in files)
    known = all(m["data"] is not None for m in files)
    data = sum(m["data"] or 0 for m in files) if known else None  # known: no file's data is None
    n = max(1, len(files))
    c: dict[str, Any] = {
        "layout.mode": layout,
        "layout.files": len(files),
        "layout.apparent_bytes": apparent,
        "layout.allocated_bytes": allocated,
        "layout.sample_compress_ratio": round(sum(m["ratio"] for m in files) / n, 4),
        "layout.zero_fraction": round(sum(m["zeros"] for m in files) / n, 4),
        "layout.laid_out_now": laid_out,
        "layout.seconds": round(seconds, 3),
        "layout.verified": not notes,
        "layout.note": "; ".join(notes),
    }
    if data is not None:
        c["layout.data_bytes"] = data
        c["layout.hole_bytes"] = apparent - data
        # sparse: holes (never-written blocks), which read as zeros without disk I/O
        c["layout.sparse"] = apparent - data > apparent * 0.02
        # compressed: the data blocks take less room on disk than they hold (not holes)
        c["layout.compressed"] = data > 0 and allocated < data * 0.9
        c["layout.disk_ratio"] = round(data / allocated, 3) if allocated else None
    for k, v in (zfs or {}).items():
        c["layout.zfs_" + k] = v
    return c


def op_prepare_file(req: PrepareFileRequest) -> None:
    """Lay out the test file(s) with the requested layout (random by default), then measure and verify them:
    apparent vs allocated vs data bytes (holes vs compression), sampled content, and on ZFS the dataset's
    logical vs physical space."""
    paths = list(req.get("paths") or [req["path"]])
    size, layout = int(req["size"]), req.get("layout") or "random"
    created_dir = False
    for directory in sorted(set(os.path.dirname(p) for p in paths)):
        if not os.path.isdir(directory):
            os.makedirs(directory)
            created_dir = True
    dataset, pool = zfs_dataset_of(paths[0])
    sync_cmd = req.get("sync_cmd") or (["zpool", "sync", pool] if pool else None)
    zero_holes = bool(dataset and zfs_space(dataset).get("compression", "off") != "off")
    laid_out = False
    t0 = time.monotonic()
    _flush(sync_cmd)
    measured: list[Measure | None] = []
    for path in paths:
        refuse_not_regular(path)
        m = _measure_file(path) if os.path.exists(path) and not req.get("force") else None
        if m is None or not _file_ok(m, size, layout, zero_holes)[0]:
            # an unwritten file is all holes, zero or compressible data on a compressing dataset takes less
            if layout != "unwritten" and (layout == "random" or not zero_holes):
                refuse_no_room(path, size)
            _write_file(path, size, layout)
            laid_out, m = True, None
        measured.append(m)
    seconds = time.monotonic() - t0
    if laid_out:
        _flush(sync_cmd)
    files = [m or _measure_file(p, settle=True) for p, m in zip(paths, measured)]
    notes = [
        "%s: %s" % (p, why)
        for p, m in zip(paths, files)
        for ok, why in [_file_ok(m, size, layout, zero_holes)]
        if not ok
    ]
    space = zfs_space(dataset) if dataset else {}
    emit(
        "result",
        checks=layout_checks(
            layout, files, laid_out, seconds, dict(space, dataset=dataset) if dataset else None, notes
        ),
        created_dir=created_dir,
    )


def layout_state(req: PrepareFileRequest) -> dict[str, Any]:
    """The layout checks of a prepare_file request's files as they are now, writing nothing: what the next run
    on them would find (fio_run's `layout_after`, measured after its drain, spares that run a prepare call)."""
    paths = list(req.get("paths") or [req["path"]])
    size, layout = int(req["size"]), req.get("layout") or "random"
    if not all(os.path.isfile(p) for p in paths):
        return {"layout.verified": False, "layout.note": "a test file is missing"}
    dataset, _ = zfs_dataset_of(paths[0])
    zero_holes = bool(dataset and zfs_space(dataset).get("compression", "off") != "off")
    t0 = time.monotonic()
    measured = [_measure_reusing(p, reuse=True) for p in paths]
    files = [m for m, _ in measured]
    notes = ["%s: %s" % (p, why) for p, m in zip(paths, files) for ok, why in [_file_ok(m, size, layout, zero_holes)]
             if not ok]  # fmt: skip
    space = zfs_space(dataset) if dataset else {}
    seconds = time.monotonic() - t0
    checks = layout_checks(layout, files, False, seconds, dict(space, dataset=dataset) if dataset else None, notes)
    # files whose content samples were not read again: unchanged (same inode, size, blocks, mtime, ctime)
    # since this agent sampled them, e.g. after a run that only read them
    checks["layout.samples_reused"] = sum(1 for _, reused in measured if reused)
    return checks


def _write_region(path: str, size: int, layout: str) -> None:
    if layout == "unwritten":
        import fcntl
        import struct

        fd = os.open(path, os.O_WRONLY)
        try:  # BLKDISCARD: a zvol frees the blocks, which then read as zeros without I/O
            fcntl.ioctl(fd, 0x1277, struct.pack("QQ", 0, size))
        finally:
            os.close(fd)
        return
    source = layout_block_source(layout)
    fd = os.open(path, os.O_WRONLY)
    try:
        left = size
        while left > 0:
            n = min(1 << 20, left)
            os.write(fd, source(n))
            left -= n
        os.fsync(fd)
    finally:
        os.close(fd)


def _region_ok(path: str, size: int, layout: str, space: dict[str, Any]) -> tuple[bool, str]:
    want, tol = expected_ratio(layout)
    ratio, zeros = _sample_layout(path, size)
    if layout == "unwritten":
        logical = space.get("logicalreferenced")
        if logical is None:
            return False, "not a zvol: a device's blocks cannot be un-written"
        if logical > max(1 << 20, size // 100):
            return False, "the zvol holds %d written bytes" % logical
        return zeros == 1.0, "" if zeros == 1.0 else "sampled bytes are not zero"
    if abs(ratio - want) > tol:
        return False, "sampled compress ratio %.2f, expected %.2f for layout %s" % (ratio, want, layout)
    if layout == "zero" and zeros < 1.0:
        return False, "not all sampled bytes are zero"
    logical = space.get("logicalreferenced")
    if layout != "unwritten" and logical is not None and logical < size * 0.98:
        if not (layout == "zero" and space.get("compression", "off") != "off"):
            return False, "the zvol holds only %d written bytes of %d (holes)" % (logical, size)
    return True, ""


def op_prepare_raw(req: PrepareRawRequest) -> None:
    """Lay out a confirmed raw device's test region or a zvol with the requested layout (random by default)
    unless samples show it already is; measure the device size and, for a zvol, logical vs physical bytes.

    Reads of never-written blocks (a new disk, a sparse virtual disk, a new zvol) can be served without
    touching the medium: `unwritten` (zvols only) asks for exactly that, to show the trap."""
    path, size, layout = req["path"], int(req["size"]), req.get("layout") or "random"
    dataset, pool = zfs_dataset_of(path)
    if layout == "unwritten" and not dataset:
        raise ValueError("layout unwritten needs a zvol: tankbench never discards a raw device's blocks")

    def space() -> dict[str, Any]:
        if not dataset:
            return {}
        assert pool is not None  # zfs_dataset_of gives a pool with every dataset
        _run_quiet(["sync"])
        _run_quiet(["zpool", "sync", pool])
        return zfs_space(dataset)

    laid_out = False
    t0 = time.monotonic()
    if req.get("force") or not _region_ok(path, size, layout, space())[0]:
        _write_region(path, size, layout)
        laid_out = True
    seconds = time.monotonic() - t0
    fd = os.open(path, os.O_RDONLY)
    try:
        device_bytes = os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)
    sp = space()
    ok, why = _region_ok(path, size, layout, sp)
    ratio, zeros = _sample_layout(path, size)
    c: dict[str, Any] = {
        "layout.mode": layout,
        "layout.files": 1,
        "layout.device_bytes": device_bytes,
        "layout.apparent_bytes": min(size, device_bytes),
        "layout.sample_compress_ratio": round(ratio, 4),
        "layout.zero_fraction": round(zeros, 4),
        "layout.laid_out_now": laid_out,
        "layout.seconds": round(seconds, 3),
        "layout.verified": ok,
        "layout.note": why,
    }
    if dataset and "logicalreferenced" in sp:
        # a zvol: written (logical) bytes vs the region tells holes; referenced vs logical tells compression
        logical, physical = int(sp["logicalreferenced"]), int(sp.get("referenced", 0))
        c["layout.data_bytes"] = min(logical, size)
        c["layout.hole_bytes"] = max(0, min(size, device_bytes) - logical)
        c["layout.allocated_bytes"] = physical
        c["layout.sparse"] = c["layout.hole_bytes"] > size * 0.02
        c["layout.compressed"] = logical > 0 and physical < logical * 0.9
        for k, v in dict(sp, dataset=dataset).items():
            c["layout.zfs_" + k] = v
    emit("result", checks=c)


class Sampler:
    """1 Hz series of load, CPU, context switches, processes, dirty memory, device and ARC counters."""

    def __init__(self, devices: Iterable[str], interval: float = 1.0) -> None:
        self.devices = list(devices)
        self.interval = interval
        self.series: dict[str, list[float]] = {
            k: []
            for k in (
                "t",
                "load1",
                "load5",
                "cpu_user_pct",
                "cpu_sys_pct",
                "cpu_iowait_pct",
                "ctxt_per_s",
                "forks_per_s",
                "procs_running",
                "procs_blocked",
                "dirty_bytes",
                "writeback_bytes",
                "dev_read_iops",
                "dev_write_iops",
                "dev_iops",
                "dev_bw_bytes",
                "dev_avg_io_bytes",
                "arc_hits_per_s",
                "arc_misses_per_s",
            )
        }
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.cpu_s = 0.0
        self.first: Snapshot | None = None
        self.last: Snapshot | None = None
        self.cpu_first: dict[str, tuple[str, int]] = {}
        self.cpu_seen: dict[str, tuple[str, int]] = {}

    def snapshot(self) -> Snapshot:
        return {
            "t": time.monotonic(),
            "stat": procstat(),
            "disk": diskstats(self.devices),
            "mem": meminfo(),
            "load": loadavg(),
            "arc": arcstats(),
        }

    def __enter__(self) -> Sampler:
        self.t0 = time.monotonic()
        self.first = self.prev = self.snapshot()
        t = time.monotonic()
        self.ev_first = evidence_snapshot(self.devices)
        # each followed process's CPU as last seen: fio (and its job processes) has ended when the run's last
        # snapshot is taken, so its CPU is what the sampler saw of it while it ran
        self.cpu_first = thread_cpu_pids()
        self.cpu_seen = dict(self.cpu_first)
        self.ev_first["cpu"] = group_ticks(self.cpu_first)
        self.evidence_s = time.monotonic() - t  # what the limiter's evidence costs a run (bench/overhead)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.last = self.snapshot()
        t = time.monotonic()
        self.ev_last = evidence_snapshot(self.devices)
        self.cpu_seen.update(thread_cpu_pids())
        self.ev_last["cpu"] = group_ticks(self.cpu_seen)
        self.evidence_s += time.monotonic() - t

    def evidence(self) -> dict[str, Any]:
        """The checks a limiter reads, over the same span as summary(): each disk's figures (dev.devices) and the
        CPU of each thread group (cpu.groups, cpu.group_threads)."""
        t = time.monotonic()
        out = evidence_checks(self.ev_first, self.ev_last, self.devices)
        out["harness.evidence_s"] = round(self.evidence_s + time.monotonic() - t, 4)
        return out

    def _loop(self) -> None:
        c0 = time.thread_time()
        while not self._stop.wait(self.interval):
            cur = self.snapshot()
            self._record(self.prev, cur)
            self.prev = cur
            self.cpu_seen.update(thread_cpu_pids())
        self.cpu_s = time.thread_time() - c0

    def _record(self, a: Snapshot, b: Snapshot) -> None:
        dt = max(1e-6, b["t"] - a["t"])
        s = self.series
        s["t"].append(round(b["t"] - self.t0, 3))
        s["load1"].append(b["load"][0])
        s["load5"].append(b["load"][1])
        for k, v in cpu_pct(a["stat"], b["stat"]).items():
            s[k].append(v)
        s["ctxt_per_s"].append(round((b["stat"].get("ctxt", 0) - a["stat"].get("ctxt", 0)) / dt, 1))
        s["forks_per_s"].append(round((b["stat"].get("processes", 0) - a["stat"].get("processes", 0)) / dt, 2))
        s["procs_running"].append(b["stat"].get("procs_running", 0))
        s["procs_blocked"].append(b["stat"].get("procs_blocked", 0))
        s["dirty_bytes"].append(b["mem"].get("Dirty", 0))
        s["writeback_bytes"].append(b["mem"].get("Writeback", 0))
        d = disk_delta(a["disk"], b["disk"], dt)
        s["dev_read_iops"].append(d["read_iops"])
        s["dev_write_iops"].append(d["write_iops"])
        s["dev_iops"].append(d["iops"])
        s["dev_bw_bytes"].append(d["bw_bytes"])
        s["dev_avg_io_bytes"].append(d["avg_io_bytes"])
        if b["arc"]:
            s["arc_hits_per_s"].append(round((b["arc"].get("hits", 0) - a["arc"].get("hits", 0)) / dt, 1))
            s["arc_misses_per_s"].append(round((b["arc"].get("misses", 0) - a["arc"].get("misses", 0)) / dt, 1))

    def summary(self) -> dict[str, float]:
        """Whole-run figures from the first and last snapshots (not from the rounded series)."""
        a, b, s = self.first, self.last, self.series
        assert a is not None and b is not None, "Sampler.summary() is for after its with block"
        dt = max(1e-6, b["t"] - a["t"])
        m = {
            "sys.load1_start": a["load"][0],
            "sys.load5_start": a["load"][1],
            "sys.load1_end": b["load"][0],
            "sys.load5_end": b["load"][1],
            "sys.load1_max": max(s["load1"] + [a["load"][0], b["load"][0]]),
            "sys.ctxt_per_s": round((b["stat"].get("ctxt", 0) - a["stat"].get("ctxt", 0)) / dt, 2),
            "sys.forks_per_s": round((b["stat"].get("processes", 0) - a["stat"].get("processes", 0)) / dt, 3),
            "sys.procs_blocked_max": max(s["procs_blocked"] + [b["stat"].get("procs_blocked", 0)]),
            "sys.dirty_max_bytes": max(s["dirty_bytes"] + [a["mem"].get("Dirty", 0), b["mem"].get("Dirty", 0)]),
            "sys.sampler_cpu_s": round(self.cpu_s, 4),
            "sys.sampled_s": round(dt, 3),
            "sys.samples": len(s["t"]),
        }
        for k, v in cpu_pct(a["stat"], b["stat"]).items():
            m["sys." + k] = v
        if self.devices:
            for k, v in disk_delta(a["disk"], b["disk"], dt).items():
                m["dev." + k] = v
            m["dev.read_bytes"] = sum((b["disk"][n][1] - a["disk"][n][1]) * 512 for n in b["disk"] if n in a["disk"])
            m["dev.write_bytes"] = sum((b["disk"][n][3] - a["disk"][n][3]) * 512 for n in b["disk"] if n in a["disk"])
        return m


def cpu_pct(a: dict[str, Any], b: dict[str, Any]) -> dict[str, float]:
    ca, cb = a.get("cpu", [0] * 8), b.get("cpu", [0] * 8)
    d = [y - x for x, y in zip(ca, cb)]
    total = sum(d) or 1
    return {
        "cpu_user_pct": round(100.0 * (d[0] + d[1]) / total, 2),
        "cpu_sys_pct": round(100.0 * (d[2] + d[5] + d[6]) / total, 2),
        "cpu_iowait_pct": round(100.0 * d[4] / total, 2),
    }


def disk_delta(a: DiskStats, b: DiskStats, dt: float) -> dict[str, float]:
    r = w = rs = ws = 0
    for name, vb in b.items():
        va = a.get(name)
        if va:
            r += vb[0] - va[0]
            rs += vb[1] - va[1]
            w += vb[2] - va[2]
            ws += vb[3] - va[3]
    ios = r + w
    return {
        "read_iops": round(r / dt, 2),
        "write_iops": round(w / dt, 2),
        "iops": round(ios / dt, 2),
        "read_bw_bytes": round(rs * 512 / dt, 1),
        "write_bw_bytes": round(ws * 512 / dt, 1),
        "bw_bytes": round((rs + ws) * 512 / dt, 1),
        "avg_io_bytes": round((rs + ws) * 512 / ios, 1) if ios else 0.0,
    }


# ---------------------------------------------------------------- why: the evidence a limiter needs (issue 32)
#: where udev names disks by a stable id (the capability of a disk is kept under that id)
BY_ID = "/dev/disk/by-id"
#: comm prefixes of OpenZFS's kernel threads (taskqs, txg, ARC, ZIL, zvol), grouped by name without the number
_ZFS_COMMS = ("z_", "zvol", "txg_", "dp_", "arc_", "dbu", "dbuf", "spa_", "zil", "zthr", "l2arc", "mmp", "metaslab")


def disk_ticks(names: Iterable[str], root: str = "") -> dict[str, tuple[int, ...]]:
    """{name: (reads, read sectors, read ms, writes, write sectors, write ms, busy ms, weighted ms)} from
    /proc/diskstats: busy ms (io_ticks) is the time the disk had I/O in flight; weighted ms sums each request's
    time in flight (their ratio is the mean queue while busy)."""
    out = {}
    wanted = set(names)
    for line in read_text(root + PROC + "/diskstats").splitlines():
        p = line.split()
        if len(p) >= 14 and p[2] in wanted:
            out[p[2]] = tuple(int(p[i]) for i in (3, 5, 6, 7, 9, 10, 12, 13))
    return out


def disk_ids(names: Iterable[str], root: str = "") -> dict[str, str]:
    """{kernel name: its stable name, /dev/disk/by-id/… (the shortest, no partition)}; a disk without one: its
    kernel name. Kept as a path, a value, so `bundle --anonymise` replaces the model and serial in it."""
    wanted, out = set(names), {}
    try:
        links = sorted(os.listdir(root + BY_ID), key=len)
    except OSError:
        links = []
    for link in links:
        if "-part" in link:
            continue
        name = os.path.basename(os.path.realpath(os.path.join(root + BY_ID, link)))
        if name in wanted and name not in out:
            out[name] = BY_ID + "/" + link
    return {n: out.get(n, n) for n in wanted}


def disk_label(name: str, disk_id: str) -> str:
    """A disk's short name in reports: a virtual disk's serial as its VM names it (virtio-tbdata0 -> tbdata0), else
    its kernel name (sda: a real disk's by-id name holds its serial, which a report does not spell out)."""
    base = disk_id.rsplit("/", 1)[-1]
    return base[len("virtio-") :] if base.startswith("virtio-") else name


def device_figures(
    a: dict[str, tuple[int, ...]], b: dict[str, tuple[int, ...]], dt: float, ids: dict[str, str]
) -> dict[str, dict[str, Any]]:
    """Per disk over dt seconds: IOPS and bytes/s each way, % of the time busy, mean queue while busy, mean
    time per request (ms), and its stable id and label."""
    out = {}
    for name, vb in b.items():
        va = a.get(name)
        if not va:
            continue
        d = [y - x for x, y in zip(va, vb)]
        ios = d[0] + d[3]
        out[name] = {
            "id": ids.get(name, name),
            "label": disk_label(name, ids.get(name, name)),
            "read_iops": round(d[0] / dt, 2),
            "write_iops": round(d[3] / dt, 2),
            "read_bw_bytes": round(d[1] * 512 / dt, 1),
            "write_bw_bytes": round(d[4] * 512 / dt, 1),
            "busy_pct": round(min(100.0, 100.0 * d[6] / (dt * 1000.0)), 1),
            "queue": round(d[7] / d[6], 2) if d[6] else 0.0,
            "await_ms": round((d[2] + d[5]) / ios, 2) if ios else 0.0,
        }
    return out


def thread_group(comm: str) -> str:
    """The group a process's CPU counts in: fio, qemu, a ZFS thread by name without its number (z_rd_int_0 ->
    z_rd_int, zvol_tq-3 -> zvol_tq), or "" (not followed: the host's CPU as a whole is /proc/stat's)."""
    if comm == "fio" or comm.startswith("fio "):
        return "fio"
    if comm.startswith("qemu"):
        return "qemu"
    if comm.startswith(_ZFS_COMMS):
        base = comm.rstrip("0123456789")
        return base.rstrip("_-/") or comm
    return ""


#: processes seen not to belong to a followed group, by pid (an agent session reads each once, not every run)
_NOT_FOLLOWED: set[str] = set()
_SCANS = [0]


def thread_cpu_pids(root: str = "") -> dict[str, tuple[str, int]]:
    """{pid: (group, CPU ticks used so far (user + system))} of the followed groups' processes, from /proc/*/stat (a
    kernel thread is a process of its own; fio's jobs are processes). A process found unfollowed is not read again:
    a snapshot costs a few dozen reads, not one per process."""
    out: dict[str, tuple[str, int]] = {}
    try:
        pids = [p for p in os.listdir(root + PROC) if p.isdigit()]
    except OSError:
        return out
    for pid in pids:
        key = root + pid
        if key in _NOT_FOLLOWED:
            continue
        text = read_text(root + PROC + "/" + pid + "/stat", None)
        if not text:
            continue
        comm, fields = stat_fields(text)
        g = thread_group(comm)
        if not g:
            _NOT_FOLLOWED.add(key)
            continue
        if len(fields) >= 13:
            out[pid] = (g, int(fields[11]) + int(fields[12]))
    _SCANS[0] += 1
    if _SCANS[0] % 200 == 0:  # a pid is reused once pids wrap around: now and then, read every process again
        _NOT_FOLLOWED.clear()
    return out


def group_ticks(per_pid: dict[str, tuple[str, int]]) -> tuple[dict[str, int], dict[str, int]]:
    """({group: CPU ticks of its processes}, {group: processes}) of a thread_cpu_pids() map."""
    ticks: dict[str, int] = {}
    count: dict[str, int] = {}
    for g, t in per_pid.values():
        ticks[g] = ticks.get(g, 0) + t
        count[g] = count.get(g, 0) + 1
    return ticks, count


def thread_cpu(root: str = "") -> tuple[dict[str, int], dict[str, int]]:
    """({group: CPU ticks used so far by its processes}, {group: processes}) now (thread_cpu_pids, by group)."""
    return group_ticks(thread_cpu_pids(root))


def cpu_groups(
    a: tuple[dict[str, int], dict[str, int]], b: tuple[dict[str, int], dict[str, int]], dt: float
) -> dict[str, Any]:
    """The cpu.* checks: % of one CPU each thread group used over dt (groups under 0.5 % left out; a process
    that ended in between loses its share) and how many processes each group had."""
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    groups = {}
    for g, t in b[0].items():
        pct = 100.0 * (t - a[0].get(g, 0)) / hz / dt
        if pct >= 0.5:
            groups[g] = round(pct, 1)
    return {"cpu.groups": groups, "cpu.group_threads": {g: n for g, n in b[1].items() if g in groups}}


def raw_clock_ns(t: float) -> int:
    """A time.monotonic() reading on CLOCK_MONOTONIC_RAW, the clock of OpenZFS's gethrtime() (the txgs kstat's
    birth times), in ns; plain CLOCK_MONOTONIC where there is no raw clock."""
    clock = getattr(time, "CLOCK_MONOTONIC_RAW", None)
    if clock is None:
        return int(t * 1e9)
    return time.clock_gettime_ns(clock) - int((time.monotonic() - t) * 1e9)


def evidence_snapshot(devices: Iterable[str]) -> dict[str, Any]:
    """What evidence_checks compares: the clock, the disks' diskstats and the thread groups' CPU ticks."""
    return {"t": time.monotonic(), "disks": disk_ticks(devices), "cpu": ({}, {})}  # the Sampler sets "cpu"


def evidence_checks(a: dict[str, Any], b: dict[str, Any], devices: Iterable[str]) -> dict[str, Any]:
    """dev.devices (device_figures) and the cpu.* checks (cpu_groups) between two evidence snapshots."""
    dt = max(1e-6, b["t"] - a["t"])
    out = cpu_groups(a["cpu"], b["cpu"], dt)
    if a["disks"]:
        out["dev.devices"] = device_figures(a["disks"], b["disks"], dt, disk_ids(devices))
    return out


#: the stem of the per-second fio logs every run writes (fio/jobs.py run_job_text)
SEC_LOG = "tbsec"


def _log_buckets(path: str) -> dict[tuple[int, int], list[float]]:
    """{(second, direction): the window values fio logged in it} of one fio log (time ms, value, direction, …)."""
    out: dict[tuple[int, int], list[float]] = {}
    for line in read_text(path).splitlines():
        p = line.split(",")
        try:
            t, v, ddir = float(p[0]), float(p[1]), int(p[2])
        except (IndexError, ValueError):
            continue
        out.setdefault((int((t + 500) // 1000), ddir), []).append(v)  # the second a window ends in
    return out


def fio_seconds(workdir: str) -> dict[str, list[float]]:
    """fio's own per-second series of a run from its logs (summed over jobs; a second without a completed I/O has
    no line in fio's log and is 0 here): fio_t, fio_{read,write}_iops, fio_bw_bytes, fio_{read,write}_lat_ms."""
    iops: dict[tuple[int, int], float] = {}
    bw: dict[int, float] = {}
    lat: dict[tuple[int, int], list[float]] = {}
    # a size-based job that ends with an fsync logs its IOPS under tbio (100 ms windows), the rest under tbsec
    paths = glob.glob(os.path.join(workdir, SEC_LOG + "_*.log")) + glob.glob(
        os.path.join(workdir, IO_LOG_PREFIX + "_iops.*.log")
    )
    for path in paths:
        kind = os.path.basename(path).split("_", 1)[1].split(".")[0]
        for (sec, ddir), vals in _log_buckets(path).items():
            mean = sum(vals) / len(vals)
            if kind == "iops":
                iops[(sec, ddir)] = iops.get((sec, ddir), 0.0) + mean
            elif kind == "bw":
                bw[sec] = bw.get(sec, 0.0) + mean * 1024
            elif kind == "lat":
                lat.setdefault((sec, ddir), []).append(mean)
    seconds = sorted({s for s, _ in iops} | set(bw))
    if not seconds:
        return {}
    span = range(seconds[0], seconds[-1] + 1)
    out: dict[str, list[float]] = {"fio_t": [float(s) for s in span], "fio_bw_bytes": [bw.get(s, 0.0) for s in span]}
    for ddir, name in ((0, "read"), (1, "write")):
        if any(d == ddir for _, d in iops):
            out[f"fio_{name}_iops"] = [round(iops.get((s, ddir), 0.0), 1) for s in span]
        if any(d == ddir for _, d in lat):
            per_s = [lat.get((s, ddir)) for s in span]
            out[f"fio_{name}_lat_ms"] = [round(sum(v) / len(v) / 1e6, 3) if v else 0.0 for v in per_s]
    return out


def job_paths(job_text: str) -> list[str]:
    """The files and devices a fio job file names in `filename=` (several joined by ':', a literal colon escaped
    as '\\:'), in order, once each."""
    out: list[str] = []
    for line in job_text.splitlines():
        key, eq, value = line.strip().partition("=")
        if not eq or key.strip() != "filename":
            continue
        for name in value.strip().replace("\\:", "\0").split(":"):
            name = name.replace("\0", ":")
            if name and name not in out:
                out.append(name)
    return out


#: sync_file_range(2): wait for writeback under way, start it on every dirty page of the range, wait for that
_SFR_WAIT_WRITE_WAIT = 1 | 2 | 4


def write_back(paths: Iterable[str]) -> list[str]:
    """Write out the page cache's dirty pages of these files or block devices and wait (sync_file_range(2)): no
    fsync, so no cache flush and, on ZFS, no ZIL commit. The part of a run's writes that a pool's `zpool sync`
    does not see: a zvol's page cache when something else still holds the device open (fio's own close writes it
    out otherwise), an mmap'd file's pages. The paths it could not do, with why (a missing file: none to do)."""
    import ctypes

    try:
        sfr = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return ["sync_file_range(2) is not available"]
    sfr.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
    failed = []
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            continue
        except OSError as e:
            failed.append(f"{path}: {e.strerror}")
            continue
        try:
            if sfr(fd, 0, 0, _SFR_WAIT_WRITE_WAIT) != 0:
                failed.append(f"{path}: {os.strerror(ctypes.get_errno())}")
        finally:
            os.close(fd)
    return failed


class Drained(NamedTuple):
    """What drain() saw: its seconds, the host's dirty + writeback bytes before and after, and what it could not
    do ('' when it did all: a file it could not write back, a sync command that failed or ran past its limit)."""

    seconds: float
    dirty_start: int
    dirty_end: int
    incomplete: str = ""
    method: str = "none"  # "sync(2)", the sync command it ran ("zpool sync tank"), or "none" (no drain)

    def checks(self) -> dict[str, Any]:
        """The run's drain.* checks (drain.incomplete only when something failed)."""
        out: dict[str, Any] = {
            "drain.dirty_start_bytes": self.dirty_start,
            "drain.dirty_end_bytes": self.dirty_end,
            "drain.method": self.method,
        }
        return {**out, "drain.incomplete": self.incomplete} if self.incomplete else out


def drain(max_s: float, sync_cmd: Sequence[str] | None = None, paths: Iterable[str] = ()) -> Drained:
    """Seconds until the run's writes are durable, and the host's dirty + writeback bytes before and after.

    Without a sync command of the target's own (a file on ext4, a raw device, a copy): sync(2), which on Linux
    returns once every page dirty when it was called is written (fsync on every file) — the run's writes among
    them; what is dirty after it was written after fio ended, by someone else. No poll of /proc/meminfo after
    it: on a shared host that timed the other writers (CI's lab beside a run: 36-62 s drains of a 1 s read run
    that wrote nothing, until dirty memory fell under 1 MiB).

    With one (`zpool sync POOL`: the open txg written out, as ZFS writes it unprompted): the page-cache part of
    the run's files first (write_back), then the command alone. Not sync(2) before it: sync(2) makes ZFS commit
    every mounted dataset's ZIL, so the drain would write what it measures a second way — on a pool without a
    log device every dirty byte twice (seed 000's dataset in the lab: 70 MiB of log blocks for 66 MiB written),
    and O_DIRECT writes logged indirectly as whole records (71 MiB of 4k writes: 611-621 MiB on the disk, a 38 s
    drain). The command is bounded by max_s."""
    t0 = time.monotonic()
    start = dirty_bytes()
    argv = list(sync_cmd or ["sync"])
    if argv == ["sync"] and hasattr(os, "sync"):  # sync(2) itself, as sync(1) calls it: no fork + exec
        os.sync()
    else:
        failed, cmd = write_back(paths), shlex.join(argv)
        try:
            done = subprocess.run(argv, timeout=max_s, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if done.returncode != 0:
                err = done.stderr.decode(errors="replace").strip().splitlines()
                failed.append(f"{cmd} exited {done.returncode}" + (f": {err[-1]}" if err else ""))
        except subprocess.TimeoutExpired:
            failed.append(f"{cmd} did not end in {max_s:g} s")
        except OSError as e:
            failed.append(f"{cmd}: {e.strerror}")
        return Drained(time.monotonic() - t0, start, dirty_bytes(), "; ".join(failed), cmd)
    return Drained(time.monotonic() - t0, start, dirty_bytes(), method="sync(2)")


def dirty_bytes(mem: Mapping[str, int] | None = None) -> int:
    """The host's dirty + writeback page-cache bytes: in a meminfo() read already made, or now."""
    m = meminfo() if mem is None else mem
    return m.get("Dirty", 0) + m.get("Writeback", 0)


def capture(patterns: Iterable[str]) -> dict[str, str]:
    """{path: text} of the kernel files to read around a run; a pattern with `*` names every file it matches
    (per-dataset kstats: /proc/spl/kstat/zfs/<pool>/objset-*)."""
    out = {}
    for pattern in patterns:
        for path in sorted(glob.glob(pattern)) if "*" in pattern else [pattern]:
            out[path] = read_text(path)
    return out


#: the stem of the per-job I/O logs a job may write in its work directory (fio/jobs.py with_io_log)
IO_LOG_PREFIX = "tbio"


def io_log_last(workdir: str) -> dict[str, str]:
    """{log file name: its last line} of the per-job I/O logs fio wrote in `workdir` (fio/parse.py reads them)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(workdir, IO_LOG_PREFIX + "_*.log"))):
        lines = read_text(path).strip().splitlines()
        if lines:
            out[os.path.basename(path)] = lines[-1]
    return out


def _fio_run_argv(req: FioRunRequest, workdir: str, out: str) -> list[str]:
    """What a fio_run runs: the request's command (a copy test), else fio on the request's job file (written into
    the workdir); logs of an earlier run and its JSON output are removed, so none stands for this run."""
    if os.path.exists(out):
        os.unlink(out)
    if req.get("argv"):  # a copy test (cp, rsync, dd): timed, sampled and drained exactly like fio
        argv = list(req["argv"])
    else:
        job = os.path.join(workdir, "job.fio")
        with open(job, "w") as f:
            f.write(req["job_text"])
        # json+: fio's latency histogram beside its percentiles (the report draws it; parse merges jobs exactly)
        argv = ["fio", "--output-format=" + str(req.get("fio_format", "json+")), "--output=" + out, job]
    logs = glob.glob(os.path.join(workdir, IO_LOG_PREFIX + "_*.log"))
    for old in logs + glob.glob(os.path.join(workdir, SEC_LOG + "_*.log")):
        os.unlink(old)
    return argv


def _start_during(argv: Sequence[str] | None) -> subprocess.Popen[bytes] | None:
    """The command a run asks to run beside it (its own session, so it ends as a group), or None."""
    if not argv:
        return None
    during = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    with _lock:
        _children.append(during.pid)
    return during


def _stop_during(during: subprocess.Popen[bytes] | None) -> str:
    """End the command that ran beside the run (SIGTERM to its group); what it printed."""
    if during is None:
        return ""
    try:
        os.killpg(during.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    output = during.communicate()[0].decode(errors="replace")
    with _lock:
        _children.remove(during.pid)
    return output


def _after_cmds(cmds: Iterable[Sequence[str]]) -> list[dict[str, Any]]:
    """The commands a run asks for after it (each at most 120 s): argv, exit status, output."""
    after = []
    for argv in cmds:
        try:
            cp = subprocess.run(list(argv), capture_output=True, text=True, timeout=120)
            after.append({"argv": argv, "rc": cp.returncode, "stdout": cp.stdout, "stderr": cp.stderr[-2000:]})
        except (OSError, subprocess.TimeoutExpired) as e:
            after.append({"argv": argv, "rc": -1, "stdout": "", "stderr": str(e)})
    return after


def _drain_of(req: FioRunRequest, sync_cmd: Sequence[str] | None) -> Drained:
    """drain() with the request's limits. The job's files are
    written back only where the job ran: with `observe` it ran elsewhere (a test guest), and its paths are the
    guest's (a guest's /dev/vdb is also one of the lab's disks)."""
    paths = [] if req.get("observe") else job_paths(req.get("job_text", ""))
    return drain(float(req.get("drain_max_s", 600)), sync_cmd, paths)


def _measured_run(req: FioRunRequest, argv: list[str], sync_cmd: Sequence[str] | None) -> dict[str, Any]:
    """The run itself under the samplers: fio (or the copy) under the watchdog, or, with `observe`, the samplers
    until told to stop; then the drain. Its times (t0, t_end, wall), exit facts, watchdog checks and sampler."""
    devices = req.get("devices", [])
    deadline = float(req["deadline_s"])
    with Sampler(devices, float(req.get("interval", 1.0))) as sampler:
        t0 = time.monotonic()
        watch: dict[str, Any] = {}
        if req.get("observe"):  # the job runs elsewhere (a test guest): sample until told to stop
            emit("observing")
            rc, err, timed_out, pid = 0, b"", not _stop.wait(deadline), None
        else:
            rc, err, timed_out, pid, watch = _run_job(argv, deadline, req["workdir"], req.get("hung_after_s"), devices)
        t_end = time.monotonic()
        # where the run's own I/O ended: a later cooldown's idle window can start here (cooldown_wait)
        at_exit = counters(devices)
        # a host whose I/O hangs: sync(2), `zpool sync`, a stat or a `zfs get` would wait for it forever (issue 34)
        hung = bool(watch.get("hang.host"))
        drained = Drained(0.0, 0, 0) if hung else _drain_of(req, sync_cmd)
    return {
        "t0": t0, "t_end": t_end, "rc": rc, "err": err, "timed_out": timed_out, "pid": pid, "watch": watch,
        "at_exit": at_exit, "hung": hung, "drained": drained, "sampler": sampler,
    }  # fmt: skip


def _after_run(req: FioRunRequest, hung: bool) -> tuple[dict[str, str], dict[str, Any] | None, float, list[Any]]:
    """What a run asks for once it ended: the files captured again, the next run's layout check (and its seconds),
    the commands after it; neither of the last two on a host whose I/O hangs."""
    files_after = capture(req.get("capture_files", []))
    t_layout = time.monotonic()
    wanted = req.get("layout_after")
    layout_after = layout_state(wanted) if isinstance(wanted, dict) and not hung else None
    t_layout = time.monotonic() - t_layout
    after = [] if hung else _after_cmds(req.get("after_cmds", []))
    return files_after, layout_after, t_layout, after


def op_fio_run(req: FioRunRequest) -> None:
    """Run fio (or a given command) once under a watchdog with samplers; measure wall time and drain; return everything."""
    t_req = time.monotonic()
    workdir = req["workdir"]
    secure_dir(workdir)  # job.fio decides what fio runs (exec_prerun=...): nobody else may write here
    out = os.path.join(workdir, "fio.json")
    argv = _fio_run_argv(req, workdir, out)
    sync_cmd = req.get("sync_cmd")
    # start from a clean slate: no dirty data of the previous test carried into this one
    presync_s = _drain_of(req, sync_cmd)[0] if sync_cmd else 0.0
    # the noise check rides along when its verdict cannot hold or stop the run (tankbench.preflight.deferrable)
    noise = noise_facts(req["noise"]) if isinstance(req.get("noise"), dict) else None
    files_before = capture(req.get("capture_files", []))
    during = _start_during(req.get("during_cmd"))
    run = _measured_run(req, argv, sync_cmd)
    t0, t_end, sampler = run["t0"], run["t_end"], run["sampler"]
    drained: Drained = run["drained"]
    during_out = _stop_during(during)
    files_after, layout_after, t_layout, after = _after_run(req, run["hung"])
    fio_json = read_text(out)
    t_logs = time.monotonic()
    seconds = fio_seconds(workdir)  # fio's per-second logs, read once (bench/overhead measures them)
    t_logs = time.monotonic() - t_logs
    # the agent's own time around fio (the run's share of the per-run fixed cost, docs/schedule.md): before
    # fio started (job file, noise facts, samplers), after it ended beside the drain (samplers' stop, captures,
    # the next run's layout check, commands after the run)
    checks = {
        **sampler.evidence(),
        "fio.t0_monotonic_ns": raw_clock_ns(t0),  # fio's start on the clock of ZFS's txg times
        **drained.checks(),
        "preflight.presync_s": round(presync_s, 3),
        **run["watch"],
        "harness.run_before_s": round(t0 - t_req, 4),
        "harness.run_after_s": round(time.monotonic() - t_end - drained.seconds, 4),
        "harness.layout_after_s": round(t_layout, 4),
        "harness.fio_logs_s": round(t_logs, 4),
    }
    emit(
        "result",
        io_log_last=io_log_last(workdir),
        exit_status=run["rc"],
        timed_out=run["timed_out"],
        wall_s=t_end - t0,
        drain_s=drained.seconds,
        fio_json=fio_json,
        stderr_tail=run["err"].decode(errors="replace")[-4000:],
        samples={**sampler.series, **seconds},
        metrics=sampler.summary(),
        checks=checks,
        counters=counters(req.get("devices", [])),
        counters_exit=run["at_exit"],
        noise=noise,
        pid=run["pid"],
        files_before=files_before,
        files_after=files_after,
        during_output=during_out,
        after_outputs=after,
        layout_after=layout_after,
    )


def stat_fields(text: str) -> tuple[str, list[str]]:
    """A /proc/<pid>/stat line as (comm, the fields after it: state ppid pgrp ...); comm may hold spaces and
    parentheses, so it ends at the last ")"."""
    return text[text.find("(") + 1 : text.rfind(")")], text[text.rfind(")") + 2 :].split()


def tree_pids(top: int, root: str = "") -> list[int]:
    """`top` and every live process under it, from the ppid in /proc/*/stat (fio's job processes call setsid:
    they leave fio's process group, not its tree)."""
    return sorted(tree_states(top, root))


def tree_states(top: int, root: str = "") -> dict[int, str]:
    """tree_pids with each process's state (R, S, D, T, Z, …), read in the same pass over /proc/*/stat."""
    parent, state = {}, {}
    for path in glob.glob(root + PROC + "/[0-9]*/stat"):
        text = read_text(path, None)
        if not text:
            continue
        fields = stat_fields(text)[1]
        if len(fields) > 1:
            pid = int(path.split("/")[-2])
            parent[pid], state[pid] = int(fields[1]), fields[0]
    out = {top} if top in parent else set()
    grew = True
    while grew:
        grew = False
        for pid, ppid in parent.items():
            if ppid in out and pid not in out:
                out.add(pid)
                grew = True
    return {pid: state[pid] for pid in out}


#: /proc/<pid>/io counters that move when a process moves data; the top process's rchar/syscr are left out
#: (fio's main process reads /sys/block/*/stat for its disk-util thread even when every job is stuck)
_IO_KEYS = ("rchar", "wchar", "syscr", "syscw", "read_bytes", "write_bytes")
_LEADER_IO_KEYS = ("wchar", "syscw", "read_bytes", "write_bytes")


def io_marks(top: int, devices: Iterable[str], root: str = "") -> tuple[int, ...]:
    """Counters that change while a run makes progress: the I/O of the run's processes (/proc/<pid>/io),
    the ops completed on its disks (/proc/diskstats) and, while one of the run's processes waits in the kernel
    (D state: fio's close or fsync waiting for its writeback), dirty + writeback memory (a drain going on). Two
    equal readings mean nothing moved in between. Dirty memory is the whole host's: counted at any other time it
    let another writer keep a stopped fio from ever being hung (CI's lab beside the watchdog test: 47 s instead
    of 6 to see 3 s of stillness, and a steadier writer would have held it to the cap)."""
    total = 0
    states = tree_states(top, root)
    for pid in states:
        keys = _LEADER_IO_KEYS if pid == top else _IO_KEYS
        for line in read_text(root + PROC + "/%d/io" % pid).splitlines():
            k, _, v = line.partition(":")
            if k in keys:
                total += int(v or 0)
    waiting = "D" in states.values()
    disk = diskstats(devices, root)
    ops = sum(r + w + rs + ws for r, rs, w, ws in disk.values())
    if not waiting:
        return total, ops, 0
    m = meminfo(root)
    dirty_mib = dirty_bytes(m) >> 20  # whole MiB: the host's own small writes are noise
    return total, ops, dirty_mib if dirty_mib > 1 else 0


class Watch:
    """The progress watchdog of one run (`top`: the pid of fio or the copy command): it ends the run only when nothing moved for `hung_after_s` (hung),
    or at `cap_s` (far too late); a run that is late but moving goes on. Polls every `poll_s`."""

    def __init__(
        self,
        top: int,
        devices: Iterable[str],
        hung_after_s: float,
        cap_s: float,
        poll_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        root: str = "",
    ) -> None:
        self.top, self.devices, self.root = top, list(devices), root
        self.hung_after_s, self.cap_s, self.poll_s, self.clock = hung_after_s, cap_s, poll_s, clock
        self.t0 = self.last_move = clock()
        self.marks = io_marks(top, self.devices, root)
        self.longest_stall_s = 0.0
        self.stuck: list[dict[str, Any]] = []

    def check(self) -> str:
        """ "" while the run may go on, else why it must end: "hung" or "cap"."""
        now = self.clock()
        marks = io_marks(self.top, self.devices, self.root)
        if marks != self.marks:
            self.marks, self.last_move = marks, now
        stall = now - self.last_move
        self.longest_stall_s = max(self.longest_stall_s, stall)
        if stall >= self.hung_after_s:
            return "hung"
        if now - self.t0 >= self.cap_s:
            return "cap"
        return ""

    def report(self, ended_by: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "watchdog.ended_by": ended_by,
            "watchdog.longest_stall_s": round(self.longest_stall_s, 1),
            "watchdog.hung_after_s": self.hung_after_s,
            "watchdog.cap_s": round(self.cap_s, 1),
        }
        if self.stuck:
            out["watchdog.stuck"] = self.stuck
        return out

    def look(self) -> None:
        """Where the run's processes wait, read before the watchdog ends them (evidence for a hung run: a
        process in D state inside the block layer points at the disk, one in T state at a stopped process)."""
        self.stuck = stuck_processes(self.top, self.root)


def stuck_processes(top: int, root: str = "") -> list[dict[str, Any]]:
    """Each process under `top`: pid, comm, state, the kernel function it waits in (wchan) and, readable as
    root, the innermost frames of its kernel stack."""
    out: list[dict[str, Any]] = []
    for pid in tree_pids(top, root):
        base = root + PROC + "/%d" % pid
        stat = read_text(base + "/stat", None)
        if not stat:
            continue
        comm, fields = stat_fields(stat)
        state = fields[0]
        frames = [ln.split(" ", 1)[-1].split("+")[0] for ln in (read_text(base + "/stack", None) or "").splitlines()]
        out.append(
            {
                "pid": pid,
                "comm": comm,
                "state": state,
                "wchan": (read_text(base + "/wchan", None) or "").strip(),
                "stack": [f for f in frames if f][:8],
            }
        )
    return out


def kernel_log_tail(lines: int = 30) -> list[str]:
    """The last lines of the kernel's log (`dmesg`; empty when it cannot be read)."""
    try:
        cp = subprocess.run(["dmesg", "--ctime"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return cp.stdout.splitlines()[-lines:] if cp.returncode == 0 else []


def _signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _run_job(
    argv: Sequence[str],
    deadline: float,
    cwd: str | None = None,
    hung_after_s: float | None = None,
    devices: Iterable[str] = (),
) -> tuple[int, bytes, bool, int, dict[str, Any]]:
    """Run fio (or a copy command) in a process group of its own, in `cwd` (where fio writes the logs a job
    names relatively), under the watchdog: without `hung_after_s` it ends the job at `deadline`; with it, only
    when no progress was seen for `hung_after_s` seconds or at `deadline` (the cap). Returns (exit status,
    stderr, ended by the watchdog, pid, watchdog.* checks)."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, cwd=cwd)
    with _lock:
        _children.append(proc.pid)
    emit("started", pid=proc.pid)
    watch = Watch(proc.pid, devices, hung_after_s if hung_after_s else deadline + 1, deadline)
    errbuf: list[bytes] = []
    reader = threading.Thread(target=lambda: errbuf.append(proc.stderr.read() if proc.stderr else b""), daemon=True)
    reader.start()
    ended_by = ""
    # a blocking wait in a thread of its own: Popen.wait(timeout=...) polls with sleeps of up to 50 ms, which
    # the run's wall time (and the time to the next run) would carry; an Event wakes at once
    exited = threading.Event()

    def reap() -> None:
        proc.wait()
        exited.set()

    threading.Thread(target=reap, daemon=True).start()
    while not exited.wait(timeout=min(watch.poll_s, max(0.01, deadline - (time.monotonic() - watch.t0)))):
        ended_by = watch.check()
        if ended_by:
            break
    if ended_by:
        watch.look()
        tree = tree_pids(proc.pid)
        _signal_all(tree, signal.SIGTERM)
        _signal_all(tree, signal.SIGCONT)  # a stopped process acts on SIGTERM only once continued
        unkillable = False
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _signal_all(tree, signal.SIGKILL)
            # not proc.wait(): a process in D state on a device that completes nothing never ends (issue 34)
            unkillable = not exited.wait(UNKILLABLE_S)
        _signal_all(tree[1:], signal.SIGKILL)  # job processes fio left behind (they are in sessions of their own)
    reader.join(timeout=10)
    with _lock:
        _children.remove(proc.pid)
    checks = watch.report(ended_by) if hung_after_s else {}
    if ended_by == "hung":
        checks["watchdog.kernel_log"] = kernel_log_tail()
        checks.update(hang_checks(watch.stuck, checks["watchdog.kernel_log"], unkillable, list(devices)))
    rc = proc.returncode if proc.returncode is not None else 128 + signal.SIGKILL
    return rc, b"".join(errbuf), bool(ended_by), proc.pid, checks


#: how long fio gets to end after SIGKILL before the run is reported with fio still there (a hung device)
UNKILLABLE_S = 30.0
#: the kernel's hung-task detector (kernel.hung_task_timeout_secs, 120 s by default): "task fio:123 blocked for…"
HUNG_TASK = "blocked for more than"


def in_flight(devices: Iterable[str], root: str = "") -> dict[str, int]:
    """Requests each device has in flight now (/proc/diskstats, the field after the time spent writing)."""
    wanted = set(devices)
    out: dict[str, int] = {}
    for line in read_text(root + PROC + "/diskstats").splitlines():
        f = line.split()
        if len(f) > 11 and f[2] in wanted:
            out[f[2]] = int(f[11])
    return out


def hang_checks(
    stuck: list[dict[str, Any]], kernel_log: list[str], unkillable: bool, devices: list[str]
) -> dict[str, Any]:
    """Slow or hung (issue 34 item 1): the watchdog saw nothing move for hung_after (no I/O completed on the run's
    disks, no byte moved by fio, no dirty memory written back). With a process of the run in D state (waiting in the
    kernel for I/O), the kernel's hung-task lines, or a fio that SIGKILL did not end, the host's I/O hangs: the run
    is not the problem, the machine is (`hang.host`); the runner then treats it as a host failure. A run stopped
    some other way (SIGSTOP: state T) is only a hung run, ended as before."""
    d_state = [p for p in stuck if p.get("state") == "D"]
    lines = [ln for ln in kernel_log if HUNG_TASK in ln]
    flight = {d: n for d, n in in_flight(devices).items() if n}
    out: dict[str, Any] = {"hang.host": bool(d_state or lines or unkillable)}
    if not out["hang.host"]:
        return out
    said = [f"{p['comm']} (pid {p['pid']}) in D state, waiting in {p.get('wchan') or '?'}" for p in d_state[:4]]
    said += [f"kernel: {ln.strip()[-160:]}" for ln in lines[-2:]]
    if unkillable:
        said.append(f"fio did not end {UNKILLABLE_S:.0f} s after SIGKILL")
    said.append(
        "requests in flight on " + ", ".join(f"{d} ({n})" for d, n in sorted(flight.items()))
        if flight
        else "no request in flight on the run's disks (held above them, e.g. in the pool's txg sync)"
    )
    out.update(
        {
            "hang.d_state": [{k: p.get(k) for k in ("pid", "comm", "wchan", "stack")} for p in d_state[:8]],
            "hang.kernel_lines": lines[-10:],
            "hang.unkillable": unkillable,
            "hang.in_flight": flight,
            "hang.evidence": "; ".join(said),
        }
    )
    return out


def op_noise(req: NoiseRequest) -> None:
    """Facts about what else is going on before a run (see noise_facts). Judged by tankbench.preflight."""
    emit("result", **noise_facts(req))


def noise_facts(req: NoiseRequest) -> dict[str, Any]:
    """The pool's `zpool status` (scrub/resilver), I/O on the given disks and swap traffic over a window, load
    and dirty memory. The window starts at `since` (counters of an earlier request: no wait) when usable; if
    that borrowed window shows I/O or swapping beyond `confirm` (it may hold tankbench's own layout), or there
    is none, the op watches a fresh window of `window_s`."""
    status: dict[str, Any] | None = None
    pool = req.get("pool")
    if pool:
        try:
            cp = subprocess.run(["zpool", "status", pool], capture_output=True, text=True, timeout=60)
            status = {"rc": cp.returncode, "stdout": cp.stdout, "stderr": cp.stderr[-2000:]}
        except (OSError, subprocess.TimeoutExpired) as e:
            status = {"rc": -1, "stdout": "", "stderr": str(e)}
    devices = list(req.get("devices", []))
    since = _usable_since(req.get("since"), devices)
    window = _window(devices, since, float(req.get("window_s", 1.0)))
    window_from = str(req.get("since_from", "earlier")) if since is not None else "wait"
    if since is not None and _beyond(window, req.get("confirm")):
        window, window_from = _window(devices, None, float(req.get("window_s", 1.0))), "wait (confirming)"
    mem = meminfo()
    return dict(
        window,
        zpool_status=status,
        window_from=window_from,
        load1=loadavg()[0],
        cpu_count=os.cpu_count() or 1,
        dirty_bytes=dirty_bytes(mem),
    )


def _window(devices: list[str], since: dict[str, Any] | None, wait_s: float) -> dict[str, Any]:
    """Disk and swap deltas from `since` to now, or over `wait_s` seconds from now."""
    if since is not None:
        t0, disk0, vm0 = float(since["t"]), {k: tuple(v) for k, v in since["disk"].items()}, dict(since["vm"])
    else:
        t0, disk0, vm0 = time.monotonic(), diskstats(devices), vmstat()
        time.sleep(wait_s)
    t1, disk1, vm1 = time.monotonic(), diskstats(devices), vmstat()
    return {
        "window_s": round(t1 - t0, 3),
        "disk": disk_delta(disk0, disk1, t1 - t0),
        "devices_seen": sorted(disk1),
        "swap_in_pages": vm1.get("pswpin", 0) - vm0.get("pswpin", 0),
        "swap_out_pages": vm1.get("pswpout", 0) - vm0.get("pswpout", 0),
    }


def _beyond(window: dict[str, Any], confirm: Any) -> bool:
    """Whether a window shows what `confirm` ({disk_iops, disk_bw_bytes, swap}) asks to see again."""
    if not isinstance(confirm, dict):
        return False
    disk = window["disk"]
    if "disk_iops" in confirm and disk.get("iops", 0) > float(confirm["disk_iops"]):
        return True
    if "disk_bw_bytes" in confirm and disk.get("bw_bytes", 0) > float(confirm["disk_bw_bytes"]):
        return True
    return bool(confirm.get("swap")) and window["swap_in_pages"] + window["swap_out_pages"] > 0


def _usable_since(since: Any, devices: Sequence[str]) -> dict[str, Any] | None:
    """`since` counters when a window can start there: same boot, in the past, every device counted."""
    if not isinstance(since, dict) or not isinstance(since.get("disk"), dict) or not isinstance(since.get("vm"), dict):
        return None
    boot = read_text(PROC + "/sys/kernel/random/boot_id", "").strip()
    if since.get("boot_id") != boot or not 0 < time.monotonic() - float(since.get("t", 0)) < 3600:
        return None
    if any(d not in since["disk"] for d in diskstats(devices)):
        return None
    return since


def txg_pending(pool: str, root: str = "") -> int | None:
    """Bytes still to sync in the pool's txgs (dirty data of open, quiescing, waiting and syncing txgs);
    None when the kstat is missing (no ZFS, or no such pool)."""
    text = read_text(root + PROC + "/spl/kstat/zfs/%s/txgs" % pool, None)
    if text is None:
        return None
    pending = 0
    for line in text.splitlines()[1:]:
        p = line.split()
        if len(p) >= 4 and p[2] in ("O", "Q", "W", "S"):
            try:
                ndirty = int(p[3])
            except ValueError:
                continue
            pending += ndirty if ndirty or p[2] == "O" else 1  # a txg still syncing counts even with 0 bytes
    return pending


def _quiet_conditions(
    state: dict[str, Any], root: str, dirty_max: float | None, load1_max: float | None, pool: str | None
) -> dict[str, bool]:
    """Read memory, load and txgs once; record them in state; return {condition: met} for those asked for."""
    m = meminfo(root)
    state["dirty_bytes"] = dirty_bytes(m)
    state["load1"] = loadavg(root)[0]
    ok = {}
    if dirty_max is not None:
        ok["dirty"] = state["dirty_bytes"] <= int(dirty_max)
    if load1_max is not None:
        ok["load1"] = state["load1"] <= float(load1_max)
    if pool:
        pending = txg_pending(pool, root)
        if pending is not None:
            state["txg_pending"] = pending
            ok["txg"] = pending == 0
    return ok


def _cooldown_start(
    req: CooldownRequest, prev: tuple[float, DiskStats] | None, allowed_ops: float, root: str
) -> tuple[dict[str, Any], float | None]:
    """cooldown_wait's state before its first look, and since when the disks have been idle (None: not known)."""
    state: dict[str, Any] = {}
    idle_since = None
    if prev is not None:  # the idle window may have begun before this wait: when the disks last moved
        idle_since, state["idle_from"], state["idle_before_s"] = idle_start(
            req.get("idle_from"), prev[1], prev[0], allowed_ops, root
        )
    if "counters_devices" in req and not root:  # where a noise window can start: this wait is quiet time too
        state["counters"] = counters(req["counters_devices"])
    return state, idle_since


def _disks_idle_step(
    prev: tuple[float, DiskStats],
    cur: tuple[float, DiskStats],
    idle_iops: float,
    idle_since: float | None,
    state: dict[str, Any],
) -> tuple[tuple[float, DiskStats], float | None]:
    """One look at the disks in cooldown_wait: their ops/s since the last look (into state["dev_iops"]) and when
    their idle window began (None when they did more than `idle_iops`); returns (this look, idle since)."""
    dt = max(1e-6, cur[0] - prev[0])
    ops = sum(sum(cur[1][n][i] - prev[1][n][i] for i in (0, 2)) for n in cur[1] if n in prev[1])
    state["dev_iops"] = round(ops / dt, 2)
    if ops / dt > idle_iops:
        idle_since = None
    elif idle_since is None:
        idle_since = prev[0]
    return cur, idle_since


def cooldown_wait(
    req: CooldownRequest,
    root: str = "",
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> dict[str, Any]:
    """Wait until the host is quiet; return how long it waited and which condition ended the wait.

    Fixed mode: `fixed_s`, then until load1 and dirty + writeback memory are below their thresholds (at most
    `max_s`). Auto mode (`mode` = "auto") also waits until the pool's txgs have synced and the named disks
    have done at most `idle_iops` ops/s for `idle_s` seconds. `ended_by` names the condition met last
    ("dirty", "txg", "disks", "load1"), "fixed" (or "quiet" without a fixed wait) when all were met at the
    first look, or "max" when time ran out (`unmet` lists what was not)."""
    t0 = clock()
    fixed_s = float(req.get("fixed_s", 0))
    max_s = float(req.get("max_s", 0))
    auto = req.get("mode") == "auto"
    load1_max, dirty_max = req.get("load1"), req.get("dirty_bytes")
    devices = list(req.get("devices", [])) if auto else []
    pool = req.get("pool") if auto else None
    idle_iops, idle_s = float(req.get("idle_iops", 5.0)), float(req.get("idle_s", 3.0))
    poll = float(req.get("poll_s", 1.0))
    met_at: dict[str, float] = {}  # condition -> when it became (and stayed) true
    prev = (clock(), diskstats(devices, root)) if devices else None
    state, idle_since = _cooldown_start(req, prev, idle_iops * idle_s, root)
    if fixed_s > 0:
        sleep(fixed_s)
    first = clock()
    looks = 0
    while True:
        looks += 1
        now = clock()
        ok = _quiet_conditions(state, root, dirty_max, load1_max, pool)
        if prev is not None:
            prev, idle_since = _disks_idle_step(prev, (now, diskstats(devices, root)), idle_iops, idle_since, state)
            ok["disks"] = idle_since is not None and now - idle_since >= idle_s
        for name, good in ok.items():  # when each condition became (and stayed) true
            if not good:
                met_at.pop(name, None)
            elif name not in met_at:
                met_at[name] = now
        if all(ok.values()):
            last = max(met_at, key=lambda k: met_at[k]) if met_at else ""
            # all met at the first look (after the fixed wait): nothing was waited for but that
            ended_by = last if last and looks > 1 and met_at[last] > first else ("fixed" if fixed_s > 0 else "quiet")
            break
        if now - t0 >= max_s + fixed_s:
            ended_by = "max"
            break
        if [k for k, v in ok.items() if not v] == ["disks"] and idle_since is not None:
            sleep(max(0.01, min(poll, idle_since + idle_s - now)))  # only the idle window's rest is left
        else:
            sleep(poll)
    state["unmet"] = sorted(k for k, v in ok.items() if not v)
    state["waited_s"] = clock() - t0
    state["ended_by"] = ended_by
    return state


def idle_start(
    marks: Any, disk_now: DiskStats, now: float, allowed_ops: float, root: str = ""
) -> tuple[float | None, str, float]:
    """Where the disks' idle window starts, from the counters earlier requests kept (`marks`: per device, a list
    of {t, boot_id, disk: [reads, read_sectors, writes, write_sectors], from}, earliest first: fio's exit, the
    run's end after its drain): per device the earliest mark since which it has done at most `allowed_ops`
    (idle_iops x idle_s) operations. A device that has not moved since fio's exit ("fio-exit") has nothing of
    its last run left to settle: it counts as idle already (-inf); after a write whose writeback moved it, the
    window starts at the run's end. Returns (idle since: the device that moved last decides, which marks, the
    seconds from the latest mark to now); (None, "wait", 0.0) when some device has no usable mark: the window
    starts with this wait, as before.
    Marks of another boot, from the future or older than an hour are not used."""
    if not isinstance(marks, dict) or not disk_now:
        return None, "wait", 0.0
    boot = read_text(root + PROC + "/sys/kernel/random/boot_id", "").strip()
    starts: list[tuple[float, str, float]] = []
    for dev, now_c in disk_now.items():
        found = None
        for m in marks.get(dev) or []:
            if not isinstance(m, dict) or m.get("boot_id") != boot or not isinstance(m.get("disk"), list):
                continue
            t = float(m.get("t", 0.0))
            if not 0 <= now - t < 3600 or len(m["disk"]) != 4:
                continue
            ops = (now_c[0] - int(m["disk"][0])) + (now_c[2] - int(m["disk"][2]))
            if 0 <= ops <= allowed_ops:
                found = (float("-inf") if m.get("from") == "fio-exit" else t, str(m.get("from", "earlier")), t)
                break
        if found is None:
            return None, "wait", 0.0
        starts.append(found)
    since = max(start for start, _, _ in starts)  # the device that moved last decides
    labels = sorted({s for _, s, _ in starts})
    return since, "+".join(labels), round(now - max(t for _, _, t in starts), 3)


def op_cooldown(req: CooldownRequest) -> None:
    """Wait until the host is quiet (see cooldown_wait) and report how long and why the wait ended."""
    emit("result", **cooldown_wait(req))


def op_end_pids(req: EndPidsRequest) -> None:
    """End processes a crashed campaign left behind: only the given pids, only if still fio with our job."""
    ended = [pid for pid, marker in req.get("pids", []) if _is_our_fio(int(pid), marker)]
    end_trees([int(p) for p in ended])  # fio and its job processes (they are in sessions of their own)
    emit("result", ended=ended)


def _is_our_fio(pid: int, marker: str) -> bool:
    """Whether `pid` is fio (or one of its job processes) running a job of ours: its command line names `marker`."""
    cmd = read_text(PROC + "/%d/cmdline" % pid).replace("\0", " ")
    return cmd.startswith("fio ") and marker in cmd


def _uses(pid: int, rdevs: set[int], dirs: list[str]) -> list[str]:
    """How process `pid` uses the block devices `rdevs` or anything under `dirs`: open files, cwd, root, maps."""
    base = PROC + "/%d" % pid
    out: list[str] = []
    links = [(f"fd {n}", base + "/fd/" + n) for n in _listdir(base + "/fd")] + [
        ("cwd", base + "/cwd"),
        ("root", base + "/root"),
    ]
    for what, link in links:
        try:
            target = os.readlink(link)
            st = os.stat(link) if rdevs else None
        except OSError:
            continue
        if st is not None and stat.S_ISBLK(st.st_mode) and st.st_rdev in rdevs:
            out.append(f"{what}: {target}")
        elif any(target == d or target.startswith(d.rstrip("/") + "/") for d in dirs):
            out.append(f"{what}: {target}")
    for line in (read_text(base + "/maps") if dirs else "").splitlines():
        path = line.split(None, 5)[5] if len(line.split(None, 5)) == 6 else ""
        if any(path.startswith(d.rstrip("/") + "/") for d in dirs):
            out.append(f"mapped: {path}")
            break
    return out


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def op_holders(req: HoldersRequest) -> None:
    """Who holds a dataset or zvol (`tankbench clean`, issue 34 item 2): every process with a block device of
    `devices` open or a file, cwd or mapping under one of `dirs`, and the kernel holders of the devices (a
    device-mapper or md device, a partition in use). A fio process whose command line names `marker` (the
    campaign's work directory) is `ours`: tankbench's own, left by an interrupted run."""
    rdevs: dict[int, str] = {}
    kernel: list[str] = []
    for path in req.get("devices", []):
        try:
            rdevs[os.stat(path).st_rdev] = path
        except OSError:
            continue
        name = os.path.basename(os.path.realpath(path))
        kernel += [f"{path}: {h}" for h in _listdir(SYS + "/block/" + name + "/holders")]
    dirs = [d for d in req.get("dirs", []) if d.startswith("/")]
    marker = str(req.get("marker") or "\0")
    held = []
    for entry in _listdir(PROC):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        uses = _uses(int(entry), set(rdevs), dirs)
        if not uses:
            continue
        stat_text = read_text(PROC + "/%s/stat" % entry, None) or "0 (?) ?"
        comm, fields = stat_fields(stat_text)
        cmd = read_text(PROC + "/%s/cmdline" % entry).replace("\0", " ").strip()
        held.append(
            {
                "pid": int(entry),
                "comm": comm,
                "state": fields[0] if fields else "?",
                "cmdline": cmd[:300],
                "uses": uses[:4],
                "ours": _is_our_fio(int(entry), marker),
            }
        )
    emit("result", holders=held, kernel=kernel)


#: op name -> its function (the `op` literal of each request type above)
OPS: dict[str, Callable[[Any], None]] = {
    "holders": op_holders,
    "probe": op_probe,
    "prepare_file": op_prepare_file,
    "prepare_raw": op_prepare_raw,
    "fio_run": op_fio_run,
    "cooldown": op_cooldown,
    "end_pids": op_end_pids,
    "dirs": op_dirs,
    "key": op_key,
    "noise": op_noise,
}


def _read_request_line() -> str:
    """The first line of stdin, read from the raw fd (a buffered reader's lock would stall interpreter exit)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(0, 1)
        if not chunk:
            break
        data += chunk
    return data.decode()


def _serve_stdin(requests: queue.Queue[dict[str, Any] | None]) -> None:
    """A session's stdin: each request line goes to the queue, a {"stop": true} line ends an observing op;
    EOF (tankbench gone) ends what we started and exits, as in one-request mode."""
    for msg in _stdin_messages():
        if msg.get("stop"):
            _stop.set()
        elif msg:
            requests.put(msg)
    _end_children()
    os._exit(75)


def serve() -> int:
    """Op "session": one agent process for many requests (one Python start and one source check per campaign
    instead of per call). Requests run one at a time; each ends with an {"event": "end"} line after its
    result or error; anything a request started and left running is ended before the next one."""
    requests: queue.Queue[dict[str, Any] | None] = queue.Queue()
    threading.Thread(target=_serve_stdin, args=(requests,), daemon=True).start()
    emit("ready", pid=os.getpid())
    while True:
        req = requests.get()
        if req is None:
            return 0
        _stop.clear()
        op = OPS.get(str(req.get("op")))
        try:
            if op is None:
                emit("error", message="bad request: unknown op %r" % req.get("op"))
            else:
                op(req)
        except Exception as e:  # as in one-request mode: an error event with the type, and the session goes on
            emit("error", message="%s: %s" % (type(e).__name__, e))
        _end_children()
        with _lock:
            del _children[:]
        emit("end")


def main() -> int:
    line = _read_request_line()
    try:
        req = json.loads(line)
        if req.get("op") == "session":
            return serve()
        op = OPS[req["op"]]
    except (ValueError, KeyError) as e:
        emit("error", message="bad request: %s" % e)
        return 2
    threading.Thread(target=_watch_stdin, daemon=True).start()
    try:
        op(req)
    except Exception as e:  # reported to tankbench as an error event, with the type, never swallowed
        emit("error", message="%s: %s" % (type(e).__name__, e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
