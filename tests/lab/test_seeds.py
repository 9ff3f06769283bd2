"""Each seed's finding reproduced in the lab, from the seed's own preset at its `ci` scale, on modelled disks
(diskmodels.py): one lab for the module with the disks the seeds need (3 data disks, a log and a cache
disk); each campaign applies its preset's disk models and ARC size over QMP at its start (no reboot).
The seed-vs-lab table is docs/seeds-in-the-lab.md."""

from __future__ import annotations

import json
import re
import sqlite3
import statistics
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tankbench.diskmodels import LabMachine
from tankbench.hosts.lab import LabHost
from tankbench.lab import control, vm
from tankbench.units import parse_size
from tests.conftest import tankbench
from tests.lab.conftest import LAB

PRESETS = Path(__file__).resolve().parents[2] / "src" / "tankbench" / "presets"
#: the seeds' lab, beside the session's (names are at most 32 characters)
SEEDS_LAB = f"{LAB[:26]}-seeds"
SHAPE = {"kind": "lab", "name": SEEDS_LAB, "disks": 3, "slog": True, "l2arc": True}


@pytest.fixture(scope="module")
def seeds_lab() -> Iterator[LabHost]:
    host = control.lab_host(SEEDS_LAB, disks=3, slog=True, machine=LabMachine(l2arc=True))
    try:
        yield host
    finally:
        host.close()
        if vm.read_state(SEEDS_LAB) is not None:
            vm.down(SEEDS_LAB)


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    return json.dumps(v)


