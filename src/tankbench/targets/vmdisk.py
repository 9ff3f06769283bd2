"""`kind = "vm-disk"`: the disk of a test guest tankbench boots on the ZFS host (seeds 001 and 003).

The disk is backed by a zvol or by a qcow2/raw image on a dataset that this campaign created and tagged; fio
runs inside the guest, while the host's agent samples the pool's disks and captures the ZFS side in the same
time window. One guest boot serves the whole campaign: each backing configuration is hot-plugged (QMP) when
its first test comes and unplugged when the next configuration replaces it.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import tankbench.targets.zfs as zfs
from tankbench.errors import HostError
from tankbench.guest import guestcopy
from tankbench.guest.guestcopy import GuestCopies
from tankbench.guest.layers import GuestLayers
from tankbench.guestconf import copy as guest_copy
from tankbench.guestconf import layers as guest_layers
from tankbench.guestconf import machine as guest_machine
from tankbench.guestconf.layers import backing_test
from tankbench.guestconf.pauses import WERROR_VALUES
from tankbench.keys import Keys
from tankbench.model import FILL, Target, Test, short_hash
from tankbench.targets.base import Capture, Workspace
from tankbench.targets.zfsbase import ZfsKind, zfs_axes
from tankbench.units import fmt_size, parse_size

if TYPE_CHECKING:
    from tankbench.guest.testguest import BlockSettings
    from tankbench.targets.vmfill import FillRun

BACKINGS = ("zvol", "qcow2", "raw")
#: a test guest's processor (guest_cpu, guest_cpus: a change boots a new guest), its disk: the backing on the
#: host, then qemu's settings for it, then what the guest puts between fio and the disk (guest_luks, guest_fs)
VM_AXES: tuple[str, ...] = (
    *guest_machine.AXES,
    "backing",
    "qcow2_cluster",
    "preallocation",
    "l2_cache",
    "bus",
    "disk_cache",
    "aio",
    "iothread",
    "werror",
    *guest_layers.AXES,
)
VM_CHOICES = {
    "guest_fs": guest_layers.FILESYSTEMS,
    "backing": BACKINGS,
    "preallocation": ("off", "metadata", "falloc", "full"),
    "bus": ("virtio-blk", "virtio-scsi"),
    "disk_cache": ("none", "writeback", "writethrough", "directsync", "unsafe"),
    "aio": ("threads", "native", "io_uring"),
    "werror": WERROR_VALUES,
}
#: the guest disk's qemu settings (axes) and their defaults
DISK_AXES = {"bus": "virtio-blk", "disk_cache": "none", "aio": "threads", "iothread": False}
#: axes that mean something only for some backings: dropped elsewhere, so tests are not duplicated
ONLY_FOR = {
    "qcow2_cluster": ("qcow2",),
    "l2_cache": ("qcow2",),
    "preallocation": ("qcow2", "raw"),
    "recordsize": ("qcow2", "raw"),
    "volblocksize": ("zvol",),
}


class VmDiskKind(ZfsKind):
    """fio in the test guest on a disk backed by a zvol (`/dev/zvol/…`) or an image on a dataset."""

    kind = "vm-disk"
    short = "vm"
    block_device = True
    runs_in_guest = True
    #: the ZFS axes but direct (fio's O_DIRECT in the guest never reaches the host's dataset); the disk's are inner
    axes = zfs_axes("direct")
    inner_axes = VM_AXES
    size_means = "the guest disk's size"

    # -- campaign file -------------------------------------------------------------------------
    @classmethod
    def axis_value(cls, keys: Keys, key: str, axis: str, value: object) -> Any:
        """The guest disk's settings; the ZFS axes as for any ZFS kind."""
        if axis in VM_CHOICES:
            return keys.choice(key, value, VM_CHOICES[axis])
        if axis == "qcow2_cluster":
            n = keys.size(key, value)
            if n < 512 or n > 2 << 20 or n & (n - 1):
                raise keys.err(
                    key, value, "must be a power of two from 512 to 2M (qcow2's cluster sizes)", 'e.g. "8k", "64k"'
                )
            return fmt_size(n)
        if axis == "l2_cache":
            return fmt_size(keys.size(key, value))
        if axis in ("iothread", "guest_luks"):
            return keys.boolean(key, value)
        if axis in guest_machine.AXES:
            return guest_machine.axis_value(keys, key, axis, value)
        return super().axis_value(keys, key, axis, value)

    @classmethod
    def check_matrix(cls, keys: Keys, matrix: Mapping[str, tuple[Any, ...]]) -> None:
        """A guest disk's backing-specific axes need that backing in the matrix (qcow2_cluster on a zvol is a
        mistake, not a no-op); an iothread needs a virtio-blk disk."""
        backings = matrix.get("backing", ("zvol",))
        for axis, needs in (
            ("qcow2_cluster", ("qcow2",)),
            ("l2_cache", ("qcow2",)),
            ("preallocation", ("qcow2", "raw")),
        ):
            if axis in matrix and not set(needs) & set(backings):
                raise keys.err(
                    f"matrix.{axis}",
                    list(matrix[axis]),
                    f"applies only to backing = {' or '.join(needs)}, and the matrix has backing = {list(backings)}",
                    f'add "{needs[0]}" to matrix.backing, or remove the axis',
                )
        buses = matrix.get("bus", ("virtio-blk",))
        if True in matrix.get("iothread", ()) and "virtio-blk" not in buses:
            raise keys.err(
                "matrix.iothread",
                list(matrix["iothread"]),
                f"applies only to bus = virtio-blk, and the matrix has bus = {list(buses)} (tankbench hot-plugs "
                "virtio-scsi disks on the guest's one SCSI controller, which has no iothread of its own)",
                'add "virtio-blk" to matrix.bus, or remove the axis',
            )

    # -- plan time -----------------------------------------------------------------------------
    @classmethod
    def adjust(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        backing = str(params.get("backing", "zvol"))
        kept = {k: v for k, v in params.items() if k not in ONLY_FOR or backing in ONLY_FOR[k]}
        if kept.get("bus") == "virtio-scsi":  # hot-plugged on the one SCSI controller: no iothread per disk
            kept.pop("iothread", None)
        return kept

    @classmethod
    def fio_filename(cls, test: Test) -> str:
        """The guest's view: the file in the guest filesystem or the dm-crypt device (guest_fs, guest_luks), else
        the disk by its serial (tankbench rewrites it to the guest's device at run time)."""
        path = guest_layers.data_path(guest_layers.Layers.of(test.params), disk_id(test))
        return path or f"/dev/disk/by-id/virtio-{disk_id(test)}"

    @classmethod
    def accepts(cls, params: Mapping[str, Any]) -> bool:
        """cp and rsync need a filesystem in the guest; dd writes the device (or a file) (guest/layers.py)."""
        return guest_layers.accepts(params)

    @classmethod
    def backing_path(cls, test: Test) -> str:
        """The zvol device or image file on the host that is the guest's disk (sized for the guest's layers)."""
        test = backing_test(test)
        if zfs.is_volume(test):
            return zfs.fio_filename(test)
        ext = "qcow2" if test.params.get("backing") == "qcow2" else "img"
        return f"{zfs.dataset_dir(test)}/tankbench-{test.target.name}-{image_tag(test)}.{ext}"

    @classmethod
    def name_stem(cls, target: Target, params: Mapping[str, Any], varying: set[str], several: bool) -> list[str]:
        head = "zfs-slog" if params.get("slog") else "zfs"
        name = f"vm-{target.name}" if several else "vm"
        backing = str(params.get("backing", "zvol"))
        if backing == "qcow2" and "qcow2_cluster" in params:
            backing += f"-{params['qcow2_cluster']}"
        if params.get("workload") == FILL:
            rw, bs = FILL, fmt_size(target.size)
        else:
            rw = f"copy-{params['workload']}" if params.get("workload", "fio") != "fio" else params["rw"]
            bs = params["copy_size"] if params.get("workload", "fio") != "fio" else params["bs"]
        parts = [f"{head}-{name}-{backing}-{rw}-{bs}"]
        for axis in ("preallocation", "l2_cache", *DISK_AXES, "werror", *cls.NAMED_AXES, "recordsize", "volblocksize"):
            if axis in varying and axis in params:
                value = params[axis]
                parts.append(f"{axis}-{value}" if not isinstance(value, bool) else (axis if value else f"no{axis}"))
        return parts + guest_machine.name_parts(params, varying) + guest_layers.name_parts(params, varying)

    @classmethod
    def script_lines(cls, test: Test, campaign_id: str) -> list[str]:
        disk = disk_settings(test)
        if test.is_fill:
            from tankbench.targets.vmfill import fill_script_lines

            image = "" if zfs.is_volume(test) else image_create_argv_text(test)
            lines = fill_script_lines(test, campaign_id, cls.backing_path(test), image)
            return [*super().script_lines(test, campaign_id), *lines]
        backing = backing_test(test)  # the disk holds the guest's layers besides what fio works on
        device = f"/dev/disk/by-id/virtio-{disk_id(test)}"
        if test.is_copy:
            then = "and run the copy below there."
        elif guest_layers.Layers.of(test.params).any:
            then = "make the layers below in the guest, and run the .fio file there."
        else:
            then = "fill it with random data in the guest, and run the .fio file there."
        return [
            *super().script_lines(backing, campaign_id),
            *([] if zfs.is_volume(test) else [image_create_argv_text(test)]),
            f"# This job runs INSIDE a test guest{processor_text(test)}: attach {cls.backing_path(test)} to it as a "
            f"{disk['bus']} "
            f"disk (cache={disk['cache']}, aio={disk['aio']}, iothread={'on' if disk['iothread'] else 'off'}, "
            f"serial {disk_id(test)}), {then}",
            *guest_layers.script_comment_lines(test, device, disk_id(test)),
            *(guest_copy.script_comment_lines(test, cls.fio_filename(test)) if test.is_copy else []),
        ]

    # -- run time ------------------------------------------------------------------------------
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
        from tankbench.targets.vmfill import FillRun

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
        path = self.backing_path(test)
        if not zfs.is_volume(test):
            images = shlex.quote(zfs.dataset_dir(backing_test(test)))
            self.host.run(
                [
                    "sh",
                    "-c",
                    f"rm -f -- {images}/tankbench-"
                    f"{shlex.quote(test.target.name)}-*.qcow2 "
                    f"{images}/tankbench-"
                    f"{shlex.quote(test.target.name)}-*.img",
                ],
                check=True,
                timeout=120,
            )
            self.host.run(image_create_argv(test), check=True, timeout=600)
        from tankbench.guest.qemu import GuestDisk

        qid = disk_id(test)  # also the disk's serial: the guest finds it by it
        d = disk_settings(test)
        disk = GuestDisk(
            id=qid,
            path=path,
            format="qcow2" if test.params.get("backing") == "qcow2" else "raw",
            bus=d["bus"],
            cache=d["cache"],
            aio=d["aio"],
            iothread=d["iothread"],
            l2_cache_size=d["l2_cache"],
            werror=d.get("werror"),
        )
        dev = self.guest.attach(disk)
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
        test = backing_test(test)
        pool = self.ws.spec.pool
        # allocated sizes settle when the txg holding the writes has synced: images, and zvols too (a zvol
        # showed 26M of a 64M layout the guest had fsynced)
        if pool is not None:
            self.host.run(["zpool", "sync", pool.pool_name], timeout=600)
        if zfs.is_volume(test):
            res = self.host.run(
                ["zfs", "get", "-Hp", "-o", "value", "logicalreferenced", zfs.dataset_name(test)], timeout=120
            )
            return int(res.stdout.strip()) if res.returncode == 0 and res.stdout.strip().isdigit() else None
        res = self.host.run(["qemu-img", "info", "--output=json", "-U", self.backing_path(test)], timeout=120)
        try:
            return int(json.loads(res.stdout)["actual-size"])
        except (ValueError, KeyError):
            return None

    def find(self, test: Test, marker: str) -> bool | None:
        """Whether the backing holds `marker` as written in the guest (None if it could not be read)."""
        pool = self.ws.spec.pool
        if pool is not None and not zfs.is_volume(test):
            self.host.run(["zpool", "sync", pool.pool_name], timeout=600)
        res = self.host.run(["grep", "-a", "-F", "-q", "-e", marker, self.backing_path(test)], timeout=3600)
        return {0: True, 1: False}.get(res.returncode)

    def run_copy(self, test: Test, request: dict[str, Any]) -> dict[str, Any]:
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
        self, test: Test, request: dict[str, Any], on_event: Callable[[dict[str, Any]], None], timeout: float
    ) -> dict[str, Any]:
        """fio in the guest; the host's agent observes the same window (samplers, ZFS capture, drain)."""
        from tankbench.guest.testguest import guest_metrics

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
            dict(request, job_text=job),
            lambda: self.guest.run_fio(job, timeout=float(request["deadline_s"])),
        )
        cpu = grun.qemu_cpu_s - cpu_before
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
                **self.layer_checks,
                "guest.wall_s": grun.guest_wall_s,
                "guest.host_wall_s": grun.host_wall_s,
                "guest.device": dev,
                "guest.accelerator": self.guest.accel_used,
                "guest.boot_s": self.guest.boot_s,
            },
        )
        res["metrics"] = dict(res.get("metrics", {}), **guest_metrics(grun, dev), **{"guest.qemu_cpu_s": round(cpu, 3)})
        return res

    def capture(self, test: Test) -> dict[str, Any]:
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
            c["guest.qemu"] = {
                "model": st.model,
                "driver": st.driver,
                "cache_mode": st.cache_mode,
                "write_cache": st.write_cache,
                "cluster_size": st.cluster_size,
                "iothread": st.iothread,
                "werror": st.werror,
                "file": st.file,
            }
            wrong = settings_mismatches(test, st)
            c["guest.settings_match"] = not wrong
            if wrong:
                c["guest.settings_mismatch"] = wrong
        return m, c, s

    @classmethod
    def qemu_cache(cls, test: Test) -> str | None:
        return str(disk_settings(test)["cache"])


