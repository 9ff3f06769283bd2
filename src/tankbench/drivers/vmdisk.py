"""The vm-disk kind's driver: the test guest booted on the ZFS host (again for another processor, after a crash
or a reboot), each backing configuration hot-plugged with its layers, fio or a copy run in the guest while the
host's agent observes the same window, the pool-full experiment (drivers/vmfill.py)."""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import tankbench.targets.zfsplan as zfs
from tankbench.drivers.base import Capture, Workspace
from tankbench.drivers.zfsbase import ZfsDriver
from tankbench.errors import HostError
from tankbench.guest import guestcopy
from tankbench.guest.guestcopy import GuestCopies
from tankbench.guest.layers import GuestLayers
from tankbench.guest.qemu import GuestDisk
from tankbench.guestconf import layers as guest_layers
from tankbench.guestconf import machine as guest_machine
from tankbench.guestconf.layers import backing_test
from tankbench.hosts.base import Host
from tankbench.model import Test
from tankbench.targets.vmdisk import (
    BUS_MODELS,
    DISK_AXES,
    QCOW2_DEFAULT_CLUSTER,
    VmDiskKind,
    config_key,
    disk_id,
    disk_settings,
    image_create_argv,
)
from tankbench.units import parse_size

if TYPE_CHECKING:
    from tankbench.agent import FioRunExtras, FioRunRequest
    from tankbench.drivers.vmfill import FillRun
    from tankbench.guest.records import BlockSettings


