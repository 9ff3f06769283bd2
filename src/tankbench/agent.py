#!/usr/bin/env python3
"""tankbench agent: runs on the benchmarked host (local, ssh or lab VM) next to fio. Stdlib only.

Protocol: one JSON request line on stdin; JSON event lines on stdout, the last one
{"event": "result", ...} or {"event": "error", "message": ...}. stdin stays open: when it reaches EOF
(tankbench exited, was killed, or its ssh connection dropped) the agent ends the processes it started
(by process group) and exits, so a killed campaign never leaves fio running behind it.

Ops: probe, prepare_file, fio_run, cooldown, end_pids.
"""

import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
import zlib

_children = []  # type: list[int]  # process groups started by this agent
_lock = threading.Lock()
_stdout_lock = threading.Lock()


def emit(event, **fields):
    """Print one event line (thread-safe)."""
    fields["event"] = event
    with _stdout_lock:
        sys.stdout.write(json.dumps(fields, default=str) + "\n")
        sys.stdout.flush()


def _end_children():
    with _lock:
        pids = list(_children)
    for pid in pids:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            time.sleep(0.5)


_stop = threading.Event()  # set by a {"stop": true} line after the request (an observing fio_run ends)


def _watch_stdin():
    """EOF on stdin means our parent is gone: stop what we started and exit. A {"stop": true} line ends an
    observing fio_run (the job ran elsewhere, e.g. in a test guest)."""
    buf = b""
    try:
        while True:
            chunk = os.read(0, 65536)
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    if json.loads(line.decode() or "{}").get("stop"):
                        _stop.set()
                except ValueError:
                    pass
    except OSError:
        pass
    _end_children()
    os._exit(75)


