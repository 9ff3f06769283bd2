#!/usr/bin/env python3
"""tankbench guest controller: runs on the benchmarked host, starts the test guest's qemu and relays to it.

Stdlib only (it is copied to the host like the agent). Protocol: JSON request lines on stdin, JSON event
lines on stdout. The first request is {"op": "start", "argv": [...], "dir": ..., "timeout": s}; it answers
{"event": "ready", ...} once the guest-side runner has said READY. Then, one at a time:
  {"op": "guest", "gop": "fio"|"exec"|"devices", "payload": text}  -> {"event": "result", "rc", "files"}
      with "on_pause": {"argv": [...], "max_pauses": n} the controller watches qemu while the guest works:
      when qemu stops the VM on an I/O error (its werror policy), it runs argv on the host (e.g. frees
      space), resumes the VM (`cont`) and records the pause; the result then has "pauses" and "io_errors"
  {"op": "qmp", "execute": name, "arguments": {...}}               -> {"event": "result", "return": ...}
  {"op": "cpu"}                                                     -> qemu's user+system CPU seconds
  {"op": "quit"}                                                    -> guest powered off, qemu gone
Errors are {"event": "error", "message": ...}. stdin reaching EOF (tankbench exited or was killed, or its
ssh connection dropped) ends qemu and then the controller; qemu also gets SIGKILL if the controller dies
(prctl PR_SET_PDEATHSIG), so a guest never outlives the process that controls it.
"""

# annotations stay unevaluated strings: like the agent, the controller runs on whatever python3 >= 3.7 the host
# has, so they may use newer syntax (dict[str, Any], X | None), while the typing names used at run time exist
# since 3.7
from __future__ import annotations

import base64
import ctypes
import io
import json
import os
import queue
import select
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # typing-only names: never imported on the host
    from collections.abc import Sequence

PR_SET_PDEATHSIG = 1
_qemu: subprocess.Popen[bytes] | None = None
_out_lock = threading.Lock()
#: set when stdin reached EOF (our owner is gone): the exit status is then 75, whichever thread exits first
_orphaned = threading.Event()


def emit(event: str, **fields: Any) -> None:
    """Print one event line."""
    fields["event"] = event
    with _out_lock:
        sys.stdout.write(json.dumps(fields) + "\n")
        sys.stdout.flush()


def _die_with_parent() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    os.setsid()


def end_qemu(grace: float = 5.0) -> None:
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


def _read_stdin(requests: queue.Queue[str]) -> None:
    for line in sys.stdin:
        line = line.strip()
        if line:
            requests.put(line)
    _orphaned.set()  # before qemu ends: the main thread then sees its channel close, and must not exit 1
    end_qemu(grace=2.0)
    os._exit(75)


def _connect(path: str, timeout: float) -> socket.socket:
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


class Lines:
    """Lines from a stream socket, read through select(): a socket file object is unusable after one timed-out
    read ("cannot read from timed out object"), and a request that timed out must not end the channel."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = b""

    def read(self, timeout: float) -> bytes | None:
        """The next line without its newline, or None after `timeout` seconds without a complete one."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                return None
            data = self.sock.recv(65536)
            if not data:
                raise OSError("connection closed")
            self.buf += data
        line, _, self.buf = self.buf.partition(b"\n")
        return line