class VmDiskDriver(VmDiskKind, ZfsDriver):
    """The test guest and its hot-plugged disk."""

    def __init__(self, ws: Workspace) -> None:
        super().__init__(ws)
        self.guest: Any = None
        self.attached: tuple[str, str] | None = None  # (disk config key, qemu disk id)
        self.layout_checks: dict[str, Any] = {}
        self.layout_files: list[str] = []  # the guest files the layout covers (per-job files: numjobs of them)
        self.fill: FillRun | None = None  # the pool-full experiment (workload = "fill"), once set up
        self.layers: GuestLayers | None = None  # guest_fs / guest_luks of the attached configuration
        self.layer_checks: dict[str, Any] = {}
        self.copies: GuestCopies | None = None
        self.processor: guest_machine.Processor | None = None  # the running guest's -cpu and -smp

    def prepare(self, test: Test) -> dict[str, Any]:
        if test.is_fill:
            assert self.fill is not None
            return self.fill.prepare(test)
        return super().prepare(test)

    def release_disk(self) -> None:
        """Unplug the attached disk, if any, so that its backing can be replaced or destroyed."""
        if self.attached:
            self.guest.detach(self.attached[1])
            self.attached = None
            self.layout_checks = {}

    def setup(self) -> None:
        super().setup()
        from tankbench.drivers.vmfill import FillRun

        self.fill = FillRun(self)
        if self.fill.release_ballast():  # a fill test of an earlier run was killed: the pool is full
            self.ws.note(f"destroyed {self.fill.ballast}, left full by an interrupted fill test")
        self._start_guest()

    def _start_guest(self) -> None:
        """Boot the test guest with the processor of the test to come (at setup: the matrix's first values, so a
        campaign with one processor boots once)."""
        from tankbench.guest.testguest import TestGuest

        buses = {str(v) for v in self.ws.spec.matrix.get("bus", ())} or {str(DISK_AXES["bus"])}
        machine = "q35" if "virtio-blk" in buses else "microvm"  # microvm's virtio-mmio cannot hot-plug
        if self.processor is None:
            self.processor = guest_machine.first_processor(self.ws.spec.matrix, self.ws.spec.includes)
        self.guest = TestGuest(
            self.host,
            name=f"tb-{self.ws.spec.campaign_id[:8]}",
            machine=machine,
            progress=self.ws.note,
            cpus=self.processor.cpus,
            cpu_model=self.processor.cpu,
        )
        self.guest.start()
        self.layers = GuestLayers(self.guest, self.ws.note)
        self.copies = GuestCopies(self.host, self.guest, self.ws.workdir, self.ws.note)

    def _boot_for(self, test: Test) -> None:
        """A new guest when the test asks for another processor than the running guest's (qemu fixes -cpu and
        -smp when it starts); the pool, its datasets and the fill state stay."""
        want = guest_machine.Processor.of(test.params)
        if self.guest is not None and want == self.processor:
            return
        was = self.processor.describe() if self.processor else "none"
        self.ws.note(f"guest: booting a new guest with {want.describe()} (was {was})")
        self.finish()
        self.attached = None
        self.processor = want
        self._start_guest()

    def recover(self, rebooted: bool) -> dict[str, Any]:
        """The pool (ZfsKind's), then a new test guest when the host rebooted (the old one died with it)."""
        checks = super().recover(rebooted)
        if rebooted and self.guest is not None:
            self.attached = None  # its qemu is gone: nothing to unplug
            self.finish()
            self.setup()
        return checks

    def crashed_guest(self) -> str:
        return self.guest.crashed() if self.guest is not None else ""

    def restart_guest(self) -> None:
        """A new test guest after the old one crashed: the pool, its datasets and zvols stay; the next test's
        disk is hot-plugged again (prepare)."""
        self.attached = None  # its qemu is gone: nothing to unplug
        self.finish()
        self._start_guest()

    def finish(self) -> None:
        if self.fill is not None:
            try:
                self.fill.release_ballast()  # never leave the pool full, whatever ended the campaign
            except HostError:
                pass
        if self.guest is not None:
            for opened in (self.copies, self.layers):  # unmounted and closed before their disks go away
                try:
                    if opened is not None:
                        opened.close()
                except HostError:
                    pass
            if self.attached:
                try:
                    self.guest.detach(self.attached[1])
                except HostError:
                    pass
            self.guest.close()
            self.guest = None

    def fingerprint(self) -> dict[str, Any]:
        """The pool's facts, and once the guest is up how it runs: its accelerator (the second layer of
        emulation when the host is itself emulated), machine, vCPUs, memory and fio."""
        fp = super().fingerprint()
        if self.guest is not None:
            fp.update(self.guest.facts())
        return fp

    def provision(self, test: Test) -> None:
        """Backing (zvol, or image on a dataset) + the disk hot-plugged with the test's qemu settings."""
        key = config_key(test)
        if self.attached and self.attached[0] == key:
            return
        if self.attached:  # the next configuration replaces this one: unplug before its backing is destroyed
            assert self.layers is not None
            self.layers.close()
            self.guest.detach(self.attached[1])
            self.attached = None
        self._boot_for(test)
        self.ws.zfs.provision(backing_test(test))
        if not zfs.is_volume(test):
            make_image(self.host, test)
        qid = disk_id(test)  # also the disk's serial: the guest finds it by it
        dev = self.guest.attach(guest_disk(test))
        self.attached = (key, qid)
        self.layout_checks = {}
        assert self.layers is not None
        cpu = self.layers.cpu_facts()
        wrong = guest_machine.mismatches(guest_machine.Processor.of(test.params), cpu)
        if wrong:
            raise HostError(f"guest: the processor differs from the test's: {'; '.join(wrong)}")
        self.layer_checks = {**cpu, **self.layers.open(test, dev, qid)}

    def lay_out(self, test: Test) -> dict[str, Any]:
        """Fill the disk with random data from inside the guest once per configuration (a new zvol or image
        reads zeros without I/O), then check on the host how much of it is allocated."""
        files = guest_layers.job_files(test, self.layers.path or "") if self.layers is not None else []
        if self.layout_checks and files == self.layout_files:
            return dict(self.layout_checks)
        self.layout_files = files
        assert self.attached is not None and self.layers is not None
        if self.layers.active:  # a file in the guest filesystem, or the dm-crypt device
            self.layout_checks = self.layers.lay_out(
                test, lambda: self.allocated_bytes(test), self.backing_path(test), lambda m: self.find(test, m)
            )
            return dict(self.layout_checks)
        dev = self.guest.device(self.attached[1])
        mib = max(1, test.target.size >> 20)
        t0 = time.monotonic()
        run = self.guest.exec(f"dd if=/dev/urandom of={dev} bs=1M count={mib} conv=fsync 2>&1", timeout=3600)
        checks: dict[str, Any] = {
            "layout.mode": "random",
            "layout.seconds": round(time.monotonic() - t0, 2),
            "layout.guest_device": dev,
            "guest.backing": self.backing_path(test),
        }
        allocated = self.allocated_bytes(test)
        checks["layout.allocated_bytes"] = allocated
        checks["layout.verified"] = run.rc == 0 and allocated is not None and allocated >= test.target.size * 0.9
        if run.rc != 0:
            checks["layout.note"] = f"dd in the guest exited {run.rc}: {run.stdout[-300:]}"
        self.layout_checks = checks
        return dict(checks)

    def allocated_bytes(self, test: Test) -> int | None:
        """Bytes the backing holds on the host: the zvol's logicalreferenced, or the image's allocation."""
        return allocated_bytes(self.host, self.ws.spec.pool, test)

    def find(self, test: Test, marker: str) -> bool | None:
        """Whether the backing holds `marker` as written in the guest (None if it could not be read)."""
        pool = self.ws.spec.pool
        if pool is not None and not zfs.is_volume(test):
            self.host.run(["zpool", "sync", pool.pool_name], timeout=600)
        res = self.host.run(["grep", "-a", "-F", "-q", "-e", marker, self.backing_path(test)], timeout=3600)
        return {0: True, 1: False}.get(res.returncode)

    def run_copy(self, test: Test, request: FioRunRequest) -> dict[str, Any]:
        """cp, rsync or dd in the guest from its read-only source disk onto the layers' file (dd: or the disk),
        observed on the host like fio (guest/guestcopy.py)."""
        assert self.attached is not None and self.layers is not None and self.copies is not None
        dev = self.guest.device(self.attached[1])
        before = self.allocated_bytes(test)
        cpu_before = self.guest.qemu_cpu_seconds()  # the boot, hot-plug and earlier runs are not this copy's cost
        res, run = self.copies.run(test, request, self.layers.path or dev, dev, self.ws.spec.copy_size)
        res["checks"].update(
            {
                **self.layer_checks,
                "guest.device": dev,
                "guest.accelerator": self.guest.accel_used,
                "guest.boot_s": self.guest.boot_s,
                "copy.backing_allocated_before_bytes": before,
                "copy.backing_allocated_after_bytes": self.allocated_bytes(test),
            }
        )
        res["metrics"] = dict(res.get("metrics", {}), **{"guest.qemu_cpu_s": round(run.qemu_cpu_s - cpu_before, 3)})
        self.layout_checks = {}  # the copy replaced the laid-out file: the next fio test lays it out again
        return res

    def run_fio(
        self, test: Test, request: FioRunRequest, on_event: Callable[[dict[str, Any]], None], timeout: float
    ) -> dict[str, Any]:
        """fio in the guest; the host's agent observes the same window (samplers, ZFS capture, drain)."""

        if test.is_fill:  # a size-based experiment, not a measurement: no samplers, its own record
            assert self.fill is not None
            return self.fill.run(test, request)
        assert self.attached is not None
        if test.is_copy:
            return self.run_copy(test, request)
        dev = self.guest.device(self.attached[1])
        path = self.layers.path if self.layers is not None and self.layers.path else dev
        job = guest_layers.guest_job_text(test, str(request["job_text"]), path)
        cpu_before = self.guest.qemu_cpu_seconds()  # the boot, hot-plug and layout are not this run's cost
        # the job text the guest ran is kept on the host for the record
        res, grun = guestcopy.observed(
            self.host,
            {**request, "job_text": job},
            lambda: self.guest.run_fio(job, timeout=float(request["deadline_s"])),
        )
        return guest_fio_result(res, grun, grun.qemu_cpu_s - cpu_before, dev, self.guest, self.layer_checks)

    def capture(self, test: Test) -> FioRunExtras:
        return super().capture(backing_test(test))  # the ZFS side: the dataset/zvol the backing lives on

    def after_run(self, test: Test, res: Mapping[str, Any], metrics: Mapping[str, float]) -> Capture:
        if test.is_fill:  # FillRun.run recorded everything (no ZFS capture ran)
            return {}, {}, {}
        m, c, s = super().after_run(backing_test(test), res, metrics)
        cpu = float(res.get("metrics", {}).get("guest.qemu_cpu_s", 0.0))
        if cpu > 0 and metrics.get("total.io_bytes"):
            m["guest.bytes_per_host_cpu_s"] = float(metrics["total.io_bytes"]) / cpu
        assert self.attached is not None
        st = self.guest.block_settings().get(self.attached[1])
        if st is not None:
            c.update(qemu_checks(test, st))
        return m, c, s


