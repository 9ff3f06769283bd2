"""Issue 17 item 4: each preset carries its seed's axes (plan level: they expand and validate)."""

from __future__ import annotations

from tankbench.campaign import expand, load_spec
from tankbench.cli.presets import resolve_campaign
from tankbench.zfs.props import zfs_options


def test_recordsize_mix_has_the_seeds_queue_depths_and_its_uncompressed_dataset():
    tests = expand(load_spec(resolve_campaign("recordsize-mix")))
    depths = {(t.params["rw"], t.params["iodepth"]) for t in tests}
    # CrystalDiskMark's: SEQ1M Q1T1 and Q8T1, RND4K Q1T1 and Q32T1
    assert depths == {
        ("read", 1),
        ("read", 8),
        ("write", 1),
        ("write", 8),
        ("randread", 1),
        ("randread", 32),
        ("randwrite", 1),
        ("randwrite", 32),
    }
    off = [t for t in tests if t.params["compression"] == "off"]
    # the seed's uncompressed dataset, at its default recordsize only: every workload and depth once
    assert {t.params["recordsize"] for t in off} == {"default"} and len(off) == 8
    assert {t.params["compression"] for t in tests} == {"lz4", "off"}


def test_recordsize_mix_small_forms_keep_their_cost():
    for scale, runs in (("quick", 8), ("ci", 6)):
        tests = expand(load_spec(resolve_campaign("recordsize-mix"), scale))
        assert len(tests) == runs, scale
        assert {t.params["iodepth"] for t in tests} == {1}
        assert "compression" not in tests[0].params or {t.params["compression"] for t in tests} == {"lz4"}


def test_zvol_vs_qcow2_is_the_seeds_machine_and_its_size_based_jobs():
    from tankbench.fio import jobs
    from tankbench.guestconf import layers
    from tankbench.targets.vmdisk import VmDiskKind

    spec = load_spec(resolve_campaign("zvol-vs-qcow2"))
    assert spec.pool is not None and spec.pool.layout.startswith("mirror")
    assert spec.host.lab_machine.disk_model == "ssd"
    tests = expand(spec)
    guest = [t for t in tests if t.target.kind == "vm-disk" and not t.is_fill]
    assert guest and all(t.params["guest_cpus"] == 2 and t.params["numjobs"] == 16 for t in guest)
    assert all(t.params.get("mode") == "size" for t in tests if not t.is_fill)
    assert all(zfs_options(t.target).props["atime"] == "off" for t in tests)
    t = guest[0]
    assert jobs.job_bytes(t) == 256 << 20  # the seed's --size=256m per job
    path = VmDiskKind.fio_filename(t)
    files = layers.job_files(t, path)
    assert len(files) == 16 and files[3] == path.replace(".fiodata", ".3.fiodata")
    text = layers.guest_job_text(t, jobs.job_text(t), path)
    assert "offset_increment" not in text and "filename=" not in text
    assert f"directory={path.rsplit('/', 1)[0]}\n" in text and "filename_format=tankbench.$jobnum.fiodata" in text
    assert "size=256M\n" in text and "end_fsync=1" in text and "time_based" not in text


def test_zvol_vs_qcow2_small_forms_stay_time_based_without_a_filesystem():
    for scale in ("quick", "ci"):
        spec = load_spec(resolve_campaign("zvol-vs-qcow2"), scale)
        for t in expand(spec):
            if t.target.kind == "vm-disk" and not t.is_fill:
                from tankbench.fio import jobs
                from tankbench.guestconf import layers

                assert t.params.get("mode", "time") == "time" and t.params["guest_fs"] == "none"
                assert layers.job_files(t, "/dev/x") == ["/dev/x"]
                assert "offset_increment" in jobs.job_text(t)


def test_tuning_matrix_has_the_seeds_vm_half_in_its_order():
    from tankbench.guestconf import machine

    spec = load_spec(resolve_campaign("tuning-matrix"))
    vm = [t for t in expand(spec) if t.target.kind == "vm-disk"]
    steps = [
        (
            t.params["bus"],
            t.params["disk_cache"],
            t.params.get("iothread", False),
            t.params.get("guest_luks", False),
            t.params["guest_cpu"],
            t.params["guest_cpus"],
        )
        for t in vm
    ]
    assert steps == [
        ("virtio-scsi", "writeback", False, False, "max,aes=off", 2),
        ("virtio-blk", "none", False, False, "max,aes=off", 2),
        ("virtio-blk", "none", True, False, "max,aes=off", 2),
        ("virtio-blk", "none", True, True, "max,aes=off", 2),
        ("virtio-blk", "none", True, True, "max", 2),
        ("virtio-blk", "none", True, True, "max", 1),
    ]
    assert all(t.params["guest_fs"] == "ext4" and t.params["sync_mode"] == "sync" for t in vm)
    assert all(t.params["backing"] == "zvol" for t in vm)  # as Proxmox makes VM disks on ZFS
    # the guest boots first with the first step's processor (one boot per processor, three in all)
    assert machine.first_processor(spec.matrix, spec.includes) == machine.Processor("max,aes=off", 2)
    for scale in ("quick", "ci"):
        assert not [t for t in expand(load_spec(resolve_campaign("tuning-matrix"), scale)) if t.target.name == "vm"]


def test_zvol_issues_has_the_guest_copies_and_the_zero_filled_reread():
    tests = expand(load_spec(resolve_campaign("zvol-issues")))
    guest = [t for t in tests if t.target.kind == "vm-disk"]
    # only the seed's in-guest copies: cp, rsync and dd onto xfs on a zvol and on a raw image, virtio-blk
    assert sorted((t.params["backing"], t.params["workload"]) for t in guest) == sorted(
        (b, w) for b in ("zvol", "raw") for w in ("cp", "rsync", "dd")
    )
    assert all(t.params["guest_fs"] == "xfs" and t.params["bus"] == "virtio-blk" for t in guest)
    assert {t.params.get("recordsize") for t in guest if t.params["backing"] == "raw"} == {"default"}
    zero = [t for t in tests if t.params.get("layout") == "zero"]
    assert {(t.target.name, t.params["rw"], t.params["bs"], t.params["iodepth"], t.params["io"]) for t in zero} == {
        ("zvol", "randread", "4k", 24, "direct"),
        ("zvol", "randread", "4k", 24, "buffered"),
    }
    # the same reads of the random-filled zvol are in the matrix, to compare with
    same = {
        (t.params["io"], t.params.get("volblocksize"))
        for t in tests
        if t.target.name == "zvol"
        and t.params.get("rw") == "randread"
        and t.params.get("bs") == "4k"
        and t.params["iodepth"] == 24
        and t.params.get("layout", "random") == "random"
    }
    assert {("direct", "4k"), ("buffered", "4k")} <= same
    for scale in ("quick", "ci"):
        small = expand(load_spec(resolve_campaign("zvol-issues"), scale))
        assert not [t for t in small if t.target.kind == "vm-disk" or t.params.get("layout") == "zero"]