class Qmp:
    """A QMP connection. Events that arrive while a command waits for its answer are kept (the last
    EVENT_BACKLOG), so a watcher sees a STOP that came in during its own query. Reads go through select()
    on the raw socket: a socket file object is unusable after one timed-out read."""

    EVENT_BACKLOG = 256

    def __init__(self, path: str) -> None:
        self.sock = _connect(path, 30)
        self.lines = Lines(self.sock)
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self._message(30)  # greeting
        self.call("qmp_capabilities")

    def _message(self, timeout: float) -> dict[str, Any] | None:
        """The next JSON message from qemu, or None after `timeout` seconds without one."""
        line = self.lines.read(timeout)
        return None if line is None else json.loads(line)

    def _keep(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        del self.events[: -self.EVENT_BACKLOG]

    def call(self, execute: str, arguments: dict[str, Any] | None = None, timeout: float = 120.0) -> Any:
        """One command; its "return" value (RuntimeError with qemu's message on an error reply)."""
        msg: dict[str, Any] = {"execute": execute}
        if arguments:
            msg["arguments"] = arguments
        with self.lock:
            self.sock.sendall(json.dumps(msg).encode() + b"\n")
            while True:
                reply = self._message(timeout)
                if reply is None:
                    raise TimeoutError(f"QMP {execute}: no answer within {timeout:.0f} s")
                if "event" in reply:
                    self._keep(reply)
                elif "error" in reply:
                    raise RuntimeError(f"{execute}: {reply['error'].get('desc', reply['error'])}")
                elif "return" in reply:
                    return reply["return"]

    def event(self, timeout: float) -> dict[str, Any] | None:
        """The oldest event not yet taken, waiting up to `timeout` seconds for one; None if none came."""
        with self.lock:
            if not self.events:
                msg = self._message(timeout)
                if msg is not None and "event" in msg:
                    self._keep(msg)
            return self.events.pop(0) if self.events else None

    def forget_events(self) -> None:
        """Drop the events kept so far (those of earlier requests)."""
        with self.lock:
            self.events.clear()


def _event_time(ev: dict[str, Any]) -> float:
    ts = ev.get("timestamp") or {}
    return round(ts.get("seconds", 0) + ts.get("microseconds", 0) / 1e6, 6) or round(time.time(), 6)


class PauseWatcher:
    """While one guest request runs: resume the VM each time qemu stops it on an I/O error, after running a
    host command (e.g. one that frees space), and record every pause and every BLOCK_IO_ERROR qemu reported.

    qemu stops the VM on a write error when the disk's werror policy says so (enospc: on ENOSPC only, the
    default; stop: on any error); the guest's request simply waits, so the guest never notices. Runs in its
    own thread; the main thread is blocked reading the guest's channel meanwhile and never touches QMP."""

    def __init__(self, qmp: Qmp, argv: Sequence[str] | None, max_pauses: int = 3, argv_timeout: float = 300.0) -> None:
        self.qmp = qmp
        self.argv = list(argv or [])
        self.max_pauses = int(max_pauses)
        self.argv_timeout = float(argv_timeout)
        self.pauses: list[dict[str, Any]] = []
        # (node, operation, action, reason, nospace) -> {..., "count", "first_at"}
        self.io_errors: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        self.errors_since_pause: list[dict[str, Any]] = []
        self.failure = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.qmp.forget_events()
        self._thread.start()

    def stop(self) -> dict[str, Any]:
        """End the watch (after the guest answered); the records."""
        self._stop.set()
        self._thread.join(timeout=60)
        return {
            "pauses": self.pauses,
            "io_errors": list(self.io_errors.values()),
            "watch_error": self.failure,
        }

    def _run(self) -> None:
        try:
            if self.qmp.call("query-status").get("status") == "io-error":  # stopped before the watch began
                self._paused(round(time.time(), 6))
            while not self._stop.is_set():
                ev = self.qmp.event(0.5)
                if ev is None:
                    continue
                if ev.get("event") == "BLOCK_IO_ERROR":
                    self._io_error(ev)
                elif ev.get("event") == "STOP" and self.qmp.call("query-status").get("status") == "io-error":
                    self._paused(_event_time(ev))
        except Exception as e:  # the watch failed: say so in the result, never hang the request
            self.failure = f"{type(e).__name__}: {e}"

    def _io_error(self, ev: dict[str, Any]) -> None:
        d = ev.get("data", {})
        key = (d.get("node-name", ""), d.get("operation", ""), d.get("action", ""), d.get("reason", ""))
        rec = self.io_errors.setdefault(
            key,
            {
                "node": key[0],
                "operation": key[1],
                "action": key[2],
                "reason": key[3],
                "nospace": bool(d.get("nospace", False)),
                "count": 0,
                "first_at": _event_time(ev),
            },
        )
        rec["count"] += 1
        if len(self.errors_since_pause) < 8:
            self.errors_since_pause.append(dict(d))

    def _paused(self, at: float) -> None:
        """qemu stopped the VM on an I/O error: record, run the host command, resume."""
        rec: dict[str, Any] = {"at": at, "status": "io-error", "resumed": False}
        rec["io_status"] = {
            b["inserted"]["node-name"]: b.get("io-status", "")
            for b in self.qmp.call("query-block")
            if b.get("inserted") and b.get("io-status", "ok") != "ok"
        }
        rec["wr_bytes"] = {
            b.get("node-name", b.get("qdev", "")): b["stats"]["wr_bytes"] for b in self.qmp.call("query-blockstats")
        }
        rec["errors"], self.errors_since_pause = self.errors_since_pause, []
        self.pauses.append(rec)
        if len(self.pauses) > self.max_pauses:
            rec["note"] = f"left paused: more than {self.max_pauses} pauses"
            self._stop.set()
            return
        if self.argv:
            t0 = time.monotonic()
            try:
                res = subprocess.run(self.argv, capture_output=True, text=True, timeout=self.argv_timeout)
                rec["command"] = {"rc": res.returncode, "output": (res.stdout + res.stderr)[-500:]}
            except (OSError, subprocess.TimeoutExpired) as e:
                rec["command"] = {"rc": None, "output": f"{type(e).__name__}: {e}"}
            rec["command"]["seconds"] = round(time.monotonic() - t0, 3)
        self.qmp.call("cont")
        rec["resumed"] = True
        rec["resumed_at"] = round(time.time(), 6)
        rec["paused_s"] = round(rec["resumed_at"] - at, 3)


class Channel:
    """The virtio-serial control channel: request lines out, "<id> <key> <b64>" lines back."""

    def __init__(self, path: str) -> None:
        self.sock = _connect(path, 30)
        self.lines = Lines(self.sock)
        self.next_id = 1

    def line(self, timeout: float) -> list[str]:
        try:
            raw = self.lines.read(timeout)
        except OSError:
            raise OSError("the guest closed the control channel") from None
        if raw is None:
            raise TimeoutError(f"no answer from the guest within {timeout:.0f} s")
        return raw.decode(errors="replace").split(" ", 2)

    def request(self, gop: str, payload: str, timeout: float) -> tuple[int, dict[str, str]]:
        """Send one request; its exit status and {file name: text} once the guest says END."""
        rid = str(self.next_id)
        self.next_id += 1
        data = base64.b64encode(payload.encode()).decode() or "-"
        self.sock.sendall(f"{rid} {gop} {data}\n".encode())
        files: dict[str, str] = {}
        chunks: list[str] | None = None  # base64 lines of a FILES tar, while one is being received
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


def untar(data: bytes) -> dict[str, str]:
    """{member name: text} of an uncompressed tar."""
    out = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar.getmembers():
            f = tar.extractfile(member)
            if f is not None:
                out[member.name] = f.read().decode(errors="replace")
    return out


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start(req: dict[str, Any]) -> tuple[Channel, Qmp, dict[str, Any]]:
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


def handle(req: dict[str, Any], chan: Channel, qmp: Qmp) -> dict[str, Any]:
    """One request after start; returns the result event's fields."""
    assert _qemu is not None  # start() started it
    op = req.get("op")
    if op == "guest":
        t0 = time.monotonic()
        watch = None
        if req.get("on_pause") is not None:
            opts = req["on_pause"]
            watch = PauseWatcher(qmp, opts.get("argv"), opts.get("max_pauses", 3), opts.get("timeout", 300))
            watch.start()
        try:
            rc, files = chan.request(req["gop"], req.get("payload", ""), float(req.get("timeout", 3600)))
        except TimeoutError as e:
            if watch is None:
                raise
            # a watched request that did not end (e.g. the VM was left paused): its pauses are the record,
            # so answer like a timed-out command; the guest's late reply is skipped as stale
            rc, files = 124, {"stderr": str(e)}
        finally:
            watched = watch.stop() if watch is not None else {}
        return dict(
            watched,
            rc=rc,
            files=files,
            host_wall_s=round(time.monotonic() - t0, 3),
            qemu_cpu_s=cpu_seconds(_qemu.pid),
        )
    if op == "qmp":
        return {"return": qmp.call(req["execute"], req.get("arguments"))}
    if op == "cpu":
        return {"qemu_cpu_s": cpu_seconds(_qemu.pid)}
    raise ValueError(f"unknown op {op!r}")


def quit_guest(chan: Channel, timeout: float = 60.0) -> dict[str, int]:
    """Ask the guest to power off; end qemu if it does not exit in time."""
    assert _qemu is not None  # start() started it
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


def main() -> int:
    requests: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_read_stdin, args=(requests,), daemon=True).start()
    first = json.loads(requests.get())
    try:
        chan, qmp, ready = start(first)
    except Exception as e:  # the guest never became ready: say why, leave nothing running
        exited = _qemu is not None and _qemu.poll() is not None
        end_qemu()
        message = f"{type(e).__name__}: {e}"
        if exited:
            assert _qemu is not None  # exited says so
            with open(os.path.join(first["dir"], "qemu.log"), errors="replace") as f:
                message = f"qemu exited with status {_qemu.returncode}: {f.read()[-1500:].strip()}"
        try:
            with open(os.path.join(first["dir"], "console.log"), errors="replace") as f:
                message += "\nguest console (last lines):\n" + f.read()[-1500:]
        except OSError:
            pass
        emit("error", message=message)
        return 1
    assert _qemu is not None  # start() started it
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
