"""Guest layers (guest_fs, guest_luks) at plan time: sizes, names, the guest's scripts, what it answers."""

from __future__ import annotations

import pytest

from tankbench import model
from tankbench.guestconf import layers
from tankbench.guestconf.layers import MIB, Layers
from tankbench.zfs.props import ZfsOptions
from tests.conftest import FIXTURES

GIB = 1 << 30


def _test(size: int = 64 * MIB, props: dict[str, str] | None = None, **params: object) -> model.Test:
    target = model.Target(
        name="guest", kind="vm-disk", size=size, options=ZfsOptions(props=props or {}, pool="tank/tb-1")
    )
    base: dict[str, object] = {"backing": "zvol", "rw": "randwrite", "bs": "4k"}
    base.update(params)
    return model.Test(number=1, name="t", target=target, params=base, fio_options={}, runtime=3, ramp=0)


def test_layers_of_params_and_what_they_are_called() -> None:
    assert Layers.of({}) == Layers("none", False) and not Layers.of({}).any
    assert Layers.of({"guest_fs": "xfs", "guest_luks": True}) == Layers("xfs", True)
    assert Layers("xfs", True).describe() == "xfs on LUKS2 (aes-xts-plain64)"
    assert Layers("none", True).describe() == "LUKS2 (aes-xts-plain64)" and Layers("ext4").describe() == "ext4"


def test_cp_and_rsync_need_a_guest_filesystem_dd_does_not() -> None:
    assert not layers.accepts({"workload": "cp", "guest_fs": "none"})
    assert not layers.accepts({"workload": "rsync"})  # no guest_fs: none
    assert layers.accepts({"workload": "rsync", "guest_fs": "xfs"})
    assert layers.accepts({"workload": "dd", "guest_fs": "none", "guest_luks": True})
    assert layers.accepts({"rw": "read"})


def test_name_parts_only_for_axes_that_vary() -> None:
    p = {"guest_fs": "none", "guest_luks": True}
    assert layers.name_parts(p, {"guest_fs", "guest_luks"}) == ["nofs", "luks"]
    assert layers.name_parts({"guest_fs": "ext4", "guest_luks": False}, {"guest_luks"}) == ["noluks"]
    assert layers.name_parts(p, set()) == []