def make_image(host: Host, test: Test) -> None:
    """A fresh image backing on the test's dataset (earlier images of the target removed first)."""
    images = shlex.quote(zfs.dataset_dir(backing_test(test)))
    name = shlex.quote(test.target.name)
    host.run(
        ["sh", "-c", f"rm -f -- {images}/tankbench-{name}-*.qcow2 {images}/tankbench-{name}-*.img"],
        check=True,
        timeout=120,
    )
    host.run(image_create_argv(test), check=True, timeout=600)


def guest_disk(test: Test) -> GuestDisk:
    """The test's disk as qemu attaches it: its backing, id (also its serial) and qemu settings."""
    d = disk_settings(test)
    return GuestDisk(
        id=disk_id(test),
        path=VmDiskKind.backing_path(test),
        format="qcow2" if test.params.get("backing") == "qcow2" else "raw",
        bus=d["bus"],
        cache=d["cache"],
        aio=d["aio"],
        iothread=d["iothread"],
        l2_cache_size=d["l2_cache"],
        werror=d.get("werror"),
    )


def allocated_bytes(host: Host, pool: Any, test: Test) -> int | None:
    """Bytes the test's backing holds on the host: the zvol's logicalreferenced, or the image's allocation."""
    test = backing_test(test)
    # allocated sizes settle when the txg holding the writes has synced: images, and zvols too (a zvol
    # showed 26M of a 64M layout the guest had fsynced)
    if pool is not None:
        host.run(["zpool", "sync", pool.pool_name], timeout=600)
    if zfs.is_volume(test):
        res = host.run(["zfs", "get", "-Hp", "-o", "value", "logicalreferenced", zfs.dataset_name(test)], timeout=120)
        return int(res.stdout.strip()) if res.returncode == 0 and res.stdout.strip().isdigit() else None
    res = host.run(["qemu-img", "info", "--output=json", "-U", VmDiskKind.backing_path(test)], timeout=120)
    try:
        return int(json.loads(res.stdout)["actual-size"])
    except (ValueError, KeyError):
        return None


