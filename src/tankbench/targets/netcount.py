"""Network counters around a run (/proc/net/dev before and after, on the server and on each client) and the
judgement of what limited a network-share run: the network, the server's CPU, or the disks (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tankbench.units import pct

#: /proc/net/dev columns tankbench keeps: (name, index among the 16 numbers after "iface:")
COLUMNS = (("rx_bytes", 0), ("rx_packets", 1), ("tx_bytes", 8), ("tx_packets", 9))
#: a share of the link (or of the CPUs) at or above which that part is called the limit
BUSY = 0.85
MIB = 1 << 20


def parse_net_dev(text: str) -> dict[str, dict[str, int]]:
    """{interface: {rx_bytes, rx_packets, tx_bytes, tx_packets}} of /proc/net/dev's text (loopback left out:
    NFS between hosts does not cross it)."""
    out: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        fields = rest.split()
        if not sep or len(fields) < 16 or not all(f.isdigit() for f in fields[:16]):
            continue
        iface = name.strip()
        if iface == "lo":
            continue
        out[iface] = {col: int(fields[i]) for col, i in COLUMNS}
    return out


def delta(before: str, after: str) -> dict[str, dict[str, int]]:
    """Per interface, what each counter grew by between two /proc/net/dev texts (interfaces in both only; a
    counter that went down, a reset interface, counts from zero)."""
    b, a = parse_net_dev(before), parse_net_dev(after)
    out: dict[str, dict[str, int]] = {}
    for iface in sorted(set(a) & set(b)):
        out[iface] = {k: v - b[iface][k] if v >= b[iface][k] else v for k, v in a[iface].items()}
    return out


def busiest(counts: Mapping[str, Mapping[str, int]]) -> tuple[str, int]:
    """(interface, bytes received + sent) of the interface that moved the most; ("", 0) with none."""
    best = ("", 0)
    for iface, c in counts.items():
        moved = int(c.get("rx_bytes", 0)) + int(c.get("tx_bytes", 0))
        if moved > best[1]:
            best = (iface, moved)
    return best


def link_speed(text: str) -> int:
    """Mb/s from /sys/class/net/<if>/speed; 0 when the link does not say (virtual NICs say -1 or nothing)."""
    text = text.strip()
    return int(text) if text.isdigit() and int(text) > 0 else 0


_UNITS = {"bit": 1e-6, "kbit": 1e-3, "mbit": 1.0, "gbit": 1e3, "tbit": 1e6}


def shaped_rate(text: str, iface: str) -> int:
    """Mb/s an interface's root qdisc shapes its egress to (tbf/htb `rate`, from `tc qdisc show`), 0 when it is
    not shaped: a shaped link's limit is its rate, whatever speed the NIC states."""
    for line in text.splitlines():
        words = line.split()
        if (
            "dev" not in words
            or "root" not in words
            or words[words.index("dev") + 1 : words.index("dev") + 2] != [iface]
        ):
            continue
        if "rate" in words[:-1]:
            value = words[words.index("rate") + 1].lower()
            for unit, f in sorted(_UNITS.items(), key=lambda u: -len(u[0])):
                num = value[: -len(unit)]
                if value.endswith(unit) and num.replace(".", "", 1).isdigit():
                    return max(1, round(float(num) * f))
    return 0


def judge(
    *,
    seconds: float,
    server: Mapping[str, Mapping[str, int]],
    speed_mbps: int,
    client_mibs: float,
    cpu_pct: float | None,
) -> dict[str, Any]:
    """What limited the run: `network` (the server's busiest interface moved >= 85 % of its link's speed in one
    direction), `cpu` (the server's CPUs >= 85 % busy), else `disks` (neither network nor CPU was near its
    limit: the pool and ZFS were what the clients waited for). With the link's speed unknown the network
    cannot be ruled out: `unknown`, with the figures. Returns the checks `net.limit`, `net.why` and the figures."""
    iface, _ = busiest(server)
    c = server.get(iface, {})
    rx = c.get("rx_bytes", 0) / seconds if seconds > 0 else 0.0
    tx = c.get("tx_bytes", 0) / seconds if seconds > 0 else 0.0
    link = speed_mbps * 1e6 / 8
    busy = max(rx, tx) / link if link else None
    cpu_share = (cpu_pct / 100.0) if cpu_pct is not None else None
    out: dict[str, Any] = {
        "net.server_interface": iface,
        "net.server_rx_mibs": round(rx / MIB, 3),
        "net.server_tx_mibs": round(tx / MIB, 3),
        "net.link_mbps": speed_mbps,
        "net.client_mibs": round(client_mibs, 3),
    }
    if busy is not None:
        out["net.link_busy_pct"] = round(100 * busy, 1)
    figures = f"{iface or 'no interface'} moved {max(rx, tx) / MIB:.1f} MiB/s one way over {seconds:.1f} s of I/O"
    if busy is not None and busy >= BUSY:
        out["net.limit"] = "network"
        out["net.why"] = f"{figures}: {100 * busy:.0f} % of its {speed_mbps} Mb/s link"
    elif cpu_share is not None and cpu_share >= BUSY:
        out["net.limit"] = "cpu"
        out["net.why"] = f"the server's CPUs were {cpu_pct:.0f} % busy; {figures}"
    elif busy is None:
        out["net.limit"] = "unknown"
        out["net.why"] = (
            f"{figures}; the link's speed is unknown (a virtual NIC), so the network cannot be ruled out; "
            f"server CPU {'?' if cpu_pct is None else f'{cpu_pct:.0f} %'}"
        )
    else:
        out["net.limit"] = "disks"
        out["net.why"] = (
            f"{figures} ({pct(busy, BUSY)} of {speed_mbps} Mb/s) and the server's CPUs "
            f"{'?' if cpu_pct is None else f'{cpu_pct:.0f} %'} busy: neither near its limit, so the pool was"
        )
    return out