# ---------------------------------------------------------------- /proc readers
def read_text(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def meminfo():
    out = {}
    for line in read_text("/proc/meminfo").splitlines():
        parts = line.split()
        if len(parts) >= 2:
            mult = 1024 if len(parts) > 2 and parts[2] == "kB" else 1
            out[parts[0].rstrip(":")] = int(parts[1]) * mult
    return out


def loadavg():
    parts = read_text("/proc/loadavg", "0 0 0 0/0 0").split()
    return float(parts[0]), float(parts[1]), float(parts[2])


def procstat():
    out = {}
    for line in read_text("/proc/stat").splitlines():
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


def diskstats(names):
    """{name: (reads, read_sectors, writes, write_sectors)} for the named devices."""
    out = {}
    wanted = set(names)
    for line in read_text("/proc/diskstats").splitlines():
        p = line.split()
        if len(p) >= 10 and p[2] in wanted:
            out[p[2]] = (int(p[3]), int(p[5]), int(p[7]), int(p[9]))
    return out


def arcstats():
    out = {}
    text = read_text("/proc/spl/kstat/zfs/arcstats")
    for line in text.splitlines()[2:]:
        p = line.split()
        if len(p) == 3:
            try:
                out[p[0]] = int(p[2])
            except ValueError:
                pass
    return out


# ---------------------------------------------------------------- devices
def _sys_block_name(major, minor):
    link = "/sys/dev/block/%d:%d" % (major, minor)
    if not os.path.exists(link):
        return None
    return os.path.realpath(link)


def physical_devices(path):
    """Whole disks under a path (a block device or a file's filesystem); [] when there are none (tmpfs, zfs)."""
    try:
        st = os.stat(path)
    except OSError:
        return []
    dev = st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev
    sysdir = _sys_block_name(os.major(dev), os.minor(dev))
    return _disks_of(sysdir) if sysdir else []


def _disks_of(sysdir, depth=0):
    if depth > 8:
        return []
    name = os.path.basename(sysdir)
    if os.path.exists(os.path.join(sysdir, "partition")):
        return _disks_of(os.path.dirname(sysdir), depth + 1)
    slaves = os.path.join(sysdir, "slaves")
    if os.path.isdir(slaves) and os.listdir(slaves):
        out = []
        for s in sorted(os.listdir(slaves)):
            out += _disks_of(os.path.realpath(os.path.join(slaves, s)), depth + 1)
        return sorted(set(out))
    return [name]


def block_info(path):
    """What the safety check needs about a block device: mounts, holders, partitions, signatures."""
    info = {"path": path, "exists": os.path.exists(path)}
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
    parts = []
    if sysdir:
        for entry in sorted(os.listdir(sysdir)):
            if entry.startswith(name) and os.path.exists(os.path.join(sysdir, entry, "partition")):
                parts.append(entry)
    info["partitions"] = parts
    majmin = {"%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))}
    for p in parts:
        majmin.add(read_text(os.path.join(sysdir, p, "dev")).strip())
    mounts = []
    for line in read_text("/proc/self/mountinfo").splitlines():
        f = line.split()
        if len(f) > 4 and f[2] in majmin:
            mounts.append(f[4])
    devnames = {"/dev/" + n for n in [name] + parts}
    for line in read_text("/proc/swaps").splitlines()[1:]:
        f = line.split()
        if f and os.path.realpath(f[0]) in devnames:
            mounts.append("[swap]")
    info["mounts"] = mounts
    sigs = []
    for dev in [real] + ["/dev/" + p for p in parts]:
        try:
            out = subprocess.run(["blkid", "-p", "-o", "export", dev], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            info["blkid_error"] = str(e)
            continue
        kv = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
        for key in ("TYPE", "PTTYPE"):
            if kv.get(key):
                sigs.append("%s%s=%s" % ("" if dev == real else dev + ":", key, kv[key]))
        if out.returncode not in (0, 2):
            info["blkid_error"] = out.stderr.strip()
    info["signatures"] = sigs
    model = read_text(os.path.join(sysdir or "", "device", "model")).strip() if sysdir else ""
    info["model"] = model
    return info


# ---------------------------------------------------------------- ops
def op_probe(req):
    """Fingerprint facts, plus what the runner needs to know about each path it will use."""
    uname = os.uname()
    cpu_model = ""
    for line in read_text("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            cpu_model = line.split(":", 1)[1].strip()
            break
    try:
        fio = subprocess.run(["fio", "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except OSError:
        fio = ""
    osrel = {}
    for line in read_text("/etc/os-release").splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            osrel[k] = v.strip('"')
    zfs_version = read_text("/sys/module/zfs/version").strip()
    zfs_params = {}
    pdir = "/sys/module/zfs/parameters"
    if zfs_version and os.path.isdir(pdir):
        for name in sorted(os.listdir(pdir)):
            zfs_params[name] = read_text(os.path.join(pdir, name)).strip()
    paths = {}
    for p in req.get("paths", []):
        entry = {"exists": os.path.exists(p), "is_dir": os.path.isdir(p)}
        parent = os.path.dirname(p.rstrip("/")) or "/"
        entry["parent_is_dir"] = os.path.isdir(parent)
        entry["writable"] = os.access(p if entry["exists"] else parent, os.W_OK)
        entry["devices"] = physical_devices(p if entry["exists"] else parent)
        paths[p] = entry
    blocks = {p: block_info(p) for p in req.get("block_devices", [])}
    models = {}
    for p in list(paths.values()):
        for d in p["devices"]:
            models[d] = read_text("/sys/block/%s/device/model" % d).strip()
    for b in blocks.values():
        if b.get("name"):
            models[b["name"]] = b.get("model", "")
    mem = meminfo()
    load = loadavg()
    emit("result", fingerprint={
        "kernel": uname.release, "arch": uname.machine, "hostname": uname.nodename,
        "os": osrel.get("PRETTY_NAME", ""), "cpu_model": cpu_model, "cpu_count": os.cpu_count(),
        "mem_bytes": mem.get("MemTotal", 0), "fio_version": fio, "python": sys.version.split()[0],
        "zfs_version": zfs_version, "device_models": models,
    }, paths=paths, block_devices=blocks, zfs_params=zfs_params, load1=load[0], dirty_bytes=mem.get("Dirty", 0) + mem.get("Writeback", 0),
        swap_used_bytes=mem.get("SwapTotal", 0) - mem.get("SwapFree", 0), zfs=bool(zfs_version),
        boot_id=read_text("/proc/sys/kernel/random/boot_id").strip())


def _sample_layout(path, size, samples=16, chunk=65536):
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


def _settled_stat(path, size, sync_cmd, max_s=60.0):
    """stat() once allocation is visible: ZFS updates st_blocks only when the txg holding the writes syncs,
    so flush (`sync`, then e.g. `zpool sync POOL`) and poll briefly before judging the file sparse."""
    t0 = time.monotonic()
    st = os.stat(path)
    if st.st_blocks * 512 >= size * 0.98:
        return st
    for argv in (["sync"], sync_cmd):
        if argv:
            try:
                subprocess.run(argv, timeout=max_s, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            except (OSError, subprocess.TimeoutExpired):
                pass
    while time.monotonic() - t0 < max_s:
        st = os.stat(path)
        if st.st_blocks * 512 >= size * 0.98:
            break
        time.sleep(0.5)
    return st


def op_prepare_file(req):
    """Lay out a test file with incompressible data, then verify it is allocated (not sparse)."""
    path, size = req["path"], int(req["size"])
    directory = os.path.dirname(path)
    created_dir = False
    if not os.path.isdir(directory):
        os.makedirs(directory)
        created_dir = True
    laid_out = False
    st = _settled_stat(path, size, req.get("sync_cmd")) if os.path.exists(path) else None
    allocated = st.st_blocks * 512 if st else 0
    need = st is None or st.st_size != size or allocated < size * 0.98 or req.get("force")
    if not need and _sample_layout(path, size)[0] < 0.9:
        need = True
    t0 = time.monotonic()
    if need:
        chunk = 1 << 20
        with open(path, "wb") as f:
            left = size
            while left > 0:
                n = min(chunk, left)
                f.write(os.urandom(n))
                left -= n
            f.flush()
            os.fsync(f.fileno())
        laid_out = True
    layout_s = time.monotonic() - t0
    st = _settled_stat(path, size, req.get("sync_cmd"))
    ratio, zero_fraction = _sample_layout(path, size)
    emit("result", checks={
        "layout.apparent_bytes": st.st_size, "layout.allocated_bytes": st.st_blocks * 512,
        "layout.sparse": st.st_blocks * 512 < st.st_size * 0.98,
        "layout.sample_compress_ratio": round(ratio, 4),
        "layout.zero_fraction": round(zero_fraction, 4),
        "layout.laid_out_now": laid_out, "layout.seconds": round(layout_s, 3),
        "layout.verified": st.st_size == size and st.st_blocks * 512 >= st.st_size * 0.98 and ratio > 0.9,
    }, created_dir=created_dir)


def op_prepare_raw(req):
    """Fill a confirmed raw device's test region with incompressible data unless samples show it already is.

    Reads of never-written blocks (a new disk, a sparse virtual disk) can be served without touching the
    medium; a region that samples as incompressible has been written and is left alone."""
    path, size = req["path"], int(req["size"])
    before = _sample_layout(path, size)[0]
    laid_out = False
    t0 = time.monotonic()
    if before < 0.9:
        fd = os.open(path, os.O_WRONLY)
        try:
            left, chunk = size, 1 << 20
            while left > 0:
                n = min(chunk, left)
                os.write(fd, os.urandom(n))
                left -= n
            os.fsync(fd)
        finally:
            os.close(fd)
        laid_out = True
    ratio, zero_fraction = _sample_layout(path, size)
    emit("result", checks={"layout.apparent_bytes": size, "layout.sample_compress_ratio": round(ratio, 4),
                           "layout.zero_fraction": round(zero_fraction, 4),
                           "layout.laid_out_now": laid_out, "layout.seconds": round(time.monotonic() - t0, 3),
                           "layout.sparse": False, "layout.verified": ratio > 0.9})


class Sampler:
    """1 Hz series of load, CPU, context switches, processes, dirty memory, device and ARC counters."""

    def __init__(self, devices, interval=1.0):
        self.devices = list(devices)
        self.interval = interval
        self.series = {k: [] for k in ("t", "load1", "load5", "cpu_user_pct", "cpu_sys_pct", "cpu_iowait_pct",
                                       "ctxt_per_s", "forks_per_s", "procs_running", "procs_blocked",
                                       "dirty_bytes", "writeback_bytes", "dev_read_iops", "dev_write_iops",
                                       "dev_iops", "dev_bw_bytes", "dev_avg_io_bytes", "arc_hits_per_s",
                                       "arc_misses_per_s")}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.cpu_s = 0.0
        self.first = None
        self.last = None

    def snapshot(self):
        return {"t": time.monotonic(), "stat": procstat(), "disk": diskstats(self.devices), "mem": meminfo(),
                "load": loadavg(), "arc": arcstats()}

    def __enter__(self):
        self.t0 = time.monotonic()
        self.first = self.prev = self.snapshot()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.last = self.snapshot()

    def _loop(self):
        c0 = time.thread_time()
        while not self._stop.wait(self.interval):
            cur = self.snapshot()
            self._record(self.prev, cur)
            self.prev = cur
        self.cpu_s = time.thread_time() - c0

    def _record(self, a, b):
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

    def summary(self):
        """Whole-run figures from the first and last snapshots (not from the rounded series)."""
        a, b, s = self.first, self.last, self.series
        dt = max(1e-6, b["t"] - a["t"])
        m = {"sys.load1_start": a["load"][0], "sys.load5_start": a["load"][1],
             "sys.load1_end": b["load"][0], "sys.load5_end": b["load"][1],
             "sys.load1_max": max(s["load1"] + [a["load"][0], b["load"][0]]),
             "sys.ctxt_per_s": round((b["stat"].get("ctxt", 0) - a["stat"].get("ctxt", 0)) / dt, 2),
             "sys.forks_per_s": round((b["stat"].get("processes", 0) - a["stat"].get("processes", 0)) / dt, 3),
             "sys.procs_blocked_max": max(s["procs_blocked"] + [b["stat"].get("procs_blocked", 0)]),
             "sys.dirty_max_bytes": max(s["dirty_bytes"] + [a["mem"].get("Dirty", 0), b["mem"].get("Dirty", 0)]),
             "sys.sampler_cpu_s": round(self.cpu_s, 4), "sys.sampled_s": round(dt, 3),
             "sys.samples": len(s["t"])}
        for k, v in cpu_pct(a["stat"], b["stat"]).items():
            m["sys." + k] = v
        if self.devices:
            for k, v in disk_delta(a["disk"], b["disk"], dt).items():
                m["dev." + k] = v
            m["dev.read_bytes"] = sum((b["disk"][n][1] - a["disk"][n][1]) * 512 for n in b["disk"] if n in a["disk"])
            m["dev.write_bytes"] = sum((b["disk"][n][3] - a["disk"][n][3]) * 512 for n in b["disk"] if n in a["disk"])
        return m


def cpu_pct(a, b):
    ca, cb = a.get("cpu", [0] * 8), b.get("cpu", [0] * 8)
    d = [y - x for x, y in zip(ca, cb)]
    total = sum(d) or 1
    return {"cpu_user_pct": round(100.0 * (d[0] + d[1]) / total, 2),
            "cpu_sys_pct": round(100.0 * (d[2] + d[5] + d[6]) / total, 2),
            "cpu_iowait_pct": round(100.0 * d[4] / total, 2)}


def disk_delta(a, b, dt):
    r = w = rs = ws = 0
    for name, vb in b.items():
        va = a.get(name)
        if va:
            r += vb[0] - va[0]
            rs += vb[1] - va[1]
            w += vb[2] - va[2]
            ws += vb[3] - va[3]
    ios = r + w
    return {"read_iops": round(r / dt, 2), "write_iops": round(w / dt, 2), "iops": round(ios / dt, 2),
            "read_bw_bytes": round(rs * 512 / dt, 1), "write_bw_bytes": round(ws * 512 / dt, 1),
            "bw_bytes": round((rs + ws) * 512 / dt, 1),
            "avg_io_bytes": round((rs + ws) * 512 / ios, 1) if ios else 0.0}


def drain(max_s, threshold_bytes, sync_cmd=None):
    """Seconds until written data is durable: `sync` (and e.g. `zpool sync POOL`), then poll /proc/meminfo
    until dirty + writeback memory is below the threshold; bounded by max_s."""
    t0 = time.monotonic()
    m = meminfo()
    start = m.get("Dirty", 0) + m.get("Writeback", 0)
    for argv in (["sync"], sync_cmd):
        if not argv:
            continue
        try:
            subprocess.run(argv, timeout=max_s, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except (subprocess.TimeoutExpired, OSError):
            pass
    while True:
        m = meminfo()
        left = m.get("Dirty", 0) + m.get("Writeback", 0)
        if left <= threshold_bytes or time.monotonic() - t0 > max_s:
            break
        time.sleep(0.1)
    return time.monotonic() - t0, start, left


def op_fio_run(req):
    """Run fio (or a given command) once under a watchdog with samplers; measure wall time and drain; return everything."""
    workdir = req["workdir"]
    os.makedirs(workdir, exist_ok=True)
    job = os.path.join(workdir, "job.fio")
    out = os.path.join(workdir, "fio.json")
    if os.path.exists(out):
        os.unlink(out)
    deadline = float(req["deadline_s"])
    if req.get("argv"):  # a copy test (cp, rsync, dd): timed, sampled and drained exactly like fio
        argv = list(req["argv"])
    else:
        with open(job, "w") as f:
            f.write(req["job_text"])
        argv = ["fio", "--output-format=json", "--output=" + out, job]
    sync_cmd = req.get("sync_cmd")
    presync_s = 0.0
    if sync_cmd:  # start from a clean slate: no dirty data of the previous test carried into this one
        presync_s = drain(float(req.get("drain_max_s", 600)), int(req.get("drain_threshold_bytes", 1 << 20)),
                          sync_cmd)[0]
    files_before = {f: read_text(f) for f in req.get("capture_files", [])}
    during = None
    if req.get("during_cmd"):
        during = subprocess.Popen(req["during_cmd"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  start_new_session=True)
        with _lock:
            _children.append(during.pid)
    with Sampler(req.get("devices", []), float(req.get("interval", 1.0))) as sampler:
        t0 = time.monotonic()
        if req.get("observe"):  # the job runs elsewhere (a test guest): sample until told to stop
            emit("observing")
            rc, err, timed_out, pid = 0, b"", not _stop.wait(deadline), None
        else:
            rc, err, timed_out, pid = _run_job(argv, deadline)
        wall = time.monotonic() - t0
        drain_s, dirty_start, dirty_end = drain(float(req.get("drain_max_s", 600)),
                                                int(req.get("drain_threshold_bytes", 1 << 20)), sync_cmd)
    during_out = ""
    if during is not None:
        try:
            os.killpg(during.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        during_out = during.communicate()[0].decode(errors="replace")
        with _lock:
            _children.remove(during.pid)
    files_after = {f: read_text(f) for f in req.get("capture_files", [])}
    after = []
    for argv_ in req.get("after_cmds", []):
        try:
            cp = subprocess.run(argv_, capture_output=True, text=True, timeout=120)
            after.append({"argv": argv_, "rc": cp.returncode, "stdout": cp.stdout, "stderr": cp.stderr[-2000:]})
        except (OSError, subprocess.TimeoutExpired) as e:
            after.append({"argv": argv_, "rc": -1, "stdout": "", "stderr": str(e)})
    fio_json = read_text(out)
    emit("result", exit_status=rc, timed_out=timed_out, wall_s=wall, drain_s=drain_s,
         fio_json=fio_json, stderr_tail=err.decode(errors="replace")[-4000:], samples=sampler.series,
         metrics=sampler.summary(), checks={"drain.dirty_start_bytes": dirty_start,
                                            "drain.dirty_end_bytes": dirty_end,
                                            "preflight.presync_s": round(presync_s, 3)},
         pid=pid, files_before=files_before, files_after=files_after, during_output=during_out,
         after_outputs=after)


def _run_job(argv, deadline):
    """Run fio (or a copy command) in a process group of its own under the watchdog deadline.
    Returns (exit status, stderr, timed out, pid)."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    with _lock:
        _children.append(proc.pid)
    emit("started", pid=proc.pid)
    timed_out = False
    try:
        _, err = proc.communicate(timeout=deadline)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
    with _lock:
        _children.remove(proc.pid)
    return proc.returncode, err, timed_out, proc.pid


def op_cooldown(req):
    """Wait a fixed time, then until load1 and dirty data fall below thresholds (bounded)."""
    t0 = time.monotonic()
    time.sleep(float(req.get("fixed_s", 0)))
    max_s = float(req.get("max_s", 0))
    load1_max = req.get("load1")
    dirty_max = req.get("dirty_bytes")
    while time.monotonic() - t0 < max_s:
        m = meminfo()
        ok_load = load1_max is None or loadavg()[0] <= float(load1_max)
        ok_dirty = dirty_max is None or m.get("Dirty", 0) + m.get("Writeback", 0) <= int(dirty_max)
        if ok_load and ok_dirty:
            break
        time.sleep(1.0)
    m = meminfo()
    emit("result", waited_s=time.monotonic() - t0, load1=loadavg()[0],
         dirty_bytes=m.get("Dirty", 0) + m.get("Writeback", 0))


def op_end_pids(req):
    """End processes a crashed campaign left behind: only the given pids, only if still fio with our job."""
    ended = []
    for pid, marker in req.get("pids", []):
        cmd = read_text("/proc/%d/cmdline" % int(pid)).replace("\0", " ")
        if cmd.startswith("fio ") and marker in cmd:
            try:
                os.killpg(int(pid), signal.SIGKILL)
                ended.append(pid)
            except (ProcessLookupError, PermissionError):
                pass
    emit("result", ended=ended)


OPS = {"probe": op_probe, "prepare_file": op_prepare_file, "prepare_raw": op_prepare_raw, "fio_run": op_fio_run, "cooldown": op_cooldown,
       "end_pids": op_end_pids}


def _read_request_line():
    """The first line of stdin, read from the raw fd (a buffered reader's lock would stall interpreter exit)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(0, 1)
        if not chunk:
            break
        data += chunk
    return data.decode()


def main():
    line = _read_request_line()
    try:
        req = json.loads(line)
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