def guest_fio_result(
    res: dict[str, Any], grun: Any, cpu_s: float, dev: str, guest: Any, layer_checks: Mapping[str, Any]
) -> dict[str, Any]:
    """The agent's observation of a guest's fio run with what the guest reported: fio's JSON, its exit, the
    guest's clock and device, qemu's CPU time."""
    from tankbench.guest.records import guest_metrics

    res.update(
        fio_json=json.dumps(grun.fio) if grun.fio else "",
        exit_status=grun.rc,
        stderr_tail=(grun.stderr or grun.fio_error)[-4000:],
        wall_s=grun.host_wall_s,
        timed_out=grun.rc == 124 or bool(res.get("timed_out")),
        io_log_last=grun.io_log_last,
    )
    res["checks"] = dict(
        res.get("checks", {}),
        **{
            **layer_checks,
            "guest.wall_s": grun.guest_wall_s,
            "guest.host_wall_s": grun.host_wall_s,
            "guest.device": dev,
            "guest.accelerator": guest.accel_used,
            "guest.boot_s": guest.boot_s,
        },
    )
    res["metrics"] = dict(res.get("metrics", {}), **guest_metrics(grun, dev), **{"guest.qemu_cpu_s": round(cpu_s, 3)})
    return res


def qemu_checks(test: Test, st: BlockSettings) -> dict[str, Any]:
    """What qemu reports of the test's disk, and whether it is what the test asked for."""
    c: dict[str, Any] = {
        "guest.qemu": {
            "model": st.model,
            "driver": st.driver,
            "cache_mode": st.cache_mode,
            "write_cache": st.write_cache,
            "cluster_size": st.cluster_size,
            "iothread": st.iothread,
            "werror": st.werror,
            "file": st.file,
        }
    }
    wrong = settings_mismatches(test, st)
    c["guest.settings_match"] = not wrong
    if wrong:
        c["guest.settings_mismatch"] = wrong
    return c


def settings_mismatches(test: Test, st: BlockSettings) -> list[str]:
    """What qemu reports for the test's disk that differs from what the test asked (empty: all took effect):
    the device model (bus), image format, qcow2 cluster size, cache mode, iothread (virtio-blk: per device) and
    write-error policy. aio and the L2 cache size are not in what QMP reports, so they are not compared. Pure."""
    want = disk_settings(test)
    p = test.params
    out = []
    if st.model not in BUS_MODELS.get(want["bus"], ()):
        out.append(f"bus {want['bus']}: qemu's device is {st.model or 'unknown'}")
    fmt = "qcow2" if p.get("backing") == "qcow2" else "raw"
    if st.driver != fmt:
        out.append(f"format {fmt}: qemu opened {st.driver or 'unknown'}")
    if fmt == "qcow2":
        cluster = parse_size(str(p["qcow2_cluster"])) if p.get("qcow2_cluster") else QCOW2_DEFAULT_CLUSTER
        if st.cluster_size != cluster:
            out.append(f"qcow2_cluster {cluster}: the image has {st.cluster_size}")
    if st.cache_mode != want["cache"]:
        out.append(f"disk_cache {want['cache']}: qemu's cache mode is {st.cache_mode}")
    if want["bus"] == "virtio-blk" and bool(st.iothread) != want["iothread"]:
        out.append(f"iothread {str(want['iothread']).lower()}: qemu's is {st.iothread or 'none'}")
    if "werror" in want and st.werror != want["werror"]:
        out.append(f"werror {want['werror']}: qemu's is {st.werror or 'unknown'}")
    return out