def in_seeds_lab(preset: str) -> str:
    """The preset's text with its [host] table pointed at the seeds' lab (its models and ARC kept)."""
    text = (PRESETS / f"{preset}.toml").read_text()
    host = {**tomllib.loads(text).get("host", {}), **SHAPE}
    table = "[host]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in host.items()) + "\n"
    lines = text.splitlines(keepends=True)
    if "[host]\n" in lines:
        start = lines.index("[host]\n")
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[")), len(lines))
        return "".join(lines[:start]) + table + "".join(lines[end:])
    return table + text


def check_preset(preset: str, tmp_path: Path, extra: str = "", max_runs: int | None = None) -> dict[str, Any]:
    """`tankbench check` on the preset's ci form in the seeds' lab (its claims, plus `extra` claims: inline tables):
    only the tests that decide the claims, repeated until decided; the JSON it prints, and the claims by name."""
    campaign = tmp_path / f"{preset}.toml"
    text = in_seeds_lab(preset)
    if extra:  # into the ci scale's claims (a scale's array replaces the file's: [[claim]]s appended would vanish)
        at = text.index("claim = [\n", text.index("[scale.ci]")) + len("claim = [\n")
        text = text[:at] + extra + text[at:]
    campaign.write_text(text)
    args = ["check", str(campaign), "--scale", "ci", "--journal", str(tmp_path / "j.sqlite"), "--json", "--keep-lab"]
    res = tankbench(*args, *(("--max", str(max_runs)) if max_runs else ()), cwd=tmp_path, timeout=1800)
    if not res.stdout.startswith("{"):  # the next seed's pool needs the disks, whatever happened here
        tankbench("clean", str(campaign), "--scale", "ci", cwd=tmp_path, timeout=600)
    assert res.returncode in (0, 1) and res.stdout.startswith("{"), res.stdout[-3000:] + res.stderr[-3000:]
    doc: dict[str, Any] = json.loads(res.stdout)
    doc["by_name"] = {c["name"]: c for c in doc["claims"]}
    doc["_campaign"], doc["_cwd"] = str(campaign), str(tmp_path)
    print(
        f"{preset} check: {doc['runs_this_check']} run(s) for {doc['tests']} test(s), the campaign's own "
        f"schedule: {doc['fixed_runs']}"
    )
    for c in doc["claims"]:
        print(f"  {c['name']}: {c['verdict']} {c['ratio']} [{c['low']}-{c['high']}] ({c['runs']} runs) {c['needs']}")
    return doc


def holds(doc: dict[str, Any], *names: str) -> None:
    """Each named claim holds on the lab (the claims are the preset's: the seed's finding, in its words)."""
    for name in names:
        c = doc["by_name"][name]
        if c["verdict"] != "holds":  # the campaign's pool goes, so the next seed's campaign has the disks
            tankbench("clean", doc["_campaign"], "--scale", "ci", cwd=doc["_cwd"], timeout=600)
        assert c["verdict"] == "holds", c


def run_preset(preset: str, tmp_path: Path) -> list[dict[str, object]]:
    """The preset's ci form run to the end in the journal `check` started (its runs count; the rest are added)."""
    campaign = tmp_path / f"{preset}.toml"
    if not campaign.exists():
        campaign.write_text(in_seeds_lab(preset))
    journal = tmp_path / "j.sqlite"
    res = tankbench("run", str(campaign), "--scale", "ci", "--journal", str(journal), cwd=tmp_path, timeout=1800)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    cleaned = tankbench("clean", str(campaign), "--scale", "ci", cwd=tmp_path, timeout=600)
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr  # the next seed's pool needs the disks
    conn = sqlite3.connect(journal)
    try:
        rows = conn.execute(
            "SELECT t.canonical, r.metrics, r.run_no, f.data, r.drain_s, r.checks FROM runs r JOIN tests t ON t.id = r.test_id "
            "JOIN fingerprints f ON f.id = r.fingerprint_id WHERE r.warmup = 0 AND r.status = 'done' ORDER BY r.id"
        ).fetchall()
    finally:
        conn.close()
    out = [
        {
            "params": json.loads(c)["params"],
            "target": json.loads(c)["target"]["name"],
            "metrics": json.loads(m),
            "run_no": n,
            "fingerprint": json.loads(f),
            "drain_s": d,
            "checks": json.loads(ch),
        }
        for c, m, n, f, d, ch in rows
    ]
    assert_runs_as_asked(out)
    return out


def assert_runs_as_asked(rows: list[dict[str, Any]]) -> None:
    """What every run of a preset must have recorded (the checks test_presets once made on each preset's quick
    form, which duplicated these ci forms' runs): the ZFS properties and the layout the test asked for, verified;
    data moved; a sparse file for an unwritten layout; the cache state, record size and tunables as asked."""
    assert rows
    for r in rows:
        checks, params = r["checks"], r["params"]
        where = (params, checks)
        assert checks["zfs.props_match"] is True and checks["layout.verified"] is True, where
        assert float(r["metrics"]["total.io_bytes"]) > 0, where
        assert checks["layout.mode"] == params.get("layout", "random"), where
        if params.get("layout") == "unwritten":
            assert checks["layout.sparse"] is True and checks["layout.data_bytes"] == 0, where
        if params.get("cache") == "warm":
            assert checks["cache.state"] == "warm", where
        if params.get("recordsize", "default") != "default":
            assert int(checks["zfs.props"]["recordsize"]) == parse_size(str(params["recordsize"])), where
        if "tunables" in params:
            assert checks["tunables.verified"] is True, where


def limits(rows: list[dict[str, object]], target: str = "", **params: object) -> list[tuple[str, str, str]]:
    """(limit.kind, limit.detail, limit.evidence) of each run whose params (and target) match, in run order."""
    out = []
    for r in rows:
        p, c = r["params"], r["checks"]
        assert isinstance(p, dict) and isinstance(c, dict)
        if all(p.get(k) == v for k, v in params.items()) and target in ("", r["target"]):
            out.append((str(c.get("limit.kind")), str(c.get("limit.detail", "")), str(c.get("limit.evidence", ""))))
    assert out, params
    return out


#: a queue-depth-1 read has one request in flight: it waits for the model's slot, then for the emulated I/O path's own
#: round trip, and any pause of the emulated guest (TCG, beside the other worker's lab on a 2-core machine) is time in
#: which no request waits at the throttle, lost for good. The deep (32) and sequential (QD4) probes keep requests
#: queued in qemu through such a pause. CI, loaded: the optane model at 825 qd1 IOPS of its 1,000 (deep 1,034), and
#: an hdd model at 31.3 of its 40 (deep 41.8, seq 16.8 MiB/s of 16, the same probe). So the deep and sequential
#: figures are held to the model's tolerance and qd1 only to these bounds: not well above the model, nor a small part of it
QD1_BOUNDS = (0.6, 1.15)


def capability_agrees(fp: dict[str, object]) -> dict[str, float]:
    """Each modelled disk's probed capability against its model (issue 32: within bench/disk-models' 15 %):
    {drive: worst measured/modelled ratio of the deep and sequential figures}. The qd1 figure is asserted here within
    QD1_BOUNDS and left out of the ratio: a pause of the emulated guest is part of it."""
    from tankbench.diskmodels import MIB, MODELS

    caps, models = fp["device_capability"], fp["lab_disk_models"]
    assert isinstance(caps, list) and isinstance(models, dict)
    out = {}
    for drive, spec in models.items():
        model = MODELS[str(spec).split(":", 1)[0]]
        cap = next((c for c in caps if c.get("disk") == f"/dev/disk/by-id/virtio-{drive}"), None)
        if model.name == "none" or cap is None:
            continue
        iops = model.rate(4096)[0]
        low, high = QD1_BOUNDS
        assert low <= cap["read_iops_qd1"] / iops <= high, (drive, spec, cap)
        ratios = [cap["read_iops_deep"] / iops, cap["read_mibs_seq"] / model.rate(MIB)[1]]
        out[drive] = max(ratios, key=lambda x: abs(x - 1))
    return out


def mibs(rows: list[dict[str, object]], **params: str) -> list[float]:
    out = []
    for r in rows:
        p = r["params"]
        assert isinstance(p, dict)
        if all(p.get(k) == v for k, v in params.items()):
            m = r["metrics"]
            assert isinstance(m, dict)
            out.append(float(m["read.bw_bytes"]) / 2**20)
    assert out, params
    return out


UNWRITTEN_FASTER = (
    "Performance was substantially better on files that had not been written to as opposed to those that had been "
    "written to"
)


def test_seed_002_compression_cache(seeds_lab: LabHost, tmp_path: Path) -> None:
    doc = check_preset("compression-cache", tmp_path)
    rows = run_preset("compression-cache", tmp_path)
    fp = rows[0]["fingerprint"]
    assert isinstance(fp, dict)
    assert fp["lab_disk_models"]["tbdata0"].startswith("hdd:") and fp["lab_arc_max"] == 128 << 20
    written = "compressible:50%"
    rand_unwritten = statistics.median(mibs(rows, rw="randread", layout="unwritten"))
    rand_written = statistics.median(mibs(rows, rw="randread", layout=written))
    seq_unwritten = statistics.median(mibs(rows, rw="read", layout="unwritten"))
    seq_written = statistics.median(mibs(rows, rw="read", layout=written))
    print(
        f"seed 002 in the lab: randread {rand_unwritten:.1f} vs {rand_written:.1f} MiB/s, read {seq_unwritten:.1f} vs {seq_written:.1f}"
    )
    # the seed's finding, as the preset claims it for the lab (the seed: 57x on random reads; the lab's unwritten
    # reads are CPU-bound under TCG, so the gap is smaller): decided by `check` at a 5 % error rate within the
    # preset's 5 repeats of each test. The sequential reads are judged, not expected (the ARC warms them).
    holds(doc, UNWRITTEN_FASTER)
    assert doc["runs_this_check"] <= doc["fixed_runs"], doc
    # written-file randreads grow over the 5 repeats while MFU hits rise (the ARC warming, as in the seed), within
    # each sequence of repeats no eviction broke: `check` runs some repeats and `run` the rest later, after the other
    # tests' reads have emptied the 128 MiB ARC (MFU hits fall back: a new sequence). Seen: check ran 4 repeats,
    # 12.6 → 39.2 MiB/s with MFU hits 250 → 1,094, then run's fifth read cold again at 12.2 MiB/s, 275 hits.
    series = [r for r in rows if r["params"]["rw"] == "randread" and r["params"]["layout"] == written]  # type: ignore[index]
    assert len(series) == 5
    speeds = mibs(series)
    mfu = [float(r["metrics"]["arc.mfu_hits"]) for r in series]  # type: ignore[index]
    warming = arc_sequences(mfu)
    assert any(len(seq) >= 2 for seq in warming), (speeds, mfu)
    for seq in (seq for seq in warming if len(seq) >= 2):
        assert speeds[seq[-1]] > speeds[seq[0]] and mfu[seq[-1]] > mfu[seq[0]], (speeds, mfu, warming)
    # the written file is about 2:1 compressible, as fio's default buffers were in the seed
    ratios = {float(r["metrics"]["zfs.compressratio"]) for r in rows if r["params"]["layout"] == written}  # type: ignore[index]
    assert all(1.6 <= x <= 2.2 for x in ratios), ratios
    # the report: sparse-file on the unwritten tests only
    res = tankbench("report", "--journal", str(tmp_path / "j.sqlite"), "--out", str(tmp_path / "report"))
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "report" / "results.json").read_text())
    ids = {t["params"]["layout"] + "/" + t["params"]["rw"]: t["id"] for t in doc["tests"]}
    warned = {w["code"]: set(w["test_ids"]) for w in doc["warnings"]}
    assert warned["sparse-file"] == {ids["unwritten/read"], ids["unwritten/randread"]}, warned
    # (the cache-warming warning reads the series as one: `check`'s runs and `run`'s later ones are two sequences
    # here, the ARC emptied by the sequential reads between them; the growth within each is asserted above)
    # issue 32: what bounded each run, from its own figures (all printed first: the machine's load moves them)
    named = {
        (layout, rw): limits(rows, layout=layout, rw=rw)
        for layout in ("unwritten", written)
        for rw in ("read", "randread")
    }
    for key, runs in named.items():
        print(f"seed 002 limiters, {key}: " + " | ".join(f"{k} ({d}): {e}" for k, d, e in runs))
    agree = capability_agrees(fp)
    print(f"seed 002 capability / model: {agree}")
    assert agree and all(0.85 <= x <= 1.15 for x in agree.values()), agree  # bench/disk-models' tolerance
    # reads of the unwritten file: ZFS answers holes from memory, the emulator's CPU is the limit
    unwritten = named[("unwritten", "read")] + named[("unwritten", "randread")]
    assert all((k, d) == ("cpu", "emulator") for k, d, _ in unwritten), unwritten
    # the written file's first random reads are not cold in this lab (laid out just before, part of it is still in the
    # ARC: 12 MiB/s where the modelled disks give 2.5): not the ARC's either; the emulator or a mix (not determined)
    assert named[(written, "randread")][0][0] != "arc", named[(written, "randread")]
    # holes are no ARC hits: the unwritten file's reads are never flagged arc-hits. (Whether the written file's
    # repeats come from the ARC — a 128 MiB ARC, the other tests' reads between them — differs from run to run in
    # this lab: the last repeats were ARC-bound in two full runs of the suite and disk-bound in a third; printed above)
    assert ids["unwritten/randread"] not in warned.get("arc-hits", set()), warned
    # the report never recommends the unwritten file (its reads carry errors of their own): the written one or nothing
    texts = " ".join(r["text"] for r in doc["recommendations"])
    unwritten = {t["number"] for t in doc["tests"] if t["params"]["layout"] == "unwritten"}
    assert not any(f"use #{n} " in texts for n in unwritten) and "unwritten was best" not in texts, texts
    assert doc["claims"][0]["name"] == UNWRITTEN_FASTER and doc["claims"][0]["verdict"] == "holds", doc["claims"]


