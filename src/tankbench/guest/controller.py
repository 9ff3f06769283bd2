#!/usr/bin/env python3
"""tankbench guest controller: runs on the benchmarked host, starts the test guest's qemu and relays to it.

Stdlib only (it is copied to the host like the agent). Protocol: JSON request lines on stdin, JSON event
lines on stdout. The first request is {"op": "start", "argv": [...], "dir": ..., "timeout": s}; it answers
{"event": "ready", ...} once the guest-side runner has said READY. Then, one at a time:
  {"op": "guest", "gop": "fio"|"exec"|"devices", "payload": text}  -> {"event": "result", "rc", "files"}
  {"op": "qmp", "execute": name, "arguments": {...}}               -> {"event": "result", "return": ...}
  {"op": "cpu"}                                                     -> qemu's user+system CPU seconds
  {"op": "quit"}                                                    -> guest powered off, qemu gone
Errors are {"event": "error", "message": ...}. stdin reaching EOF (tankbench exited or was killed, or its
ssh connection dropped) ends qemu and then the controller; qemu also gets SIGKILL if the controller dies
(prctl PR_SET_PDEATHSIG), so a guest never outlives the process that controls it.
"""

import base64
import ctypes
import io
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time

PR_SET_PDEATHSIG = 1
_qemu = None  # type: subprocess.Popen | None
_out_lock = threading.Lock()
#: set when stdin reached EOF (our owner is gone): the exit status is then 75, whichever thread exits first
_orphaned = threading.Event()


def emit(event, **fields):
    """Print one event line."""
    fields["event"] = event
    with _out_lock:
        sys.stdout.write(json.dumps(fields) + "\n")
        sys.stdout.flush()


def _die_with_parent():
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    os.setsid()


def end_qemu(grace=5.0):
    """SIGTERM, then SIGKILL, the qemu this controller started."""
    proc = _qemu
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _read_stdin(requests):
    for line in sys.stdin:
        line = line.strip()
        if line:
            requests.put(line)
    _orphaned.set()  # before qemu ends: the main thread then sees its channel close, and must not exit 1
    end_qemu(grace=2.0)
    os._exit(75)


def _connect(path, timeout):
    deadline = time.monotonic() + timeout
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            return s
        except OSError:
            s.close()
            if time.monotonic() > deadline or (_qemu is not None and _qemu.poll() is not None):
                raise
            time.sleep(0.05)


class Qmp:
    """A QMP connection (events are skipped)."""

    def __init__(self, path):
        self.sock = _connect(path, 30)
        self.f = self.sock.makefile("rwb")
        self.f.readline()  # greeting
        self.call("qmp_capabilities")

    def call(self, execute, arguments=None):
        msg = {"execute": execute}
        if arguments:
            msg["arguments"] = arguments
        self.f.write(json.dumps(msg).encode() + b"\n")
        self.f.flush()
        while True:
            line = self.f.readline()
            if not line:
                raise OSError("QMP connection closed")
            reply = json.loads(line)
            if "error" in reply:
                raise RuntimeError(f"{execute}: {reply['error'].get('desc', reply['error'])}")
            if "return" in reply:
                return reply["return"]


class Channel:
    """The virtio-serial control channel: request lines out, "<id> <key> <b64>" lines back."""

    def __init__(self, path):
        self.sock = _connect(path, 30)
        self.f = self.sock.makefile("rwb")
        self.next_id = 1

    def line(self, timeout):
        self.sock.settimeout(timeout)
        try:
            raw = self.f.readline()
        except TimeoutError:
            raise TimeoutError(f"no answer from the guest within {timeout:.0f} s") from None
        if not raw:
            raise OSError("the guest closed the control channel")
        return raw.decode(errors="replace").rstrip("\n").split(" ", 2)

    def request(self, gop, payload, timeout):
        """Send one request; its exit status and {file name: text} once the guest says END."""
        rid = str(self.next_id)
        self.next_id += 1
        data = base64.b64encode(payload.encode()).decode() or "-"
        self.f.write(f"{rid} {gop} {data}\n".encode())
        self.f.flush()
        files = {}
        chunks = None  # base64 lines of a FILES tar, while one is being received
        while True:
            parts = self.line(timeout)
            if chunks is not None and len(parts) == 1:  # base64 has no spaces; every protocol line has
                chunks.append(parts[0])
                continue
            if parts[0] != rid:
                continue  # a stale line of an earlier, timed-out request
            if parts[1] == "FILES":
                chunks = []
                continue
            if chunks:
                files.update(untar(base64.b64decode("".join(chunks))))
            chunks = None
            if parts[1] == "END":
                return int(parts[2]), files


