"""What each disk can do (issue 32): a short read-only fio probe per disk — random 4k reads at QD1 and at QD32,
sequential 1M reads at QD4 — measured once per disk and fingerprint and kept in the fingerprint
(`device_capability`, by the disk's stable id). The probe only reads (fio --readonly, O_DIRECT): it is safe on a
disk that holds data, a pool's vdev included. The limiter compares each disk's figures during a run with these.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tankbench.errors import HostError
from tankbench.hosts.base import Host

MIB = 1 << 20
#: (key, rw, bs, ioengine, iodepth): the three probes, each over every disk at once (one fio job per disk)
PROBES = (
    ("read_iops_qd1", "randread", 4096, "psync", 1),
    ("read_iops_deep", "randread", 4096, "libaio", 32),
    ("read_mibs_seq", "read", MIB, "libaio", 4),
)
#: seconds each probe runs (after a 0.5 s ramp)
PROBE_S = 2.0
#: listing of the host's stable disk names: "<kernel name> <by-id path>" per line
_IDS = 'for l in /dev/disk/by-id/*; do [ -e "$l" ] && echo "$(basename "$(readlink -f "$l")") $l"; done'


def disk_ids(host: Host, names: Iterable[str]) -> dict[str, str]:
    """{kernel name: its stable path /dev/disk/by-id/… (shortest, not a partition)}; a disk without one: its
    kernel name (the agent's disk_ids, asked from here)."""
    wanted = set(names)
    res = host.run(["sh", "-c", _IDS], timeout=60)
    found: dict[str, str] = {}
    for line in sorted(res.stdout.splitlines(), key=len):
        parts = line.split()
        if len(parts) == 2 and parts[0] in wanted and "-part" not in parts[1]:
            found.setdefault(parts[0], parts[1])
    return {n: found.get(n, n) for n in wanted}


def disk_of(name: str, disk_id: str) -> str:
    """The `disk` an entry names: the stable path, else /dev/<kernel name>."""
    return disk_id if disk_id.startswith("/") else f"/dev/{name}"


def probe_job(names: Sequence[str], rw: str, bs: int, engine: str, depth: int, seconds: float = PROBE_S) -> str:
    """One fio job file: a job per disk (/dev/<name>), reading only."""
    head = (  # fio --readonly (a command-line option) refuses any write the job would do
        f"[global]\ndirect=1\nrw={rw}\nbs={bs}\nioengine={engine}\niodepth={depth}\n"
        f"time_based=1\nruntime={seconds}s\nramp_time=0.5s\nrandrepeat=0\nnorandommap=1\n"
    )
    return head + "".join(f"\n[{n}]\nfilename=/dev/{n}\n" for n in names)


def _results(text: str) -> dict[str, tuple[float, float] | str]:
    """{job (disk) name: (read IOPS, read MiB/s)} of fio's JSON output; a job fio reports an error for (13: the
    user may not open the disk) maps to why, not to figures: its zeros are not what the disk can do."""
    doc = json.loads(text[text.index("{") :])
    out: dict[str, tuple[float, float] | str] = {}
    for j in doc.get("jobs", []):
        err = int(j.get("error") or 0)
        if err:
            out[str(j["jobname"])] = f"fio reported error {err} ({os.strerror(err).lower()})"
        else:
            out[str(j["jobname"])] = (float(j["read"]["iops"]), float(j["read"]["bw_bytes"]) / MIB)
    return out


def measure(host: Host, names: Sequence[str], seconds: float = PROBE_S) -> dict[str, dict[str, Any]]:
    """{kernel name: {read_iops_qd1, read_iops_deep, read_mibs_seq, how}} measured on the host now; a disk fio
    could not read gets {"error": why} instead (not root, no such device, missing from fio's output)."""
    out: dict[str, dict[str, Any]] = {n: {"how": f"fio --readonly probe, {seconds:g} s each"} for n in names}
    for key, rw, bs, engine, depth in PROBES:
        job = probe_job(names, rw, bs, engine, depth, seconds)
        res = host.run(
            [
                "sh",
                "-c",
                'f=$(mktemp) && cat > "$f" && fio --readonly --output-format=json "$f"; rc=$?; rm -f "$f"; exit $rc',
            ],
            input=job.encode(),
            timeout=120 + 2 * seconds,
        )
        try:
            figures = _results(res.stdout)
        except (ValueError, KeyError, TypeError):
            why = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["fio failed"]
            return {n: {"error": f"the read-only probe failed: {why[0][:200]}"} for n in names}
        for n in names:
            got = figures.get(n, "fio's output has no job for it")
            if "error" in out[n]:
                continue
            if isinstance(got, str):
                out[n] = {"error": f"the read-only probe of /dev/{n} failed: {got}"}
            else:
                out[n][key] = round(got[1] if key.endswith("_seq") else got[0], 1)
    return out


def reuse(earlier: Iterable[Mapping[str, Any]], comparable: Mapping[str, Any], disks: Iterable[str]) -> dict[str, Any]:
    """{disk: capability} an earlier fingerprint with the same comparable facts (kernel, CPU, disk models, …)
    already holds for these disks (measure once per disk and fingerprint)."""
    want, out = set(disks), {}
    for fp in earlier:
        caps = fp.get("device_capability")
        if all(fp.get(k) == v for k, v in comparable.items()) and isinstance(caps, list):
            out.update(
                {c["disk"]: c for c in caps if isinstance(c, Mapping) and c.get("disk") in want and "error" not in c}
            )
    return out


def capabilities(
    host: Host, names: Sequence[str], known: Mapping[str, Any], seconds: float = PROBE_S
) -> list[dict[str, Any]]:
    """The `device_capability` entries of the given kernel disk names ({disk, name, read_iops_qd1, …, how}): from
    `known` (by disk) where it holds one, the rest measured now (a probe fio refuses is recorded as an error;
    HostError from the host propagates). A list naming each disk in a value, which `bundle --anonymise` rewrites."""
    ids = disk_ids(host, names)
    disks = {n: disk_of(n, ids[n]) for n in names}
    out = [dict(known[disks[n]], name=n) for n in names if disks[n] in known]
    todo = [n for n in names if disks[n] not in known]
    if todo:
        out += [{"disk": disks[n], "name": n, **c} for n, c in measure(host, todo, seconds).items()]
    return sorted(out, key=lambda c: str(c["disk"]))


def cache_path() -> Path:
    """This machine's capabilities, by host and fingerprint: ${XDG_CACHE_HOME:-~/.cache}/tankbench/capability.json."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tankbench" / "capability.json"


def cache_key(host: Host, comparable: Mapping[str, Any]) -> str:
    """A host's disks measured under one set of comparable facts (kernel, CPU, disk models, …)."""
    text = json.dumps([host.name, dict(comparable)], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def cached(key: str) -> dict[str, Any]:
    """{disk: capability} this machine measured before under `key` ({} when none, or the cache is unreadable)."""
    try:
        doc = json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return {}
    entries = doc.get(key, []) if isinstance(doc, dict) else []
    return {str(c["disk"]): c for c in entries if isinstance(c, dict) and "disk" in c and "error" not in c}


def remember(key: str, caps: Sequence[Mapping[str, Any]]) -> None:
    """Keep what was measured for the next campaign on this host and fingerprint, whatever journal it writes (a
    cache: a write that fails only costs a probe next time)."""
    path = cache_path()
    try:
        doc = json.loads(path.read_text()) if path.exists() else {}
        doc = doc if isinstance(doc, dict) else {}
        doc[key] = [dict(c) for c in caps if "error" not in c]
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc, sort_keys=True))
        os.replace(tmp, path)
    except (OSError, ValueError):
        pass


def for_campaign(
    host: Host,
    names: Sequence[str],
    earlier: Iterable[Mapping[str, Any]],
    comparable: Mapping[str, Any],
    note: Callable[[str], None],
) -> list[dict[str, Any]]:
    """The `device_capability` of a campaign's fingerprint: each disk's figures from an earlier fingerprint of the
    journal with the same comparable facts, or measured on this machine before for the same host and facts, the
    rest probed now (read-only). A host error during the probe is a note, not a failure: the runs then go without
    capabilities."""
    if not names:
        return []
    try:
        ids = disk_ids(host, names)
        disks = [disk_of(n, ids[n]) for n in names]
        key = cache_key(host, comparable)
        known = {**{d: c for d, c in cached(key).items() if d in disks}, **reuse(earlier, comparable, disks)}
        todo = [n for n, d in zip(names, disks, strict=True) if d not in known]
        if todo:
            note(f"what each disk can do: a read-only fio probe of {', '.join(todo)} ({len(PROBES)} × {PROBE_S:g} s)")
        caps = capabilities(host, names, known)
        if todo:
            remember(key, caps)
        return caps
    except HostError as e:
        note(f"warning: the disks' capability probe failed ({e}); the limiter goes by how busy they were")
        return []
