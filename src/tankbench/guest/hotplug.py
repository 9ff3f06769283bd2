"""Hot-plugging disks into a running test guest (QMP blockdev-add + device_add, and back), finding them in the
guest, and reading back their settings as qemu applied them: the disk half of TestGuest (guest/testguest.py)."""

from __future__ import annotations

import re
import time
from typing import Any

from tankbench.errors import HostError, UserError
from tankbench.guest import qemu
from tankbench.guest.records import BlockSettings, cache_mode, parse_devices


class HotPlug:
    """TestGuest's disks: attach, detach, the guest's device of a disk, what qemu made of each."""

    name: str
    machine: str
    accel_used: str
    disks: dict[str, qemu.GuestDisk]
    devices: dict[str, str]
    _hotplugged: dict[str, dict[str, object]]

    def qmp(self, execute: str, **arguments: Any) -> Any:
        """One QMP command to the guest's qemu (TestGuest's)."""
        raise NotImplementedError

    def _call(self, request: dict[str, Any], timeout: float, want: str = "result") -> dict[str, Any]:
        raise NotImplementedError

    def refresh_devices(self) -> dict[str, str]:
        """Ask the guest which disks it sees: {disk id (serial): guest device path}."""
        ev = self._call({"op": "guest", "gop": "devices", "payload": "", "timeout": 60}, 120)
        self.devices = parse_devices(ev["files"].get("devices", ""))
        return self.devices

    def device(self, disk: str) -> str:
        """The guest's device path of a disk id, e.g. "/dev/vdb"."""
        if disk not in self.devices:
            self.refresh_devices()
        if disk not in self.devices:
            raise HostError(f"guest {self.name}: no disk with serial {disk!r} (it sees {self.devices})")
        return self.devices[disk]

    def attach(self, disk: qemu.GuestDisk, timeout: float = 120.0) -> str:
        """Hot-plug a disk (QMP blockdev-add + device_add); returns its guest device path once the guest sees it.

        virtio-scsi disks go on the spare controller every guest boots with; virtio-blk disks need PCI
        hot-plug (machine = "q35"): microvm's virtio-mmio devices cannot be hot-plugged.
        """
        if disk.id in self.disks:
            raise UserError(f"guest {self.name}: a disk with id {disk.id!r} is already attached", "detach it first")
        if disk.bus == "virtio-blk" and self.machine != "q35":
            raise UserError(
                f"guest {self.name}: cannot hot-plug a virtio-blk disk on machine {self.machine!r}",
                "use bus = 'virtio-scsi', machine = 'q35', or attach the disk at boot",
            )
        if disk.bus == "virtio-blk":
            used = {str(d.get("bus")) for d in self._hotplugged.values()}
            free = [f"hp{i}" for i in range(qemu.HOTPLUG_PORTS) if f"hp{i}" not in used]
            if not free:
                raise UserError(
                    f"guest {self.name}: all {qemu.HOTPLUG_PORTS} hot-plug ports are in use", "detach a disk first"
                )
            dev = qemu.device(disk, self.machine, bus=free[0])
        else:
            dev = qemu.device(disk, self.machine, bus="scsihp.0")
            dev.pop("iothread", None)
        qemu.check_iothreads([disk], self.machine, self.accel_used)
        if disk.iothread and disk.bus == "virtio-blk":
            self.qmp("object-add", **{"qom-type": "iothread", "id": f"io-{disk.id}"})
        self.qmp("blockdev-add", **qemu.blockdev(disk))
        try:
            self.qmp("device_add", **dev)
        except HostError:
            self.qmp("blockdev-del", **{"node-name": disk.id})
            raise
        self.disks[disk.id] = disk
        self._hotplugged[disk.id] = dev
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if disk.id in self.refresh_devices():
                return self.devices[disk.id]
            time.sleep(1.0)
        raise HostError(f"guest {self.name}: hot-plugged disk {disk.id} did not appear in the guest in {timeout:.0f} s")

    def detach(self, disk_id: str, timeout: float = 120.0) -> None:
        """Unplug a hot-plugged disk (device_del, wait until qemu has released it, blockdev-del)."""
        if disk_id not in self._hotplugged:
            raise UserError(
                f"guest {self.name}: disk {disk_id!r} was not hot-plugged",
                "only disks added with attach() can be detached",
            )
        self.qmp("device_del", id=f"dev-{disk_id}")
        deadline = time.monotonic() + timeout
        qdev = re.compile(rf"(^|/)dev-{disk_id}(/|$)")  # virtio-blk-pci reports ".../dev-<id>/virtio-backend"
        while any(qdev.search(str(b.get("qdev", ""))) for b in self.qmp("query-block")):
            if time.monotonic() > deadline:
                raise HostError(f"guest {self.name}: disk {disk_id} still attached {timeout:.0f} s after device_del")
            time.sleep(0.5)
        self.qmp("blockdev-del", **{"node-name": disk_id})
        if self.disks[disk_id].iothread and self.disks[disk_id].bus == "virtio-blk":
            self.qmp("object-del", id=f"io-{disk_id}")
        del self._hotplugged[disk_id]
        del self.disks[disk_id]
        self.devices.pop(disk_id, None)

    def block_settings(self) -> dict[str, BlockSettings]:
        """Every disk's settings as qemu reports them, by disk id (QMP query-block and qom-get)."""
        out: dict[str, BlockSettings] = {}
        for b in self.qmp("query-block"):
            ins = b.get("inserted") or {}
            node = ins.get("node-name", "")
            if node not in self.disks:
                continue
            qdev = f"/machine/peripheral/dev-{node}"
            wce = self.qmp("qom-get", path=qdev, property="write-cache")
            model = self.qmp("qom-get", path=qdev, property="type")
            werror = self.qmp("qom-get", path=qdev, property="werror")
            iothread = None
            if self.disks[node].bus == "virtio-blk":
                found = self.qmp("qom-get", path=qdev, property="iothread")  # "/objects/io-<id>" or ""
                iothread = str(found).rsplit("/", 1)[-1] if found else None
            image = ins.get("image") or {}
            out[node] = BlockSettings(
                node=node,
                device=str(b.get("qdev", "")),
                driver=str(ins.get("drv", "")),
                file=str(ins.get("file", "")),
                cache_mode=cache_mode(ins.get("cache", {})),
                cache=dict(ins.get("cache", {})),
                cluster_size=image.get("cluster-size"),
                write_cache=str(wce),
                iothread=iothread,
                werror=str(werror),
                model=str(model),
            )
        return out