def arc_sequences(hits: list[float]) -> list[list[int]]:
    """The repeats' indexes split where the ARC's hits fall back (the ARC was emptied in between: a new sequence)."""
    out: list[list[int]] = []
    for i, h in enumerate(hits):
        if not out or h < hits[i - 1]:
            out.append([])
        out[-1].append(i)
    return out


def iops(rows: list[dict[str, object]], **params: object) -> list[float]:
    out = []
    for r in rows:
        p = r["params"]
        assert isinstance(p, dict)
        if all(p.get(k) == v for k, v in params.items()):
            m = r["metrics"]
            assert isinstance(m, dict)
            out.append(float(m["write.iops"]))
    assert out, params
    return out


SLOG_HELPS = "Here we can see that slog helps sync performance"
QD_NEGLIGIBLE = "Results did tell me that there is negligible difference between queue-depths"
#: a claim false on the lab (written here, not in the preset) and one its runs cannot decide
FALSE_AND_UNDECIDABLE = """\
  { name = "a log device slows sync writes down", compare = { slog = [true, false] }, where = { bs = "4k" }, metric = "iops", expect = "<= 0.5x" },
  { name = "queue depth changes nothing, to within 1 %", compare = { iodepth = [16, 1] }, where = { bs = "4k", slog = true }, metric = "iops", expect = "within 1%" },
"""


