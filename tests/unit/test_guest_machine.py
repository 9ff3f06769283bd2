"""The test guest's processor as vm-disk axes (guest_cpu, guest_cpus): issue 17 item 4, seeds 001 and 003."""

from __future__ import annotations

from pathlib import Path

from tankbench.campaign import expand, load_spec
from tankbench.guest import qemu
from tankbench.guestconf import machine
from tankbench.targets.vmdisk import config_key, disk_id

CAMPAIGN = """
[campaign]
name = "cpu"
[pool]
name = "tbcpu"
vdevs = ["/dev/disk/by-id/virtio-tbdata0"]
confirm = ["/dev/disk/by-id/virtio-tbdata0"]
[[target]]
name = "guest"
kind = "vm-disk"
size = "64M"
[matrix]
rw = ["randwrite"]
bs = ["4k"]
"""


def _tests(tmp_path: Path, axes: str = "") -> list:  # type: ignore[type-arg]
    path = tmp_path / "c.toml"
    path.write_text(CAMPAIGN.replace("[matrix]\n", "[matrix]\n" + axes))
    return expand(load_spec(str(path)))


def test_processor_axes_expand_outermost_and_name_the_tests(tmp_path: Path) -> None:
    tests = _tests(tmp_path, 'guest_cpu = ["kvm64", "max,aes=off"]\nguest_cpus = [1, 2]\nguest_luks = [false, true]\n')
    assert len(tests) == 8
    # the processor is the outermost of the guest's axes: consecutive tests share a guest boot
    procs = [machine.Processor.of(t.params) for t in tests]
    assert sum(1 for a, b in zip(procs, procs[1:]) if a != b) == 3
    assert tests[0].name == "zfs-vm-zvol-randwrite-4k-cpu-kvm64-1cpus-noluks"
    assert "cpu-max-aes-off-2cpus-luks" in tests[-1].name
    # another processor is another hot-plugged configuration (the disk is plugged into the new guest)
    assert len({config_key(t) for t in tests}) == 8


def test_without_the_axes_a_disk_keeps_its_serial(tmp_path: Path) -> None:
    """A campaign that does not name the processor keeps its disk ids (journals and resumes stay valid)."""
    plain = _tests(tmp_path)[0]
    one = _tests(tmp_path, "guest_cpus = [1]\n")[0]
    assert "processor" not in config_key(plain) and disk_id(plain) != disk_id(one)
    assert machine.Processor.of(plain.params) == machine.Processor(None, 1) == machine.Processor.of(one.params)


def test_qemu_gets_the_model_and_the_count() -> None:
    def argv(**kw: object) -> list[str]:
        return qemu.guest_argv(name="g", kernel="/k", initrd="/i", run_dir="/r", disks=[], **kw)  # type: ignore[arg-type]

    tcg = argv(accel="tcg")
    assert tcg[tcg.index("-cpu") + 1] == "max" and tcg[tcg.index("-smp") + 1] == "1"
    kvm = argv(accel="kvm", cpu_model="kvm64", cpus=2)
    assert kvm[kvm.index("-cpu") + 1] == "kvm64" and kvm[kvm.index("-smp") + 1] == "2"
    assert argv(accel="kvm")[argv(accel="kvm").index("-cpu") + 1] == "host"


def test_what_the_guest_reports_is_read_back_and_compared() -> None:
    out = "flags\t\t: fpu vme sse2 aes avx\nmodel name\t: QEMU TCG CPU version 2.5+\n2\n"
    got = machine.parse_readback(out)
    assert got == {"guest.cpu_aes": True, "guest.cpu_model": "QEMU TCG CPU version 2.5+", "guest.nproc": 2}
    assert machine.mismatches(machine.Processor("max", 2), got) == []
    assert machine.mismatches(machine.Processor("max,aes=off", 1), got) == [
        "guest_cpus 1: the guest has 2 online",
        "guest_cpu max,aes=off: AES-NI is present in the guest",
    ]
    # a plain model name: only qemu knows its flags, so nothing is expected of AES-NI
    assert machine.expects_aes("kvm64") is None and machine.expects_aes("kvm64,+aes") is True
    assert machine.parse_readback("") == {"guest.cpu_aes": None, "guest.cpu_model": None, "guest.nproc": None}
