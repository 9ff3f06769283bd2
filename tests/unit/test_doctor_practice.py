"""doctor's checks beyond the seeds (doctor/practice.py): each on the real clean lab collection with one mistake
written into it as ZFS prints it (the lab test, tests/lab/test_real_host.py, plants them on a real pool), each with
evidence, source, fix and a campaign that parses, and none on the clean collection."""

from __future__ import annotations

from tankbench.campaign import load_spec
from tankbench.doctor.checks import diagnose, view
from tankbench.doctor.view import parse_vm_images, parse_zpool_list
from tests.unit.test_doctor import CLEAN, parse_command

GIB = 1 << 30


def plant(text: str, section: str, lines: str) -> str:
    """`text` with `lines` added at the end of `section` (created when absent)."""
    head = f"==> {section} <==\n"
    if head not in text:
        return text + head + lines
    return text.replace(head, head + lines, 1)


def found(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in diagnose(view(text, "ssh://root@bench.example.org")):
        out.setdefault(f.check, []).append(f.subject)
        assert f.evidence and f.source and f.fix and f.campaign, f
        for cmd in f.campaign:
            if cmd.startswith("tankbench run "):
                load_spec(*parse_command(cmd))  # raises on a campaign that does not parse
    return out


def test_the_clean_collection_has_no_finding_of_these_checks() -> None:
    assert found(CLEAN) == {}


def test_dedup_on_a_host_with_little_ram() -> None:
    text = plant(CLEAN, "zfs-get", "tbclean/data\tdedup\ton\tlocal\n")
    text = plant(text, "zpool-list", "tbclean\t8321499136\t1000000\t8320499136\t0\t0\n")
    hits = diagnose(view(text))
    (f,) = [f for f in hits if f.check == "dedup"]
    assert f.subject == "dataset tbclean/data" and f.severity == "warn"  # 2.9 GiB of RAM
    assert "dedup=on (local)" in f.evidence and "RAM 2.9" in f.evidence
    assert found(text) == {"dedup": ["dataset tbclean/data"]}
    inherited = plant(text, "zfs-get", "tbclean/data/child\tdedup\ton\tinherited from tbclean/data\n")
    assert found(inherited) == {"dedup": ["dataset tbclean/data"]}, "reported once, where it is set"


def test_vm_images_on_a_dataset_with_1m_records_found_from_the_files() -> None:
    lines = (
        "tbclean/vms\t1048576\t514649fb\t/tbclean/vms/web.qcow2\n"
        "tbclean/vms\t1048576\teb63900000\t/tbclean/vms/db.raw\n"
        "tbclean/vms\t1048576\t00000000\t/tbclean/vms/notes.qcow2\n"  # named qcow2, not one
        "tbclean/vms\t1048576\t514649fb\t/tbclean/vms/disk-without-extension\n"  # unnamed, but qcow2
    )
    text = plant(CLEAN, "vm-images", lines)
    (f,) = [f for f in diagnose(view(text)) if f.check == "vm-image-recordsize"]
    assert f.subject == "dataset tbclean/vms" and "recordsize=1M" in f.title
    assert (
        "web.qcow2 (qcow2)" in f.evidence and "db.raw (raw)" in f.evidence and "without-extension (qcow2)" in f.evidence
    )
    assert "notes.qcow2" not in f.evidence
    assert any("matrix.recordsize" in c and '"1M", "64k"' in c for c in f.campaign)
    assert found(text) == {"vm-image-recordsize": ["dataset tbclean/vms"]}


def test_arc_max_above_the_ram_is_ignored_by_zfs() -> None:
    text = CLEAN.replace("zfs_arc_max:1560281088", f"zfs_arc_max:{6 * GIB}")
    (f,) = [f for f in diagnose(view(text)) if f.check == "arc-max-ignored"]
    assert "above the RAM" in f.evidence and "c_max is 1.5" in f.evidence
    assert found(text) == {"arc-max-ignored": ["ARC"]}
    low = CLEAN.replace("zfs_arc_max:1560281088", f"zfs_arc_max:{32 << 20}")
    assert "below the 64 MiB floor" in next(f.evidence for f in diagnose(view(low)) if f.check == "arc-max-ignored")
    unset = CLEAN.replace("zfs_arc_max:1560281088", "zfs_arc_max:0")
    assert "arc-max-ignored" not in found(unset), "0 is the default: nothing set, nothing ignored"


def test_checksum_off_and_a_full_pool() -> None:
    text = plant(CLEAN, "zfs-get", "tbclean/data\tchecksum\toff\tlocal\n")
    text = plant(text, "zpool-list", "tbclean\t8321499136\t7800000000\t521499136\t93\t41\n")
    assert found(text) == {"checksum-off": ["dataset tbclean/data"], "pool-full": ["pool tbclean"]}
    (full,) = [f for f in diagnose(view(text)) if f.check == "pool-full"]
    assert full.severity == "warn" and "fragmentation 41%" in full.evidence
    eighty = plant(CLEAN, "zpool-list", "tbclean\t8321499136\t6700000000\t1621499136\t80\t-\n")
    assert [f.severity for f in diagnose(view(eighty)) if f.check == "pool-full"] == ["info"]


def test_the_parsers_of_the_new_sections() -> None:
    assert parse_zpool_list("tank\t100\t10\t90\t10\t-\nnoise line\n") == {
        "tank": {"size": 100, "allocated": 10, "free": 90, "capacity": 10, "fragmentation": -1}
    }
    assert parse_vm_images("a\t1048576\t514649fb\t/a/x.img\nbad\n") == [("a", 1048576, "qcow2", "/a/x.img")]
    assert parse_vm_images("a\t1048576\t00\t/a/x.vmdk\na\t1048576\t00\t/a/x.txt\n") == [
        ("a", 1048576, "vmdk", "/a/x.vmdk")
    ]