def test_seed_001_tuning_matrix(seeds_lab: LabHost, tmp_path: Path) -> None:
    doc = check_preset("tuning-matrix", tmp_path, max_runs=5)
    # the seed's SLOG (its big win, seed 000's words), decided at a 5 % error rate; the seed's "negligible difference
    # between queue-depths" (psync: the same job) is never contradicted: it holds, or the emulator's noise leaves it open
    holds(doc, SLOG_HELPS)
    assert doc["by_name"][QD_NEGLIGIBLE]["verdict"] in ("holds", "undecided"), doc["by_name"][QD_NEGLIGIBLE]
    rows = run_preset("tuning-matrix", tmp_path)
    fp = rows[0]["fingerprint"]
    assert isinstance(fp, dict)
    assert fp["lab_disk_models"]["tbdata2"].startswith("hdd:") and fp["lab_disk_models"]["tblog0"].startswith("optane:")
    with_log = iops(rows, bs="4k", slog=True)
    without = iops(rows, bs="4k", slog=False)
    print(f"seed 001 in the lab: 4k sync randwrite IOPS with log {with_log}, without {without}")
    # issue 32: without a log the sync writes wait on the data disks; with one, on the log device or the CPU
    no_log, log = limits(rows, bs="4k", slog=False), limits(rows, bs="4k", slog=True)
    for name, runs in (("without a log", no_log), ("with a log", log)):
        print(f"seed 001 limiters {name}: " + " | ".join(f"{k} ({d}): {e}" for k, d, e in runs))
    print(f"seed 001 capability / model: {capability_agrees(fp)}")
    assert all(k == "data-disks" for k, _, _ in no_log), no_log
    # with a log: never the data disks (the log device, the emulator's CPU, or — at 81-85 % emulator busy under TCG,
    # just below the CPU rule's 85 % — not determined)
    assert not any(k == "data-disks" for k, _, _ in log), log
    # a false claim says "does not hold"; one the runs cannot decide says "undecided" and what it would need
    # (judged on the runs already in the journal: --max 1 adds none)
    again = check_preset("tuning-matrix", tmp_path, FALSE_AND_UNDECIDABLE, max_runs=1)
    assert again["runs_this_check"] == 0, again
    false, undecided = (
        again["by_name"]["a log device slows sync writes down"],
        again["by_name"]["queue depth changes nothing, to within 1 %"],
    )
    assert false["verdict"] == "does not hold", false
    # the same job at two queue depths: never shown equal to within 1 % by a few runs under TCG. Undecided, saying
    # what it needs, while the runs' spread straddles the band; when the emulator's share of the CPU drifted between
    # the two tests' runs (seen: 70-201 vs 113-194 IOPS, the interval above 1.01), "does not hold" with that interval
    assert undecided["verdict"] in ("undecided", "does not hold"), undecided
    if undecided["verdict"] == "undecided":
        # what it needs, in one of judge.needs's two forms: "about N runs of each of its tests", or a ratio on the
        # band's edge
        assert re.search(r"runs of each of its tests|more runs cannot decide", undecided["needs"]), undecided
    else:
        assert undecided["low"] > 1.01 or undecided["high"] < 0.99, undecided
    # the 1 Gbps goal is judged (measured, and on HDD models under TCG it fails)
    res = tankbench("report", "--journal", str(tmp_path / "j.sqlite"), "--out", str(tmp_path / "report"))
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "report" / "results.json").read_text())
    goals = report["goals"]
    assert [g["name"] for g in goals] == ["saturate 1 Gbps"] and not goals[0]["not_measured"], goals
    assert goals[0]["failing"] and not goals[0]["passing"], goals
    verdicts = {c["name"]: c["verdict"] for c in report["claims"]}
    assert verdicts["saturate 1 Gbps"] in ("does not hold", "undecided") and verdicts[SLOG_HELPS] == "holds", verdicts


