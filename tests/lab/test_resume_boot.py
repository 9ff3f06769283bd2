"""Resume after a local reboot (issue 18 item 2), with a real reboot: a campaign started *inside* the lab
(`host = "local"` there) with `--resume-at-boot` installs its systemd unit; the lab's kernel is crashed mid-run
(`echo c > /proc/sysrq-trigger`, the lab powers off on panic); the lab is booted again and, with no command
typed, systemd starts the unit and the campaign finishes: every run done, one `crashed` row attributed to the
test that was running (boot ids before and after, the crashed boot's kernel log from `journalctl -k -b -1`),
none twice, and the unit removed at the end.

The lab is this test's own: a persistent root disk (a qcow2 overlay kept across its boots) and systemd as PID 1.
Its first boot (the fast lab-init) installs tankbench into it (this source tree and the wheels' packages of
this Python, the same 3.11 as the lab's) and systemd-networkd's config for eth0; then it boots with systemd."""

from __future__ import annotations

import io
import json
import re
import subprocess
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

import tankbench
from tankbench.hosts.lab import LabHost
from tankbench.lab import vm
from tankbench.lab.state import LabConfig
from tests.lab.conftest import LAB

NAME_SUFFIX = "-resume"
NAME = f"{LAB[:24]}{NAME_SUFFIX}"
#: packages tankbench imports, copied from this Python's site-packages (cp311 manylinux wheels, as pip installed them)
DEPENDENCIES = ("orjson", "openpyxl", "et_xmlfile")
LIB = "/opt/tankbench/lib"

NETWORK = """[Match]
Name=eth0

[Network]
Address=10.0.2.15/24
Gateway=10.0.2.2
"""
WRAPPER = f"""#!/bin/sh
export PYTHONPATH={LIB}
exec /usr/bin/python3 -m tankbench "$@"
"""


def host(name: str) -> LabHost:
    """A lab as it runs now, on a connection of its own (its ssh port changes at each boot)."""
    state = vm.read_state(name)
    assert state is not None
    h = vm.ssh_host(state)
    h.control = "none"
    return h


