"""The guest controller with a real qemu (paused, no guest): qemu never outlives the controller's parent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tankbench.guest import testguest


def _paused_qemu(run_dir: Path) -> list[str]:
    """A real qemu with the test guest's sockets, paused before its first instruction (-S)."""
    return [
        "qemu-system-x86_64",
        "-name",
        "tankbench-guest-unit",
        "-machine",
        "microvm",
        "-accel",
        "tcg",
        "-nodefaults",
        "-display",
        "none",
        "-S",
        "-m",
        "64",
        "-qmp",
        f"unix:{run_dir}/qmp.sock,server=on,wait=off",
        "-chardev",
        f"socket,id=ctl,path={run_dir}/ctl.sock,server=on,wait=off",
        "-device",
        "virtio-serial-device,id=vser",
        "-device",
        "virtserialport,bus=vser.0,chardev=ctl,name=x",
    ]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_gone(pid: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def _start(tmp_path: Path, argv: list[str] | None = None) -> tuple[subprocess.Popen[bytes], dict[str, object]]:
    ctl = tmp_path / "controller.py"
    ctl.write_bytes(testguest.controller_source())
    proc = subprocess.Popen([sys.executable, str(ctl)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    run_dir = tmp_path / "run"
    req = {"op": "start", "argv": argv or _paused_qemu(run_dir), "dir": str(run_dir), "timeout": 60}
    proc.stdin.write(json.dumps(req).encode() + b"\n")
    proc.stdin.flush()
    return proc, json.loads(proc.stdout.readline())


@pytest.fixture
def controller(tmp_path: Path):  # type: ignore[no-untyped-def]
    proc, ev = _start(tmp_path)
    assert ev["event"] == "started", ev
    pid = int(ev["pid"])  # type: ignore[call-overload]
    assert _alive(pid)
    yield proc, pid
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    if _alive(pid):  # never leave our qemu behind, even when a test fails
        os.kill(pid, signal.SIGKILL)


def test_closing_stdin_ends_qemu_and_the_controller(controller) -> None:  # type: ignore[no-untyped-def]
    proc, pid = controller
    proc.stdin.close()
    assert proc.wait(timeout=20) == 75
    assert _wait_gone(pid), f"qemu {pid} still running after the controller's stdin closed"


def test_sigkill_of_the_controller_ends_qemu(controller) -> None:  # type: ignore[no-untyped-def]
    proc, pid = controller
    proc.kill()  # no chance to clean up: PR_SET_PDEATHSIG must end qemu
    proc.wait()
    assert _wait_gone(pid), f"qemu {pid} outlived its killed controller"


def test_qemu_that_fails_to_start_is_an_error_event(tmp_path: Path) -> None:
    proc, ev = _start(tmp_path, ["qemu-system-x86_64", "-machine", "no-such-machine"])
    assert ev["event"] == "started"
    assert proc.stdout is not None
    err = json.loads(proc.stdout.readline())
    assert err["event"] == "error"
    assert err["message"].startswith("qemu exited with status 1: ") and "unsupported machine type" in err["message"]
    assert proc.wait(timeout=20) == 1


def test_channel_reads_a_multiline_files_reply_and_skips_stale_lines(tmp_path: Path) -> None:
    import base64
    import importlib.util
    import io
    import socket
    import tarfile
    import threading

    spec = importlib.util.spec_from_file_location("tb_controller", Path(testguest.__file__).with_name("controller.py"))
    assert spec is not None and spec.loader is not None
    ctl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ctl)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, text in (("stdout", "hello\n" * 200), ("fio.json", '{"jobs": []}')):
            info = tarfile.TarInfo(name)
            info.size = len(text)
            tar.addfile(info, io.BytesIO(text.encode()))
    b64 = base64.encodebytes(buf.getvalue()).decode()  # 76-column lines, like busybox base64
    path = str(tmp_path / "ctl.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    got: list[bytes] = []

    def guest() -> None:
        conn, _ = server.accept()
        f = conn.makefile("rwb")
        got.append(f.readline())
        f.write(b"0 stale line\n1 FILES\n" + b64.encode() + b"1 END 3\n")
        f.flush()
        conn.close()

    t = threading.Thread(target=guest)
    t.start()
    rc, files = ctl.Channel(path).request("exec", "echo hello", 10)
    t.join()
    assert got == [b"1 exec " + base64.b64encode(b"echo hello") + b"\n"]
    assert rc == 3 and files == {"stdout": "hello\n" * 200, "fio.json": '{"jobs": []}'}