RECORDS_4K = "changing the ZFS record size to match the ntfs/ext4 cluster sizes (4k) is very contra productive"
WHOLE_RECORDS = "to give CDM one uncompressed 4K record, ZFS has to read a compressed 128k record"


def test_seed_004_recordsize_mix(seeds_lab: LabHost, tmp_path: Path) -> None:
    doc = check_preset("recordsize-mix", tmp_path)
    rows = run_preset("recordsize-mix", tmp_path)
    amp: dict[str, float] = {}
    seq: dict[str, float] = {}
    for r in rows:
        p, m = r["params"], r["metrics"]
        assert isinstance(p, dict) and isinstance(m, dict)
        if p["rw"] == "randwrite":
            amp[p["recordsize"]] = float(m["zfs.physical_bytes_written"]) / float(m["zfs.logical_bytes_written"])
        else:
            seq[p["recordsize"]] = float(m["read.bw_bytes"]) / 2**20
    print(f"seed 004 in the lab: physical/logical {amp}, seq 1M MiB/s {seq}")
    # 4k random writes into large records rewrite whole records (at least 4x the 4k recordsize's bytes, for 128k
    # and 1M records), and sequential 1M reads are faster on 1M records than on 4k ones: the preset's claims
    holds(doc, RECORDS_4K, WHOLE_RECORDS, f"{WHOLE_RECORDS} (1M records)")


