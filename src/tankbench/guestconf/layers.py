"""What a test guest puts between fio and its disk: LUKS2 (dm-crypt) and a filesystem (seeds 000 and 001).

Two vm-disk axes: `guest_fs = "none" | "ext4" | "xfs"` (fio on the disk itself, or on a file in a filesystem
made in the guest) and `guest_luks = false | true` (LUKS2 under the filesystem, or under fio directly). The
layers belong to a configuration (the backing and its qemu settings): formatted, opened, made and mounted
once when the configuration is hot-plugged, closed before it is unplugged.

Sizes: the target's `size` is what fio works on (the file in the guest filesystem, or the dm-crypt device);
the disk gets the overhead on top (`disk_bytes`): the LUKS2 header, the filesystem's metadata and journal,
and the smallest filesystem mkfs makes as Debian would (xfs refuses less than 300 MiB; mke2fs makes ext4
below 512 MiB with 1 KiB blocks, its "small" type, which no real VM disk has).

The pure parts (sizes, names, the guest's shell scripts, parsing what it answers) are here; guest/layers.py's
`GuestLayers` runs them in a TestGuest.
"""

from __future__ import annotations

import posixpath
import re
import secrets
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from tankbench.guestconf.machine import cpu_has_aes as cpu_has_aes
from tankbench.model import Test
from tankbench.units import fmt_size, parse_size
from tankbench.zfs.props import zfs_options