def sh(name: str, script: str, timeout: float = 60, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """A shell command in the lab (root)."""
    return subprocess.run(host(name).command(["sh", "-c", script]), input=stdin, capture_output=True, timeout=timeout)


def out(name: str, script: str, timeout: float = 60) -> str:
    res = sh(name, script, timeout)
    assert res.returncode == 0, f"{script}: {res.stderr.decode(errors='replace')}"
    return res.stdout.decode()


def bundle() -> bytes:
    """tankbench's package and its dependencies as a tar.gz, to unpack onto the lab's PYTHONPATH."""
    buf = io.BytesIO()
    pkg = Path(tankbench.__file__).parent
    import orjson  # a dependency's directory says where this Python's site-packages are

    site = Path(orjson.__file__).parent.parent
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        skip = lambda ti: None if "__pycache__" in ti.name else ti  # noqa: E731
        tar.add(pkg, arcname="tankbench", filter=skip)
        for dep in DEPENDENCIES:
            tar.add(site / dep, arcname=dep, filter=skip)
    return buf.getvalue()


def prepare_lab(name: str) -> None:
    """First boot (lab-init): install tankbench and what systemd needs to give ssh back, then boot with systemd."""
    res = sh(name, f"mkdir -p {LIB} && tar -xzf - -C {LIB}", timeout=300, stdin=bundle())
    assert res.returncode == 0, res.stderr
    script = (
        f"cat > /usr/local/bin/tankbench <<'EOF'\n{WRAPPER}EOF\nchmod 755 /usr/local/bin/tankbench && "
        f"cat > /etc/systemd/network/20-eth0.network <<'EOF'\n{NETWORK}EOF\n"
        "systemctl enable systemd-networkd.service ssh.service 2>&1 && mkdir -p /var/log/journal && "
        f"systemctl mask {MASK} 2>&1 && "
        "tankbench --version && sync"
    )
    print(out(name, script, timeout=120))
    state = vm.read_state(name)
    assert state is not None
    # lab-init powers off when this file appears; the root overlay keeps what was written
    sh(name, "sync; touch /run/tankbench-poweroff", timeout=30)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and vm.is_our_qemu(state.pid, name):
        time.sleep(0.5)
    config = LabConfig(**{**state.config.__dict__, "init": "systemd"})
    vm.reboot(name, print, config=config)
    assert out(name, "cat /proc/1/comm").strip() == "systemd"


CAMPAIGN = """
[campaign]
name = "resume-at-boot"
runtime = "6s"
order = "sequential"
crash_retries = 1
cooldown = "0s"
hook = "/root/tb-hook"

[host]
kind = "local"

[pool]
name = "tbresume"
vdevs = ["/dev/disk/by-id/virtio-tbdata0"]
confirm = ["/dev/disk/by-id/virtio-tbdata0"]
ashift = 12

[[target]]
name = "fs"
kind = "dataset"
size = "32M"

[matrix]
rw = ["randread"]
bs = ["64k"]
ioengine = ["psync"]
compression = ["off", "lz4", "gzip"]
layout = ["random"]
"""
HOOK = """#!/bin/sh
echo "$1 $TANKBENCH_TEST" >> /root/hook.log
"""
JOURNAL = "/root/tb/journal.sqlite"
#: the journal's rows as JSON lines, read in the lab (its python3 has sqlite3)
ROWS = (
    "import json, sqlite3; c = sqlite3.connect('file:" + JOURNAL + "?mode=ro', uri=True); "
    "[print(json.dumps(list(r))) for r in c.execute("
    "'SELECT id, test_id, run_no, attempt, status, checks, note FROM runs ORDER BY id')]"
)
#: in the lab: once a run is in progress and one is done, note the running test (synced) and crash the kernel
CRASH_WHEN_RUNNING = f"""
import os, sqlite3, time
while True:
    try:
        c = sqlite3.connect('file:{JOURNAL}?mode=ro', uri=True)
        rows = c.execute('SELECT test_id, status FROM runs').fetchall()
        c.close()
    except sqlite3.Error:
        rows = []
    running = [t for t, s in rows if s == 'running']
    if running and any(s == 'done' for _, s in rows):
        with open('/root/crashed-test', 'w') as f:
            f.write(running[0])
        os.sync()
        with open('/proc/sysrq-trigger', 'w') as f:
            f.write('c')
    time.sleep(0.2)
"""
#: units this test's lab does not need; masked so each systemd boot is shorter under TCG
MASK = (
    "nfs-server.service nfs-mountd.service nfs-idmapd.service nfsdcld.service rpc-statd.service proc-fs-nfsd.mount "
    "rpcbind.service rpcbind.socket nfs-client.target nfs-blkmap.service apt-daily.timer apt-daily-upgrade.timer "
    "e2scrub_all.timer e2scrub_reap.service dpkg-db-backup.timer getty.target serial-getty@ttyS0.service"
)


def rows(name: str) -> list[list[object]]:
    res = sh(name, f'[ -e {JOURNAL} ] && python3 -c "{ROWS}" || true', timeout=60)
    return [json.loads(ln) for ln in res.stdout.decode().splitlines() if ln.strip()]


def until(what: str, probe: Callable[[], object], timeout: float) -> object:
    """Poll `probe` until it returns something true (a deadline, no fixed wait)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got = probe()
        except (subprocess.TimeoutExpired, AssertionError):
            got = None
        if got:
            return got
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def test_resume_at_boot_after_a_kernel_crash() -> None:
    t0 = time.monotonic()
    vm.up(NAME, LabConfig(disks=1, disk_size=2 << 30, memory_mb=2048, persistent_root=True))
    try:
        prepare_lab(NAME)
        first_boot = vm.read_state(NAME).ready_seconds  # type: ignore[union-attr]
        out(
            NAME,
            f"mkdir -p /root/tb && cat > /root/c.toml <<'EOF'\n{CAMPAIGN}EOF\n"
            f"cat > /root/tb-hook <<'EOF'\n{HOOK}EOF\nchmod 755 /root/tb-hook && cd /root && "
            f"(setsid nohup tankbench run c.toml --journal {JOURNAL} --resume-at-boot --no-report "
            "> /root/first.log 2>&1 < /dev/null &)",
        )
        # `run` says so once the unit is written, enabled and synced
        until("the unit", lambda: "resume at boot: installed and enabled" in out(NAME, "cat /root/first.log"), 300)
        unit = out(NAME, "ls /etc/systemd/system/ | grep '^tankbench-resume-'").strip()
        assert out(NAME, f"systemctl is-enabled {unit}").strip() == "enabled"
        # the kernel crashes while a run is going, after one done: checked and fired inside the lab, at once
        boot_before = out(NAME, "cat /proc/sys/kernel/random/boot_id").strip()
        pid = vm.read_state(NAME).pid  # type: ignore[union-attr]
        crasher = subprocess.Popen(
            host(NAME).command(["python3", "-c", CRASH_WHEN_RUNNING]),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            until("the crashed lab to power off", lambda: not vm.is_our_qemu(pid, NAME), 400)
        finally:
            if crasher.poll() is None:
                crasher.kill()
            crasher.wait()
        t_crash = time.monotonic()
        vm.reboot(NAME, print)  # the machine boots again (systemd, same root and data disks); nothing else
        second_boot = vm.read_state(NAME).ready_seconds  # type: ignore[union-attr]
        assert out(NAME, "cat /proc/sys/kernel/random/boot_id").strip() != boot_before
        until(
            "the resumed campaign to end",
            lambda: (
                out(NAME, f"systemctl is-active {unit} || true").strip() in ("inactive", "failed")
                and out(NAME, "ls /etc/systemd/system | grep -c tankbench || true").strip() == "0"
            ),
            600,
        )
        resumed_s = time.monotonic() - t_crash
        log = out(NAME, "cat /root/tb/resume-at-boot.log")
        assert f"started by {unit}" in log, log
        assert "resume at boot: removed" in log and re.search(
            r"\d+ run\(s\) done in .*, \d+ already in the journal", log
        ), log
        # the unit is gone: no file, no symlink, systemd knows none
        assert out(NAME, "systemctl list-unit-files 'tankbench-*' --no-legend || true").strip() == ""
        assert out(NAME, "find /etc/systemd -name 'tankbench-*'").strip() == ""
        runs = rows(NAME)
        done = [r for r in runs if r[4] == "done"]
        crashed = [r for r in runs if r[4] == "crashed"]
        assert len(done) == 3 and len({r[1] for r in done}) == 3, runs  # every test once: 0 lost, 0 duplicated
        crashed_test = out(NAME, "cat /root/crashed-test").strip()
        assert [r[1] for r in crashed] == [crashed_test], runs
        assert runs[0][4] == "done" and runs[0][1] != crashed_test, runs  # the first test had ended before
        checks = json.loads(crashed[0][5])  # type: ignore[arg-type]
        assert checks["crash.step"] == "run"
        assert checks["recovery.boot_id_before"] == boot_before
        assert checks["recovery.boot_id_after"] not in ("", boot_before)
        assert checks["recovery.resumed_by"] == unit
        # the crashed boot's kernel log, from the persistent journal (`journalctl -k -b -1`)
        assert checks.get("crash.kernel_log", "").strip(), checks
        retried = [r for r in done if r[1] == crashed_test]
        assert retried[0][3] == 2, runs  # attempt 2, after the crash
        hooks = out(NAME, "cat /root/hook.log").split("\n")
        assert [h.split()[0] for h in hooks if h][-3:] == ["crash", "host-back", "end"], hooks
        print(
            f"systemd boots: {first_boot:.0f} s and {second_boot:.0f} s (ssh + zfs); crash to campaign end "
            f"{resumed_s:.0f} s; whole test {time.monotonic() - t0:.0f} s; crashed row checks: "
            f"{ {k: v for k, v in checks.items() if k != 'crash.kernel_log'} }; its kernel log ends: "
            f"{checks['crash.kernel_log'].splitlines()[-1]}"
        )
    finally:
        if vm.read_state(NAME) is not None:
            vm.down(NAME)