ZVOL_LATE = (
    "fio reported the test took ~180 seconds but in reality fio took another 13970 seconds i.e. 3.8 hours to finish"
)


def assert_zvol_buffered_why(kind: str, evidence: str) -> None:
    """Seed 000's why for the zvol's buffered writes: ZFS's write throttle, with its counts (the ci form scales
    zfs_dirty_data_max with its targets, a quarter of one as on the seed's host; at the lab's default, more than
    four targets, ZFS never held a writer back and the runs were named data-disks, the disk written a txg at a
    time); and the evidence always says how late the data was durable and that it waited in the page cache."""
    assert kind == "write-throttle", (kind, evidence)
    assert evidence.startswith("ZFS held writers back ") and "; dmu_tx) of " in evidence, evidence
    assert "the data was durable" in evidence and "page cache in front of the device" in evidence, evidence


def test_seed_000_zvol_buffered_writes_end_late(seeds_lab: LabHost, tmp_path: Path) -> None:
    """Seed 000's timing KPI: fio said 180 s, the data was written hours later, for buffered async writes to a
    zvol. In the lab (one `hdd`): the zvol's buffered writes are durable far past fio's runtime (fio's exit, or
    the drain after it: the zvol's last close waits for ZFS to write its dirty data out, unless another opener
    holds it), measured to the end (done, not ended by the watchdog) and ranked by the durable figure."""
    doc = check_preset("zvol-issues", tmp_path, max_runs=4)
    rows = run_preset("zvol-issues", tmp_path)
    fp = rows[0]["fingerprint"]
    assert isinstance(fp, dict) and fp["lab_disk_models"]["tbdata0"].startswith("hdd:"), fp
    runs = {(r["target"], r["params"]["io"]): r for r in rows}  # type: ignore[index]
    assert len(runs) == 4, sorted(runs)
    # seconds past fio's runtime until the data was durable: a late exit (timing.excess_s) plus the drain after it
    past = {k: float(r["metrics"]["timing.excess_s"]) + float(r["drain_s"] or 0) for k, r in runs.items()}  # type: ignore[index]
    zvol = runs[("zvol", "buffered")]["metrics"]
    fio_mibs = float(zvol["write.bw_bytes"]) / 2**20  # type: ignore[index]
    durable = float(zvol["timing.durable_bw_bytes"]) / 2**20  # type: ignore[index]
    print(
        f"seed 000 in the lab: s past the runtime until durable {past}; zvol buffered fio {fio_mibs:.1f} vs durable {durable:.1f} MiB/s"
    )
    # the seed's headline, as the preset claims it: the data on disk at least 2 x the 5 s runtime past it (the
    # seed: up to 3.8 h past a 180 s run); fio's own figure overstates what reached the disk (with the scaled
    # dirty limit fio's own runtime stretches too, 44 s of a 5 s job, and the close waits 11 s more: 1.25x, two runs)
    holds(doc, ZVOL_LATE)
    assert fio_mibs > durable, (fio_mibs, durable)
    # issue 32, seed 000's why: the zvol's buffered writes are bounded by read-modify-write or ZFS's write
    # throttle, said with the evidence, and the evidence says why they were late
    for (target, io), r in sorted(runs.items()):
        c = r["checks"]
        assert isinstance(c, dict)
        print(
            f"seed 000 limiter {target} {io}: {c.get('limit.kind')} ({c.get('limit.detail', '')}): {c.get('limit.evidence')}"
        )
    # (the lab, the dirty limit scaled: the zvol's buffered runs held back 14,491-14,611 times of 16,551 transactions,
    # dirty_over_max 152-163, txgs of up to 13 s, tbdata0 behind it at 93 %; durable 50-51 s past a 5 s runtime)
    for kind, _, evidence in limits(rows, target="zvol", io="buffered"):  # check may have run it more than once
        assert_zvol_buffered_why(kind, evidence)
    # every run measured to its end, none ended by the watchdog; the report ranks by the durable figure and says why
    res = tankbench("report", "--journal", str(tmp_path / "j.sqlite"), "--out", str(tmp_path / "report"))
    assert res.returncode == 0, res.stderr
    doc = json.loads((tmp_path / "report" / "results.json").read_text())
    assert all(r["status"] == "done" for t in doc["tests"] for r in t["runs"]), doc["tests"]
    (board,) = doc["leaderboards"]
    assert board["metric"] == "durable_mibs" and "finished late" in board["reason"], board
    # the report says why, from its own figures: the zvol's buffered test names its limiter and why it was late
    zvol = next(t for t in doc["tests"] if t["target"] == "zvol" and t["params"]["io"] == "buffered")
    summary = (tmp_path / "report" / "summary.md").read_text()
    row = next(line for line in summary.splitlines() if line.startswith(f"| #{zvol['number']} ") and "durable" in line)
    assert_zvol_buffered_why(zvol["limit"]["kind"], zvol["limit"]["evidence"])
    assert "the data was durable" in row, row
