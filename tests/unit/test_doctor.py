"""`tankbench doctor`: parsers against real lab outputs and documented libvirt/Proxmox formats; each check."""

from __future__ import annotations

import json
import shlex

import pytest

from tankbench.campaign import load_spec
from tankbench.campaign.overrides import Overrides, toml_value
from tankbench.cli.presets import resolve_campaign
from tankbench.doctor.checks import diagnose, view
from tankbench.doctor.collect import split_sections
from tankbench.doctor.parse import (
    cpu_has_aes,
    parse_blkid_export,
    parse_libvirt_domain,
    parse_lsblk,
    parse_proxmox_conf,
    parse_pve_storage,
    parse_swaps,
)
from tests.conftest import FIXTURES, tankbench

DOC = FIXTURES / "doctor"
#: real: collected in the lab (OpenZFS 2.3.2) with six+ planted misconfigurations, and a clean pool
PLANTED = (DOC / "lab-planted.txt").read_text()
CLEAN = (DOC / "lab-clean.txt").read_text()
#: written from libvirt's domain XML and Proxmox's qm.conf(5)/storage.cfg documentation (no such host here)
DOCUMENTED = (DOC / "documented-libvirt-proxmox.txt").read_text()


def checks(text: str) -> set[tuple[str, str]]:
    return {(f.check, f.subject) for f in diagnose(view(text))}


def test_planted_lab_pool_finds_each_misconfiguration():
    assert checks(PLANTED) == {
        ("ashift", "pool tbdoc"),
        ("volblocksize", "zvol tbdoc/vm1"),
        ("atime", "dataset tbdoc"),
        ("compression", "dataset tbdoc"),
        ("sync-disabled", "dataset tbdoc/db"),
        ("logbias-throughput", "dataset tbdoc/db"),
        ("arc-max", "ARC"),
        ("slog-plp", "pool tbdoc log"),
        ("swap-on-zvol", "swap /dev/zd16"),
    }


def test_clean_lab_pool_finds_nothing():
    assert diagnose(view(CLEAN)) == []


def test_documented_vm_configs():
    found = checks(DOCUMENTED)
    assert ("guest-cpu-aes", "libvirt web1") in found and ("guest-cpu-aes", "proxmox VM 100") in found
    assert ("guest-cpu-aes", "libvirt db1") not in found, "host-passthrough has AES-NI"
    assert ("vm-disk-bus", "libvirt web1 disk sda") in found
    assert ("vm-disk-cache", "proxmox VM 100 disk scsi0") in found
    assert ("vm-disk-iothread", "proxmox VM 100 disk scsi0") in found, "iothread without virtio-scsi-single"
    assert ("vm-disk-aio", "libvirt web1 disk sda") in found
    assert not any(c == "vm-disk-bus" and "db1" in s for c, s in found)
    assert ("slog-plp", "pool rpool log") in found and ("arc-max", "ARC") in found
    assert not any(c in ("ashift", "atime", "compression", "volblocksize") for c, _ in found), found


def test_every_finding_names_evidence_source_fix_and_a_campaign_that_parses():
    for text in (PLANTED, DOCUMENTED):
        for f in diagnose(view(text, "ssh://root@bench.example.org")):
            assert f.evidence and f.source and f.fix, f
            assert f.campaign or f.check == "swap-on-zvol", f
            for cmd in f.campaign:
                if cmd.startswith("tankbench run "):
                    assert "--host ssh://root@bench.example.org" in cmd
                    load_spec(*parse_command(cmd))  # raises on a campaign that does not parse


def parse_command(cmd: str) -> tuple[str, str, Overrides]:
    """A suggested `tankbench run PRESET --scale S [--disks ..] [--set k=v ..]` as load_spec arguments."""
    words = shlex.split(
        cmd.replace("<SPARE-ID>", "/dev/disk/by-id/ata-SPARE1", 1).replace("<SPARE-ID>", "/dev/disk/by-id/ata-SPARE2")
    )
    preset, scale = words[2], words[words.index("--scale") + 1]
    sets, disks = [], ()
    for flag, value in zip(words, words[1:]):
        if flag == "--set":
            k, _, raw = value.partition("=")
            sets.append((k, toml_value(raw)))
        elif flag == "--disks":
            disks = tuple(value.split(","))
    return resolve_campaign(preset), scale, Overrides(sets=tuple(sets), disks=disks)