@pytest.mark.parametrize(
    "fs,luks,payload,disk",
    [
        ("none", False, 64 * MIB, 64 * MIB),
        ("none", True, 64 * MIB, 80 * MIB),  # the LUKS2 header: 16 MiB in front of the data
        ("ext4", False, 64 * MIB, 512 * MIB),  # below 512 MiB mke2fs would make 1 KiB blocks ("small")
        ("xfs", False, 64 * MIB, 300 * MIB),  # mkfs.xfs refuses less than 300 MiB
        ("xfs", True, 64 * MIB, 316 * MIB),  # the filesystem is on the dm-crypt device: header on top
        ("ext4", False, 20 * GIB, 20 * GIB + 64 * MIB + 20 * GIB // 16),
        ("xfs", True, 20 * GIB, 20 * GIB + 64 * MIB + 20 * GIB // 16 + 16 * MIB),
    ],
)
def test_disk_is_the_payload_plus_the_layers_overhead(fs: str, luks: bool, payload: int, disk: int) -> None:
    assert layers.disk_bytes(Layers(fs, luks), payload) == disk


def test_disk_sizes_are_aligned_for_zvols() -> None:
    assert layers.disk_bytes(Layers("none", True), 64 * MIB + 1) == 81 * MIB
    assert layers.disk_bytes(Layers("ext4"), 600 * MIB, align=16 * MIB) % (16 * MIB) == 0
    assert layers.volblock_align(_test(volblocksize="8M")) == 8 * MIB
    assert layers.volblock_align(_test(props={"volblocksize": "16k"})) == 16 << 10
    assert layers.volblock_align(_test(backing="qcow2")) == 0 and layers.volblock_align(_test()) == 0


def test_backing_test_carries_the_disk_size_and_leaves_plain_tests_alone() -> None:
    plain = _test()
    assert layers.backing_test(plain) is plain
    t = _test(guest_fs="xfs", guest_luks=True)
    b = layers.backing_test(t)
    assert b.target.size == 316 * MIB and b.target.name == t.target.name
    assert layers.backing_test(b) is b  # idempotent: paths computed from a backing test stay the same
    assert dict(b.params) == {**t.params, "guest_disk_bytes": 316 * MIB}
    assert layers.payload_bytes(t) == 64 * MIB  # fio still works on the target's size
    # a copy's destination holds the copy: a copy larger than the target grows the disk, layers or not
    cp = _test(size=32 * MIB, workload="dd", copy_size="100M")
    assert layers.payload_bytes(cp) == 100 * MIB and layers.backing_test(cp).target.size == 100 * MIB


def test_what_fio_opens_in_the_guest() -> None:
    assert layers.data_path(Layers("ext4"), "tbabc") == "/mnt/tbabc/tankbench.fiodata"
    assert layers.data_path(Layers("none", True), "tbabc") == "/dev/mapper/tbabc"
    assert layers.data_path(Layers("xfs", True), "tbabc") == "/mnt/tbabc/tankbench.fiodata"
    assert layers.data_path(Layers(), "tbabc") is None


def test_layer_commands_put_luks_under_the_filesystem() -> None:
    steps = layers.layer_commands(Layers("xfs", True), "/dev/sdb", "tbabc")
    assert [s for s, _ in steps] == ["luks_format", "luks_open", "mkfs", "mount"]
    fmt = steps[0][1]
    assert fmt[:2] == ["/usr/sbin/cryptsetup", "luksFormat"] and fmt[-1] == "/dev/sdb"
    assert fmt[fmt.index("--cipher") + 1] == "aes-xts-plain64" and fmt[fmt.index("--pbkdf") + 1] == "pbkdf2"
    assert fmt[fmt.index("--key-file") + 1] == "/tmp/tbabc.key"
    assert steps[1][1][-2:] == ["/dev/sdb", "tbabc"]
    assert steps[2][1] == ["/usr/sbin/mkfs.xfs", "-f", "-q", "/dev/mapper/tbabc"]
    assert steps[3][1] == ["mount", "-t", "xfs", "/dev/mapper/tbabc", "/mnt/tbabc"]
    ext4 = layers.layer_commands(Layers("ext4"), "/dev/sdb", "tbabc")
    assert ext4[0][1][:2] == ["/usr/sbin/mkfs.ext4", "-F"] and "lazy_itable_init=0" in ext4[0][1][4]
    assert layers.layer_commands(Layers(), "/dev/sdb", "x") == []


def test_setup_script_makes_the_layers_then_prints_the_evidence() -> None:
    s = layers.setup_script(Layers("ext4", True), "/dev/sdb", "tbabc")
    assert s.index("head -c 64 /dev/urandom > /tmp/tbabc.key") < s.index("luksFormat") < s.index("mkfs.ext4")
    assert "|| fail mkfs $?" in s and 'echo "== step mount $a $b"' in s
    for section in ("blkid", "mounts", "cryptsetup", "crypto", "sizes", "statfs", "end"):
        assert f"echo '== {section}'" in s
    assert "$(" not in s.replace("$(blockdev", "")  # command substitution forks: only for the sizes
    plain = layers.setup_script(Layers("xfs"), "/dev/sdb", "tbabc")
    assert "cryptsetup" not in plain and "dm_crypt" not in plain and "modprobe -a crc32c_generic xfs" in plain
    td = layers.teardown_script(Layers("xfs", True), "tbabc")
    assert td.index("umount /mnt/tbabc") < td.index("cryptsetup close tbabc") < td.index("rm -f /tmp/tbabc.key")


def test_layout_and_marker_scripts() -> None:
    assert layers.layout_script("/mnt/x/f", 64 * MIB + 1) == (
        "dd if=/dev/urandom of=/mnt/x/f bs=1M count=65 conv=fsync 2>&1\n"
    )
    m = layers.new_marker()
    assert m.startswith("TANKBENCH-MARKER-") and m != layers.new_marker()
    assert layers.marker_script("/dev/mapper/x", m) == f"printf %s {m} | dd of=/dev/mapper/x conv=notrunc,fsync 2>&1\n"


def test_parsers_of_what_the_guest_prints() -> None:
    assert layers.parse_blkid('/dev/sdb: UUID="u-1" TYPE="crypto_LUKS"\n/dev/mapper/x: UUID="u-2" TYPE="xfs"\n') == {
        "/dev/sdb": {"UUID": "u-1", "TYPE": "crypto_LUKS"},
        "/dev/mapper/x": {"UUID": "u-2", "TYPE": "xfs"},
    }
    crypto = layers.parse_crypto(
        "name         : xts(aes)\ndriver       : xts(ecb(aes-generic))\nmodule       : kernel\npriority     : 100\n"
        "refcnt       : 1\n--\nname         : xts(aes)\ndriver       : xts-aes-aesni\nmodule       : aesni_intel\n"
        "priority     : 401\nrefcnt       : 2\n"
    )
    assert [c["driver"] for c in crypto] == ["xts-aes-aesni", "xts(ecb(aes-generic))"]
    assert layers.cpu_has_aes("flags\t\t: fpu vme sse2 aes pclmulqdq") and not layers.cpu_has_aes("flags : aesx sse")
    assert layers.parse_mounts("/dev/sdb /mnt/x ext4 rw,relatime 0 0\n") == [
        {"device": "/dev/sdb", "mountpoint": "/mnt/x", "fstype": "ext4", "options": "rw,relatime"}
    ]
    sec = layers.sections("noise\n== step mkfs 10.5 12.25\n== blkid\na: b\n== failed mount 32\n== end\n")
    assert sec == {"step mkfs": "10.5 12.25", "blkid": "a: b\n", "failed mount": "32", "end": ""}


def test_script_comment_lines_describe_the_layers_for_an_export() -> None:
    lines = layers.script_comment_lines(_test(guest_fs="xfs", guest_luks=True), "/dev/disk/by-id/virtio-tbx", "tbx")
    text = "\n".join(lines)
    assert lines[0].startswith("# In the guest, on that disk (316M: 64M of data + the layers' overhead)")
    assert "xfs on LUKS2 (aes-xts-plain64)" in lines[0]
    assert "luksFormat" in text and "mkfs.xfs -f -q /dev/mapper/tbx" in text and "random data" in text
    assert lines[-1] == "# fio's filename in the guest: /mnt/tbx/tankbench.fiodata"
    assert all(line.startswith("#") for line in lines)
    assert layers.script_comment_lines(_test(), "/dev/x", "tbx") == []


def test_evidence_from_a_real_guest_answer_xfs_on_luks() -> None:
    """What a nested test guest printed for xfs on LUKS2 on a qcow2 disk (tests/fixtures/guest/)."""
    text = (FIXTURES / "guest" / "setup-xfs-luks.txt").read_text()
    lay = Layers("xfs", True)
    c = layers.evidence(lay, "/dev/sdb", "tbq", text)
    assert c["layers"] == "xfs on LUKS2 (aes-xts-plain64)" and c["layers.blkid"]["/dev/sdb"]["TYPE"] == "crypto_LUKS"
    assert c["layers.mount"]["fstype"] == "xfs" and c["layers.mount"]["device"] == "/dev/mapper/tbq"
    assert c["layers.luks.cipher"] == "aes-xts-plain64" and c["layers.luks.key_bits"] == 512
    assert c["layers.luks.sector_bytes"] == 512 and c["layers.luks.status"]["type"] == "LUKS2"
    assert c["layers.luks.crypto_driver"] == "xts-aes-aesni-avx"  # AES-NI in use (priority 500 wins)
    assert c["layers.luks.crypto_impls"] == ["xts-aes-aesni-avx (500)", "xts-aes-aesni (401)"]
    assert c["layers.disk_bytes"] == 600 * MIB and c["layers.luks.device_bytes"] == 600 * MIB - 16 * MIB
    assert c["layers.fs_block_bytes"] == 4096 and c["layers.fs_bytes"] == 133120 * 4096
    assert c["layers.seconds"] == {"luks_format": 50.93, "luks_open": 22.55, "mkfs": 43.02, "mount": 1.3}
    assert layers.layers_verified(lay, c, "/dev/sdb", "tbq") == []
    # the same answer does not prove other layers
    assert layers.layers_verified(Layers("ext4", True), c, "/dev/sdb", "tbq") == [
        "blkid does not see ext4 on /dev/mapper/tbq: {'UUID': '7f24fb1d-c976-419b-b256-8b9c4ef862fa', "
        "'BLOCK_SIZE': '512', 'TYPE': 'xfs'}",
        "/mnt/tbq is not /dev/mapper/tbq mounted as ext4: {'device': '/dev/mapper/tbq', 'mountpoint': '/mnt/tbq', "
        "'fstype': 'xfs', 'options': 'rw,relatime,attr2,inode64,logbufs=8,logbsize=32k,noquota'}",
    ]
    wrong = layers.layers_verified(
        Layers("xfs", True), dict(c, **{"layers.luks.cipher": "aes-cbc-essiv:sha256"}), "/dev/sdb", "tbq"
    )
    assert wrong == ["cryptsetup status shows cipher 'aes-cbc-essiv:sha256', not aes-xts-plain64"]


def test_a_run_whose_layers_were_wrong_is_not_a_valid_measurement() -> None:
    from tankbench.zfs.checks import run_validity

    ok = {"layers.verified": True, "layers.luks": True, "layers.marker_as_expected": True}
    assert run_validity({}, ok) == []
    wrong = dict(ok, **{"layers.verified": False, "layers.problems": ["blkid does not see xfs on /dev/sdb: {}"]})
    assert run_validity({}, wrong) == ["the guest's layers were not as asked: blkid does not see xfs on /dev/sdb: {}"]
    leak = dict(ok, **{"layers.marker_as_expected": False})
    assert run_validity({}, leak) == [
        "a marker written in the guest was found in plaintext in the backing despite LUKS"
    ]
    lost = {"layers.luks": False, "layers.marker_as_expected": False}
    assert run_validity({}, lost) == ["a marker written in the guest did not reach the backing"]