MIB = 1 << 20
#: the layer axes, outermost first (LUKS is under the filesystem)
AXES = ("guest_luks", "guest_fs")
FILESYSTEMS = ("none", "ext4", "xfs")
#: copy workloads that write a file: they need a filesystem in the guest (dd can write the device)
FILE_COPIES = ("cp", "rsync")
#: LUKS2's default header and keyslot area in front of the data (cryptsetup 2.x: data offset 16 MiB)
LUKS_HEADER = 16 * MIB
#: metadata, journal/log and inode room a filesystem takes besides the file: fixed + a share of the file
FS_OVERHEAD_FIXED = 64 * MIB
FS_OVERHEAD_SHARE = 16  # 1/16 of the payload: ext4's inode tables (1/64) and journal, xfs's log, with room
#: the smallest filesystem tankbench makes: xfsprogs 6.x refuses < 300 MiB; mke2fs.conf's "small" type
#: (1 KiB blocks, an inode per 4 KiB) applies below 512 MiB
FS_MIN = {"ext4": 512 * MIB, "xfs": 300 * MIB}
#: the file fio (and a copy) writes in the guest filesystem
DATA_FILE = "tankbench.fiodata"
#: LUKS2 as tankbench formats it. pbkdf2 with 1000 iterations (its minimum): the default argon2id takes ~2 s
#: of CPU and 1 GiB of memory per format/open on real hardware, minutes under emulation; the key derivation
#: only guards the keyslot and does not change the I/O path being measured
CIPHER = "aes-xts-plain64"
KEY_BITS = 512
LUKS_FORMAT = (
    "--batch-mode",
    "--type",
    "luks2",
    "--cipher",
    CIPHER,
    "--key-size",
    str(KEY_BITS),
    "--hash",
    "sha256",
    "--pbkdf",
    "pbkdf2",
    "--pbkdf-force-iterations",
    "1000",
)
KEY_BYTES = 64
#: mkfs as Debian makes them, but ext4's inode tables and journal are written now: lazy init would zero them
#: from a kernel thread in the background, writing to the disk while the first tests run
MKFS = {
    "ext4": ("/usr/sbin/mkfs.ext4", "-F", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0"),
    "xfs": ("/usr/sbin/mkfs.xfs", "-f", "-q"),
}
CRYPTSETUP = "/usr/sbin/cryptsetup"
BLKID = "/usr/sbin/blkid"
#: the marker check reads the whole backing on the host: skipped above this (it would evict the ARC)
MARKER_MAX_BYTES = 2 << 30


@dataclass(frozen=True)
class Layers:
    """A configuration's layers in the guest: a filesystem (or none) on LUKS2 (or not)."""

    fs: str = "none"
    luks: bool = False

    @classmethod
    def of(cls, params: Mapping[str, Any]) -> Layers:
        """The layers a test's params ask for (absent axes: none)."""
        return cls(fs=str(params.get("guest_fs", "none")), luks=bool(params.get("guest_luks", False)))

    @property
    def any(self) -> bool:
        """Something between fio and the disk."""
        return self.fs != "none" or self.luks

    def describe(self) -> str:
        """'xfs on LUKS2 (aes-xts-plain64)', 'ext4', 'LUKS2 (…)', 'none'."""
        luks = f"LUKS2 ({CIPHER})"
        if self.fs == "none":
            return luks if self.luks else "none"
        return f"{self.fs} on {luks}" if self.luks else self.fs


# -- plan time: pure ---------------------------------------------------------------------------------------


def accepts(params: Mapping[str, Any]) -> bool:
    """cp and rsync write a file: not without a filesystem in the guest (dd may write the device)."""
    return not (params.get("workload") in FILE_COPIES and Layers.of(params).fs == "none")


def name_parts(params: Mapping[str, Any], varying: set[str]) -> list[str]:
    """Test-name parts of the layer axes that vary: `ext4`, `xfs`, `nofs`; `luks`, `noluks`."""
    parts = []
    if "guest_fs" in varying and "guest_fs" in params:
        parts.append("nofs" if params["guest_fs"] == "none" else str(params["guest_fs"]))
    if "guest_luks" in varying and "guest_luks" in params:
        parts.append("luks" if params["guest_luks"] else "noluks")
    return parts


def round_up(n: int, step: int) -> int:
    """n rounded up to a multiple of step (pure)."""
    return -(-n // step) * step


def payload_bytes(test: Test) -> int:
    """What fio works on (the target's size); a copy test's destination must also hold the copy."""
    if test.is_copy:
        return max(test.target.size, parse_size(str(test.params["copy_size"])))
    return test.target.size


def job_files(test: Test, path: str) -> list[str]:
    """The files fio opens in the guest filesystem: with numjobs > 1 each job has its own (seed 003's 16 jobs
    of 256m, `stem.<job>.fiodata`, each `payload / numjobs` bytes), as on a file or dataset target on the host;
    without a filesystem (the disk or the dm-crypt device) the jobs share the region out (offset_increment)."""
    jobs = int(test.params.get("numjobs", 1))
    if jobs <= 1 or Layers.of(test.params).fs == "none" or test.is_copy or test.is_fill:
        return [path]
    stem = path[: -len(".fiodata")] if path.endswith(".fiodata") else path
    return [f"{stem}.{j}.fiodata" for j in range(jobs)]


def guest_job_text(test: Test, job: str, path: str) -> str:
    """The job text the guest runs: fio's file is the guest's (the disk, the dm-crypt device or the file in the
    guest filesystem); per-job files as `directory` + `filename_format` instead of one shared file (pure)."""
    files = job_files(test, path)
    if len(files) == 1:
        return re.sub(r"^filename=.*$", f"filename={path}", job, count=1, flags=re.M)
    stem = files[0][: -len(".0.fiodata")]
    own = f"directory={posixpath.dirname(stem)}\nfilename_format={posixpath.basename(stem)}.$jobnum.fiodata"
    job = re.sub(r"^offset_increment=.*\n", "", job, flags=re.M)
    return re.sub(r"^filename=.*$", lambda _: own, job, count=1, flags=re.M)


def fs_bytes(fs: str, payload: int) -> int:
    """The filesystem that holds a `payload`-byte file: its metadata on top, at least mkfs's minimum."""
    if fs == "none":
        return payload
    return max(payload + FS_OVERHEAD_FIXED + payload // FS_OVERHEAD_SHARE, FS_MIN[fs])


def disk_bytes(layers: Layers, payload: int, align: int = MIB) -> int:
    """The guest disk for a payload under these layers: filesystem, then the LUKS header; `align`ed
    (a zvol's volsize must be a multiple of its volblocksize)."""
    inner = fs_bytes(layers.fs, payload)
    return round_up(inner + (LUKS_HEADER if layers.luks else 0), max(align, MIB))


def volblock_align(test: Test) -> int:
    """The volblocksize a zvol backing is made with (0 if none is set: 1 MiB alignment covers the default)."""
    if test.params.get("backing", "zvol") != "zvol":
        return 0
    vbs = str(test.params.get("volblocksize", zfs_options(test.target).props.get("volblocksize", "default")))
    return 0 if vbs == "default" else parse_size(vbs)


#: the param a backing test carries (and no planned test): makes backing_test idempotent
DISK_PARAM = "guest_disk_bytes"


def backing_test(test: Test) -> Test:
    """The test as its backing sees it: the target's size is the disk's size (the payload plus the layers'
    overhead). The test itself when nothing is added, so plain configurations keep their datasets and names;
    idempotent (a backing test is its own backing test)."""
    payload = payload_bytes(test)
    layers = Layers.of(test.params)
    if DISK_PARAM in test.params or (not layers.any and payload == test.target.size):
        return test
    size = disk_bytes(layers, payload, volblock_align(test)) if layers.any else payload
    return replace(test, target=replace(test.target, size=size), params={**test.params, DISK_PARAM: size})


def dm_name(disk_id: str) -> str:
    """The dm-crypt mapping of a guest disk (/dev/mapper/<name>)."""
    return disk_id


def mount_point(disk_id: str) -> str:
    """Where the guest mounts the filesystem made on a disk."""
    return f"/mnt/{disk_id}"


def key_file(disk_id: str) -> str:
    """The LUKS key file: random bytes in the guest's tmpfs (never on a disk, never on the host)."""
    return f"/tmp/{disk_id}.key"


def data_path(layers: Layers, disk_id: str) -> str | None:
    """What fio opens in the guest: the file in the filesystem, the dm-crypt device, or None (the disk)."""
    if layers.fs != "none":
        return f"{mount_point(disk_id)}/{DATA_FILE}"
    if layers.luks:
        return f"/dev/mapper/{dm_name(disk_id)}"
    return None


def luks_format_argv(device: str, disk_id: str) -> list[str]:
    """cryptsetup luksFormat as tankbench runs it in the guest."""
    return [CRYPTSETUP, "luksFormat", *LUKS_FORMAT, "--key-file", key_file(disk_id), device]


def luks_open_argv(device: str, disk_id: str) -> list[str]:
    """cryptsetup open of the formatted disk as /dev/mapper/<disk id>."""
    return [CRYPTSETUP, "open", "--key-file", key_file(disk_id), device, dm_name(disk_id)]


def mkfs_argv(fs: str, device: str) -> list[str]:
    """mkfs.ext4 / mkfs.xfs on the (opened) device."""
    return [*MKFS[fs], device]


def layer_commands(layers: Layers, device: str, disk_id: str) -> list[tuple[str, list[str]]]:
    """The (step, argv) list that makes the layers on a guest device, in order (pure)."""
    steps: list[tuple[str, list[str]]] = []
    fs_dev = device
    if layers.luks:
        steps += [("luks_format", luks_format_argv(device, disk_id)), ("luks_open", luks_open_argv(device, disk_id))]
        fs_dev = f"/dev/mapper/{dm_name(disk_id)}"
    if layers.fs != "none":
        mp = mount_point(disk_id)
        steps += [("mkfs", mkfs_argv(layers.fs, fs_dev)), ("mount", ["mount", "-t", layers.fs, fs_dev, mp])]
    return steps


def setup_script(layers: Layers, device: str, disk_id: str) -> str:
    """The busybox shell script that makes the layers on `device` and prints the evidence: each step's guest
    time ("== step <name> <seconds>"), then blkid, /proc/mounts, cryptsetup status, the kernel's xts(aes)
    implementations and the sizes, each after a "== <section>" line (parse with `sections`)."""
    q = shlex.quote
    mp, key, dm = mount_point(disk_id), key_file(disk_id), dm_name(disk_id)
    lines = [
        'fail() { echo "== failed $1 rc=$2"; exit 1; }',
        "ln -sf /proc/mounts /etc/mtab",  # mke2fs checks whether the device is mounted through it
    ]
    if layers.luks:
        lines += [
            "mkdir -p /run/cryptsetup",
            "modprobe -a dm_crypt xts aesni_intel 2>/dev/null",  # aesni_intel fails without AES-NI: recorded below
            f"head -c {KEY_BYTES} /dev/urandom > {q(key)}",
        ]
    if layers.fs != "none":
        # crc32c_generic first: ext4 and xfs (through libcrc32c) need a crc32c implementation, and the kernel's
        # request for "crypto-crc32c" by alias finds nothing (busybox modprobe has no modules.alias)
        lines.append(f"mkdir -p {q(mp)}; modprobe -a crc32c_generic {layers.fs} 2>&1")
    for step, argv in layer_commands(layers, device, disk_id):
        # the guest's clock around each command; `read` is a shell builtin: no fork (a second each, nested)
        lines += [
            f"read -r a _ < /proc/uptime; {shlex.join(argv)} 2>&1 || fail {step} $?",
            f'read -r b _ < /proc/uptime; echo "== step {step} $a $b"',
        ]
    shown = [device] + ([f"/dev/mapper/{dm}"] if layers.luks else [])
    lines += [
        f"echo '== blkid'; {BLKID} {' '.join(q(d) for d in shown)}",
        f"echo '== mounts'; grep ' {mp} ' /proc/mounts",
        f"echo '== cryptsetup'; {CRYPTSETUP} status {q(dm)}" if layers.luks else ":",
        "echo '== crypto'; grep -A4 '^name *: xts(aes)$' /proc/crypto",
        f"echo '== sizes'; for d in {' '.join(q(d) for d in shown)}; do echo $d $(blockdev --getsize64 $d); done",
        f"echo '== statfs'; stat -f -c '%S %b %a' {q(mp)}" if layers.fs != "none" else ":",
        "echo '== end'",
    ]
    return "\n".join(lines) + "\n"


def teardown_script(layers: Layers, disk_id: str) -> str:
    """Unmount and close the layers of a disk before it is unplugged (and its key file is deleted)."""
    lines = []
    if layers.fs != "none":
        lines.append(f"umount {shlex.quote(mount_point(disk_id))}")
    if layers.luks:
        lines += [f"{CRYPTSETUP} close {shlex.quote(dm_name(disk_id))}", f"rm -f {shlex.quote(key_file(disk_id))}"]
    return "\n".join(lines) + "\n"


def layout_script(path: str, payload: int) -> str:
    """Fill the file or device with random data through the layers, durably (a new zvol or image reads
    zeros without any I/O, and a sparse file in the guest would be no better)."""
    return f"dd if=/dev/urandom of={shlex.quote(path)} bs=1M count={round_up(payload, MIB) // MIB} conv=fsync 2>&1\n"


def marker_script(path: str, marker: str) -> str:
    """Write `marker` at the start of the file or device, durably, without truncating it."""
    return f"printf %s {shlex.quote(marker)} | dd of={shlex.quote(path)} conv=notrunc,fsync 2>&1\n"


def new_marker() -> str:
    """A string no disk holds by chance: written in the guest, looked for in the backing on the host."""
    return f"TANKBENCH-MARKER-{secrets.token_hex(12)}"


def sections(text: str) -> dict[str, str]:
    """The "== <name>" sections of a setup script's output -> {name: text}; step lines -> "step <name>" (pure)."""
    out: dict[str, str] = {}
    name = ""
    for line in text.splitlines():
        if line.startswith("== "):
            words = line[3:].split()
            if words and words[0] in ("step", "failed"):
                out[f"{words[0]} {words[1]}" if len(words) > 1 else words[0]] = " ".join(words[2:])
                continue
            name = words[0] if words else ""
            out.setdefault(name, "")
            continue
        if name:
            out[name] += line + "\n"
    return out


def parse_blkid(text: str) -> dict[str, dict[str, str]]:
    """blkid lines (`/dev/sda: UUID="…" TYPE="crypto_LUKS"`) -> {device: {UUID: …, TYPE: …}} (pure)."""
    out: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        dev, sep, rest = line.partition(":")
        if sep:
            out[dev.strip()] = dict(re.findall(r'(\w+)="([^"]*)"', rest))
    return out


def parse_colon_table(text: str) -> dict[str, str]:
    """`key: value` lines (cryptsetup status, /proc/crypto) -> {key: value}, keys stripped (pure)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def parse_crypto(text: str) -> list[dict[str, str]]:
    """`grep -A4 'name : xts(aes)' /proc/crypto` -> one dict per implementation, highest priority first (pure).

    The crypto API gives dm-crypt the highest-priority implementation: xts-aes-aesni (or a VAES variant) with
    AES-NI, the generic C code (xts(ecb(aes-generic))) without it (seed 001's biggest factor)."""
    blocks: list[dict[str, str]] = []
    for chunk in re.split(r"^--$|^(?=name\s*:)", text, flags=re.M):
        table = parse_colon_table(chunk)
        if table.get("name"):
            blocks.append(table)
    return sorted(blocks, key=lambda b: -int(b.get("priority", "0") or 0))


def parse_mounts(text: str) -> list[dict[str, str]]:
    """/proc/mounts lines -> [{device, mountpoint, fstype, options}] (pure)."""
    out = []
    for line in text.splitlines():
        p = line.split()
        if len(p) >= 4:
            out.append({"device": p[0], "mountpoint": p[1], "fstype": p[2], "options": p[3]})
    return out


def evidence(layers: Layers, device: str, disk_id: str, text: str) -> dict[str, Any]:
    """The checks a configuration's runs carry about its layers, from the setup script's output (pure):
    what blkid, /proc/mounts and cryptsetup say, which xts(aes) the kernel uses, sizes, step times."""
    sec = sections(text)
    blkid = parse_blkid(sec.get("blkid", ""))
    checks: dict[str, Any] = {
        "layers": layers.describe(),
        "layers.fs": layers.fs,
        "layers.luks": layers.luks,
        "layers.guest_device": device,
        "layers.blkid": blkid,
        "layers.seconds": {
            k.split(" ", 1)[1]: round(float(v.split()[1]) - float(v.split()[0]), 2)
            for k, v in sec.items()
            if k.startswith("step ") and len(v.split()) == 2
        },
    }
    sizes = {p[0]: int(p[1]) for p in (line.split() for line in sec.get("sizes", "").splitlines()) if len(p) == 2}
    checks["layers.disk_bytes"] = sizes.get(device)
    if layers.fs != "none":
        mounts = [m for m in parse_mounts(sec.get("mounts", "")) if m["mountpoint"] == mount_point(disk_id)]
        checks["layers.mount"] = mounts[0] if mounts else None
        stat = sec.get("statfs", "").split()
        if len(stat) == 3:
            checks["layers.fs_block_bytes"] = int(stat[0])
            checks["layers.fs_bytes"] = int(stat[0]) * int(stat[1])
            checks["layers.fs_free_bytes"] = int(stat[0]) * int(stat[2])
    if layers.luks:
        status = parse_colon_table(sec.get("cryptsetup", ""))
        crypto = parse_crypto(sec.get("crypto", ""))
        checks.update(
            {
                "layers.luks.status": status,
                "layers.luks.cipher": status.get("cipher"),
                "layers.luks.key_bits": int(status.get("keysize", "0 bits").split()[0] or 0),
                "layers.luks.sector_bytes": int(status.get("sector size", "0").split()[0] or 0),
                "layers.luks.format": shlex.join(luks_format_argv(device, disk_id)),
                "layers.luks.pbkdf": "pbkdf2, 1000 iterations (sha256)",
                "layers.luks.crypto_driver": crypto[0].get("driver") if crypto else None,
                "layers.luks.crypto_impls": [f"{c.get('driver')} ({c.get('priority')})" for c in crypto],
                "layers.luks.device_bytes": sizes.get(f"/dev/mapper/{dm_name(disk_id)}"),
            }
        )
    return checks


def layers_verified(layers: Layers, checks: Mapping[str, Any], device: str, disk_id: str) -> list[str]:
    """What is wrong with the layers the guest reported (empty: they are as asked) (pure)."""
    wrong = []
    blkid: Mapping[str, Mapping[str, str]] = checks.get("layers.blkid", {})
    fs_dev = f"/dev/mapper/{dm_name(disk_id)}" if layers.luks else device
    if layers.luks and blkid.get(device, {}).get("TYPE") != "crypto_LUKS":
        wrong.append(f"blkid does not see LUKS on {device}: {dict(blkid.get(device, {}))}")
    if layers.luks and checks.get("layers.luks.cipher") != CIPHER:
        wrong.append(f"cryptsetup status shows cipher {checks.get('layers.luks.cipher')!r}, not {CIPHER}")
    if layers.fs != "none":
        if blkid.get(fs_dev, {}).get("TYPE") != layers.fs:
            wrong.append(f"blkid does not see {layers.fs} on {fs_dev}: {dict(blkid.get(fs_dev, {}))}")
        mount = checks.get("layers.mount") or {}
        if mount.get("fstype") != layers.fs or mount.get("device") != fs_dev:
            wrong.append(f"{mount_point(disk_id)} is not {fs_dev} mounted as {layers.fs}: {mount}")
    return wrong


def script_comment_lines(test: Test, device: str, disk_id: str) -> list[str]:
    """`plan --export` comment lines: the layers the job runs on, made in the guest as `run` makes them."""
    layers = Layers.of(test.params)
    if not layers.any:
        return []
    disk = backing_test(test).target.size
    lines = [
        f"# In the guest, on that disk ({fmt_size(disk)}: {fmt_size(payload_bytes(test))} of data + the layers' "
        f"overhead): {layers.describe()}, made once per configuration:"
    ]
    if layers.luks:
        lines.append(f"#   head -c {KEY_BYTES} /dev/urandom > {key_file(disk_id)}   (tmpfs)")
    lines += [f"#   {shlex.join(argv)}" for _, argv in layer_commands(layers, device, disk_id)]
    path = data_path(layers, disk_id)
    if test.is_copy:
        return lines
    if layers.fs != "none":
        lines.append(f"#   fill {path} with {fmt_size(payload_bytes(test))} of random data (dd conv=fsync)")
    lines.append(f"# fio's filename in the guest: {path}")
    return lines