def test_parsers():
    s = split_sections(PLANTED)
    assert {"zpool-status", "zfs-get", "lsblk", "arcstats", "swaps", "cpu-flags"} <= set(s)
    blocks = parse_lsblk(s["lsblk"])
    assert blocks["vdb1"].parent == "vdb" and blocks["vdb"].phy_sec == 512 and blocks["zd0"].fstype == "ext4"
    assert parse_lsblk("not json") == {}
    assert parse_blkid_export(s["blkid-zvols"])["/dev/zd0"]["BLOCK_SIZE"] == "1024"
    assert parse_swaps(s["swaps"]) == ["/dev/zd16"]
    d = split_sections(DOCUMENTED)
    web = parse_libvirt_domain(d["libvirt web1"])
    assert web.cpu_has_aes is False and [x.name for x in web.disks] == ["sda"], "the cdrom is not a disk"
    assert web.disks[0].cache == "writeback" and web.disks[0].aio == "threads" and not web.disks[0].iothread
    pve = parse_proxmox_conf(d["proxmox /etc/pve/qemu-server/100.conf"], "VM 100")
    assert [x.name for x in pve.disks] == ["scsi0"] and pve.disks[0].cache == "unsafe", "snapshot ignored"
    assert pve.controller == "virtio-scsi-pci" and pve.cpu_has_aes is False
    assert parse_pve_storage(d["pve-storage"]) == {"local-zfs": "rpool/data"}
    assert cpu_has_aes("kvm64", "+aes") and cpu_has_aes("x86-64-v2-AES") and cpu_has_aes("Skylake-Server")
    assert cpu_has_aes("kvm64") is False and cpu_has_aes("mystery") is None


@pytest.mark.parametrize("name,code", [("lab-planted.txt", 1), ("lab-clean.txt", 0)])
def test_cli_reads_a_saved_collection(name: str, code: int, tmp_path):
    res = tankbench("doctor", "--input", str(DOC / name), "--json", cwd=tmp_path)
    assert res.returncode == code, res.stderr
    doc = json.loads(res.stdout)
    assert bool(doc["findings"]) == bool(code)
    res = tankbench("doctor", "--input", str(DOC / name), cwd=tmp_path)
    assert ("No findings." in res.stdout) == (code == 0) and "measure:" in res.stdout or code == 0


def test_cli_bad_input(tmp_path):
    junk = tmp_path / "junk.txt"
    junk.write_text("hello\n")
    res = tankbench("doctor", "--input", str(junk))
    assert (
        res.returncode == 2
        and res.stderr.startswith(f"Error: {junk}: not an output of doctor's")
        and "Hint: " in res.stderr
    )
    res = tankbench("doctor", "--host", "nowhere-file.toml")
    assert res.returncode == 2 and "no such host file" in res.stderr
    res = tankbench("doctor", "--script")
    assert res.returncode == 0 and "zpool status -P" in res.stdout


def test_a_vm_config_it_could_not_read_is_said_not_counted(tmp_path):
    """Run as a user who may not read /etc/pve/qemu-server/100.conf, the script's `cat` printed Permission denied,
    and doctor said `1 VM config(s) read` and `No findings.`: the VM checks had not run and nobody was told. The
    refusal here is real: cat of a mode-000 file without the capabilities that let root read it."""
    import os
    import subprocess

    conf = tmp_path / "100.conf"
    conf.write_text("cores: 2\nscsi0: local-zfs:vm-100-disk-0,size=32G\n")
    conf.chmod(0)  # unreadable even by its owner
    argv = ["cat", str(conf)]
    if os.geteuid() == 0:
        argv = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", *argv]
    said = subprocess.run(argv, capture_output=True, text=True).stderr.strip()
    assert said == f"cat: {conf}: Permission denied", said
    saved = tmp_path / "collected.txt"
    saved.write_text(CLEAN + f"==> proxmox {conf} <==\n{said}\n")
    res = tankbench("doctor", "--input", str(saved), cwd=tmp_path)
    assert "0 VM config(s) read" in res.stdout, res.stdout
    assert f"Note: could not read {conf}: Permission denied: its VM checks did not run" in res.stdout, res.stdout
    doc = json.loads(tankbench("doctor", "--input", str(saved), "--json", cwd=tmp_path).stdout)
    assert doc["vms"] == [] and doc["unread"] == [f"{conf}: Permission denied"]