def processor_text(test: Test) -> str:
    """' (qemu -cpu kvm64 -smp 2)' when the test sets the guest's processor, else ''."""
    if not any(a in test.params for a in guest_machine.AXES):
        return ""
    p = guest_machine.Processor.of(test.params)
    return f" (qemu {'-cpu ' + p.cpu + ' ' if p.cpu else ''}-smp {p.cpus})"


def disk_id(test: Test) -> str:
    """A stable serial for the test's guest disk (letters and digits: qemu ids and serials take them)."""
    return "tb" + short_hash(config_key(test), 10)


def image_tag(test: Test) -> str:
    p = test.params
    return short_hash({k: p.get(k) for k in ("backing", "qcow2_cluster", "preallocation")}, 8)


def disk_settings(test: Test) -> dict[str, Any]:
    """The guest disk's qemu settings for a test: its axes, else the defaults."""
    p = test.params
    l2 = p.get("l2_cache")
    return {
        "bus": str(p.get("bus", DISK_AXES["bus"])),
        "cache": str(p.get("disk_cache", DISK_AXES["disk_cache"])),
        "aio": str(p.get("aio", DISK_AXES["aio"])),
        "iothread": bool(p.get("iothread", DISK_AXES["iothread"])),
        "l2_cache": parse_size(str(l2)) if l2 else None,
        **({"werror": str(p["werror"])} if "werror" in p else {}),  # absent: qemu's default (enospc)
    }


