"""Pure parts of the lab VM: qemu argv, sizes, names, per-name directories and ports (lab/qemu.py, lab/state.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tankbench.errors import UserError
from tankbench.lab import build, qemu, state, vm

V = build.Versions(
    suite="bookworm-backports",
    kernel_abi="6.12.95+deb12-amd64",
    kernel_version="v",
    zfs_version="2.3.2",
    mirror="m",
    security_mirror="s",
)
IMG = build.Image(
    dir=Path("/c/img"),
    kernel=Path("/c/img/vmlinuz"),
    initrd=Path("/c/img/initrd.img"),
    rootfs=Path("/c/img/rootfs.img"),
    host_key="ssh-ed25519 AAAA",
    versions=V,
    key="k1",
)


def _argv(accel: str = "tcg", **cfg: object) -> list[str]:
    return qemu.qemu_argv(
        name="t1",
        image=IMG,
        config=state.LabConfig(**cfg),
        accelerator=accel,  # type: ignore[arg-type]
        ssh_port=40022,
        run_dir=Path("/r/t1"),
        pubkey_blob="KEYBLOB",
    )


def test_tcg_argv_single_thread_cpu_max_no_reboot() -> None:
    argv = _argv()
    s = " ".join(argv)
    assert argv[0] == "qemu-system-x86_64"
    assert "-accel tcg,thread=single -cpu max" in s
    assert "-no-reboot" in argv and "-smp 2" in s and "-m 3072" in s
    assert "tankbench-lab-t1" in argv
    append = argv[argv.index("-append") + 1]
    assert "panic=-1" in append and "lab.sshkey=KEYBLOB" in append and "init=/usr/local/sbin/lab-init" in append
    assert f"root=LABEL={build.ROOT_LABEL}" in append


def test_kvm_argv() -> None:
    s = " ".join(_argv("kvm"))
    assert "-accel kvm -cpu host" in s and "tcg" not in s


def test_root_disk_first_with_snapshot_then_data_disks_with_serials() -> None:
    argv = _argv(disks=3, slog=True)
    drives = [argv[i + 1] for i, a in enumerate(argv) if a == "-drive"]
    devices = [argv[i + 1] for i, a in enumerate(argv) if a == "-device" and "virtio-blk" in argv[i + 1]]
    assert drives[0].startswith("file=/c/img/rootfs.img,") and "snapshot=on" in drives[0]
    assert [d.split("serial=")[1] for d in devices] == ["tbroot", "tbdata0", "tbdata1", "tbdata2", "tblog0"]
    assert all("snapshot" not in d for d in drives[1:])
    assert "file=/r/t1/tbdata0.img" in drives[1]


def test_network_forwards_only_ssh_on_loopback() -> None:
    """ssh is the lab's one way in (issue 34 item 3: a forwarded fio server ran any local user's job as root)."""
    argv = _argv()
    net = argv[argv.index("-netdev") + 1]
    assert net == "user,id=n0,hostfwd=tcp:127.0.0.1:40022-:22"
    assert "fioport" not in argv[argv.index("-append") + 1]


@pytest.mark.parametrize(
    "text,expected",
    [
        ("8G", 8 << 30),
        ("512M", 512 << 20),
        ("1T", 1 << 40),
        ("8GiB", 8 << 30),
        ("1.5G", 3 << 29),
        ("134217728", 128 << 20),
    ],
)
def test_parse_size(text: str, expected: int) -> None:
    assert state.parse_disk_size(text) == expected


@pytest.mark.parametrize("text", ["8X", "", "-1G", "G", "1M", "100T"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(UserError):
        state.parse_disk_size(text)


@pytest.mark.parametrize("name", ["", "Default", "a/b", "..", "x" * 33, "-x"])
def test_bad_names(name: str) -> None:
    with pytest.raises(UserError):
        state.check_name(name)


def test_guest_disk_paths() -> None:
    assert qemu.guest_disk_paths(2) == ["/dev/disk/by-id/virtio-tbdata0", "/dev/disk/by-id/virtio-tbdata1"]
    assert qemu.guest_disk_paths(1, True)[-1] == "/dev/disk/by-id/virtio-tblog0"


def test_two_labs_get_separate_dirs_and_ports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    a, b = state.run_dir("one"), state.run_dir("two")
    assert a != b and a.parent == b.parent == tmp_path / "tankbench" / "labs"
    port = state.free_port()
    (a / "state.json").write_text(json.dumps({"ssh_port": port, "fio_port": port + 1}))
    # a port recorded by another lab is never handed out again, even if it is free right now
    for _ in range(50):
        assert state.free_port() not in (port, port + 1)


def test_is_our_qemu_refuses_other_processes() -> None:
    import os

    assert not qemu.is_our_qemu(os.getpid(), "default")
    assert not qemu.is_our_qemu(1, "default")
    assert not qemu.is_our_qemu(2**22 + 7, "default")


def test_unknown_lab_is_a_user_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(UserError, match="no lab named 'ghost'"):
        vm.down("ghost")
    with pytest.raises(UserError, match="no lab named 'ghost'"):
        vm.require_up("ghost")
    state.run_dir("sleepy")
    with pytest.raises(UserError, match="is not up"):
        vm.require_up("sleepy")
    assert vm.status("sleepy")["state"] == "down"


def test_no_saved_state_devices_in_the_argv() -> None:
    # the saved-state experiment was removed (docs/lab.md): the root disk is always the image with snapshot=on
    argv = _argv()
    assert "-incoming" not in argv and not any("vmgenid" in a for a in argv)