def untar(data):
    """{member name: text} of an uncompressed tar."""
    out = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar.getmembers():
            f = tar.extractfile(member)
            if f is not None:
                out[member.name] = f.read().decode(errors="replace")
    return out


def cpu_seconds(pid):
    """utime + stime of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start(req):
    """Start qemu; wait for the guest's READY line; return (channel, qmp, ready event fields)."""
    global _qemu
    run_dir = req["dir"]
    os.makedirs(run_dir, mode=0o700, exist_ok=True)
    for name in ("ctl.sock", "qmp.sock"):
        try:
            os.unlink(os.path.join(run_dir, name))
        except FileNotFoundError:
            pass
    t0 = time.monotonic()
    with open(os.path.join(run_dir, "qemu.log"), "wb") as log:
        _qemu = subprocess.Popen(
            req["argv"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
            cwd=run_dir,
        )
    emit("started", pid=_qemu.pid)
    chan = Channel(os.path.join(run_dir, "ctl.sock"))
    qmp = Qmp(os.path.join(run_dir, "qmp.sock"))
    parts = chan.line(float(req.get("timeout", 900)))
    while parts[0] != "0" or parts[1] != "READY":
        parts = chan.line(float(req.get("timeout", 900)))
    devices = base64.b64decode(parts[2] if len(parts) > 2 else "").decode()
    return chan, qmp, {"pid": _qemu.pid, "boot_s": round(time.monotonic() - t0, 2), "devices": devices}


def handle(req, chan, qmp):
    """One request after start; returns the result event's fields."""
    op = req.get("op")
    if op == "guest":
        t0 = time.monotonic()
        rc, files = chan.request(req["gop"], req.get("payload", ""), float(req.get("timeout", 3600)))
        return {
            "rc": rc,
            "files": files,
            "host_wall_s": round(time.monotonic() - t0, 3),
            "qemu_cpu_s": cpu_seconds(_qemu.pid),
        }
    if op == "qmp":
        return {"return": qmp.call(req["execute"], req.get("arguments"))}
    if op == "cpu":
        return {"qemu_cpu_s": cpu_seconds(_qemu.pid)}
    raise ValueError(f"unknown op {op!r}")


def quit_guest(chan, timeout=60.0):
    """Ask the guest to power off; end qemu if it does not exit in time."""
    try:
        chan.request("quit", "", 30)
    except (OSError, TimeoutError, ValueError):
        pass
    try:
        _qemu.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    end_qemu()
    return {"returncode": _qemu.returncode}


def main():
    requests = queue.Queue()
    threading.Thread(target=_read_stdin, args=(requests,), daemon=True).start()
    first = json.loads(requests.get())
    try:
        chan, qmp, ready = start(first)
    except Exception as e:  # the guest never became ready: say why, leave nothing running
        exited = _qemu is not None and _qemu.poll() is not None
        end_qemu()
        message = f"{type(e).__name__}: {e}"
        if exited:
            with open(os.path.join(first["dir"], "qemu.log"), errors="replace") as f:
                message = f"qemu exited with status {_qemu.returncode}: {f.read()[-1500:].strip()}"
        try:
            with open(os.path.join(first["dir"], "console.log"), errors="replace") as f:
                message += "\nguest console (last lines):\n" + f.read()[-1500:]
        except OSError:
            pass
        emit("error", message=message)
        return 1
    emit("ready", **ready)
    while True:
        req = json.loads(requests.get())
        if req.get("op") == "quit":
            emit("result", **quit_guest(chan))
            return 0
        try:
            emit("result", **handle(req, chan, qmp))
        except Exception as e:  # one failed request is reported; the guest keeps serving
            emit("error", message=f"{type(e).__name__}: {e}")
            if _qemu.poll() is not None:
                return 1


if __name__ == "__main__":
    rc = 1
    try:
        rc = main()
    finally:
        end_qemu()
    sys.exit(75 if _orphaned.is_set() else rc)