#: the QOM type qemu gives a disk on each bus (virtio-blk: -pci on q35/pc, -device on microvm's virtio-mmio)
BUS_MODELS = {"virtio-blk": ("virtio-blk-pci", "virtio-blk-device"), "virtio-scsi": ("scsi-hd",)}
#: qcow2's cluster size when the campaign does not set one
QCOW2_DEFAULT_CLUSTER = 65536


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


def config_key(test: Test) -> str:
    """What identifies a hot-plugged disk: the backing (its dataset/zvol and image) and the qemu settings."""
    key = {"ds": zfs.dataset_name(backing_test(test)), "image": image_tag(test), "disk": disk_settings(test)}
    layers = guest_layers.Layers.of(test.params)
    if layers.any:  # the layers are made once per configuration: another filesystem is another configuration
        key["layers"] = {"fs": layers.fs, "luks": layers.luks}
    if any(a in test.params for a in guest_machine.AXES):  # another guest: its disk is plugged in again
        key["processor"] = {a: test.params.get(a) for a in guest_machine.AXES}
    return json.dumps(key, sort_keys=True)


def image_create_argv(test: Test) -> list[str]:
    """`qemu-img create` for an image backing (qcow2 cluster size, preallocation), on the test's dataset, sized
    for what fio works on and the guest's layers (guest/layers.py: disk_bytes)."""
    p = test.params
    opts = []
    if p.get("backing") == "qcow2" and p.get("qcow2_cluster"):
        opts.append(f"cluster_size={parse_size(str(p['qcow2_cluster']))}")
    if p.get("preallocation"):
        opts.append(f"preallocation={p['preallocation']}")
    fmt = "qcow2" if p.get("backing") == "qcow2" else "raw"
    argv = ["qemu-img", "create", "-q", "-f", fmt]
    if opts:
        argv += ["-o", ",".join(opts)]
    return argv + [VmDiskKind.backing_path(test), str(backing_test(test).target.size)]


def image_create_argv_text(test: Test) -> str:
    return shlex.join(image_create_argv(test))
