"""What doctor reads on a host: one read-only shell script, its output cut into named sections.

Every command only reads (zpool/zfs get, list and status, /proc, /sys, lsblk, blkid -p on zvols, virsh dumpxml,
Proxmox VM configs, the names and first 4 bytes of VM disk images on datasets with large records); one ssh round
trip. Missing tools are skipped: their section is absent or says why."""

from __future__ import annotations

import re

from tankbench.hosts.base import Host

ZFS_PROPS = (
    "type,atime,relatime,compression,sync,logbias,recordsize,volblocksize,encryption,primarycache,dedup,checksum"
)
#: datasets with records larger than this are searched for VM disk images (a few levels deep, first 20 each)
VM_IMAGE_RECORDSIZE = 128 * 1024

SCRIPT = r"""
section() { echo "==> $1 <=="; }
PATH=$PATH:/usr/sbin:/sbin
section zfs-version; cat /sys/module/zfs/version 2>&1
section zpool-status; zpool status -P 2>&1
for p in $(zpool list -H -o name 2>/dev/null); do
  section "zpool-vdevs $p"; zpool get -Hp -o name,property,value ashift "$p" all-vdevs 2>&1
done
section zpool-list; zpool list -Hp -o name,size,allocated,free,capacity,fragmentation 2>&1
section vm-images
zfs list -Hp -o name,recordsize,mounted,mountpoint -t filesystem 2>/dev/null | while IFS="$(printf '\t')" read -r n r m p; do
  [ "$m" = yes ] && [ "$r" -gt @VMRS@ ] 2>/dev/null || continue
  find "$p" -xdev -maxdepth 3 -type f -size +100k \( -name '*.qcow2' -o -name '*.raw' -o -name '*.img' -o -name '*.vmdk' \
    -o -name '*.vdi' \) 2>/dev/null | head -n 20 | while IFS= read -r f; do
    printf '%s\t%s\t%s\t%s\n' "$n" "$r" "$(head -c 4 "$f" | od -An -tx1 | tr -d ' \n')" "$f"
  done
done
section zfs-get; zfs get -Hp -o name,property,value,source -t filesystem,volume @PROPS@ 2>&1
section lsblk; lsblk -J -b -o NAME,KNAME,PATH,TYPE,PHY-SEC,LOG-SEC,ROTA,MODEL,FSTYPE,PKNAME 2>&1
section by-id; for l in /dev/disk/by-id/*; do [ -L "$l" ] && echo "$l $(readlink -f "$l")"; done
section zvols; for l in $(find /dev/zvol -type l 2>/dev/null); do echo "$l $(readlink -f "$l")"; done
section blkid-zvols; for d in /dev/zd*; do [ -b "$d" ] && blkid -p -o export "$d" && echo; done 2>/dev/null
section params; grep -H . /sys/module/zfs/parameters/* 2>/dev/null
section arcstats; cat /proc/spl/kstat/zfs/arcstats 2>&1
section meminfo; cat /proc/meminfo
section cpu-flags; grep -m1 '^flags' /proc/cpuinfo
section swaps; cat /proc/swaps
if command -v virsh >/dev/null 2>&1; then
  for d in $(virsh list --all --name 2>/dev/null); do section "libvirt $d"; virsh dumpxml "$d" 2>&1; done
fi
[ -f /etc/pve/storage.cfg ] && { section pve-storage; cat /etc/pve/storage.cfg; }
for f in /etc/pve/qemu-server/*.conf; do [ -f "$f" ] && { section "proxmox $f"; cat "$f" 2>&1; }; done
true
""".replace("@PROPS@", ZFS_PROPS).replace("@VMRS@", str(VM_IMAGE_RECORDSIZE))

_HEAD = re.compile(r"^==> (.+) <==$")


def split_sections(text: str) -> dict[str, str]:
    """Section name -> its text, from the script's output (pure)."""
    out: dict[str, str] = {}
    name = ""
    lines: list[str] = []
    for line in text.splitlines():
        m = _HEAD.match(line)
        if m:
            if name:
                out[name] = "\n".join(lines) + "\n"
            name, lines = m.group(1), []
        else:
            lines.append(line)
    if name:
        out[name] = "\n".join(lines) + "\n"
    return out


def collect(host: Host) -> str:
    """Run the read-only script on `host` and return its raw output."""
    return host.run(["sh", "-c", SCRIPT], timeout=300, check=True).stdout
