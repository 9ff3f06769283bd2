"""Each preset's figure appears when its axes exist: SYNTHETIC journals built from real fixture journal rows.

The presets (tuning-matrix, compression-cache, recordsize-mix) are written by another helper; these journals give
their axes (iodepth, layout, cache, recordsize, sync_mode) to real runs of tests/fixtures/journal-lab-zfs.sqlite,
scaled so the figures have something to show. Every name in them says SYNTHETIC.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tankbench.analysis.analyse import analyse_dataset, analyse_journal, load
from tankbench.analysis.select import parse_where
from tankbench.errors import UserError
from tankbench.journal.db import Journal
from tankbench.model import Fingerprint, Run, Target
from tankbench.model import Test as TbTest
from tankbench.reports.html import render_html
from tankbench.reports.markdown import summary_markdown
from tests.reportdata import LAB_ZFS_JOURNAL, lab_zfs_journal


def real_rows() -> list[dict[str, Any]]:
    """Metrics, checks, wall and drain of the real lab runs (OpenZFS 2.3 in the lab VM)."""
    con = sqlite3.connect(f"file:{LAB_ZFS_JOURNAL}?mode=ro", uri=True)
    out = [
        {"metrics": json.loads(m), "checks": json.loads(c), "wall": w, "drain": d}
        for m, c, w, d in con.execute(
            "SELECT metrics, checks, wall_s, drain_s FROM runs WHERE status='done' ORDER BY id"
        )
    ]
    con.close()
    return out


def synthetic_journal(path: Path, spec: str, tests: list[TbTest], shape: Any, repeats: int = 2) -> str:
    """Write a SYNTHETIC journal: the tests, and for each repeat a real run whose metrics `shape(test, run_no,
    metrics)` rescales; wall time = ramp + runtime + 0.2 s, so nothing finishes late unless shaped so."""
    rows = real_rows()
    with Journal(str(path), create=True) as j:
        j.add_campaign("synthetic", "SYNTHETIC-figures", "synthetic.toml", spec)
        j.add_tests("synthetic", tests, {})
        fp = j.add_fingerprint(Fingerprint({"kernel": "synthetic", "fio_version": "synthetic"}))
        for i, (t, run_no) in enumerate(itertools.product(tests, range(1, repeats + 1))):
            real = rows[i % len(rows)]
            m = shape(t, run_no, dict(real["metrics"]))
            row = j.begin_run(t.id, run_no, False, 1, t.expected_s, "synthetic")
            j.finish_run(
                row,
                Run(
                    test_id=t.id,
                    run_no=run_no,
                    warmup=False,
                    attempt=1,
                    status="done",
                    started=0.0,
                    ended=1.0,
                    host="synthetic",
                    fingerprint_id=fp,
                    expected_s=t.expected_s,
                    wall_s=t.expected_s + 0.2,
                    drain_s=0.05,
                    metrics=m,
                    checks=real["checks"],
                ),
            )
    return str(path)


def _scale(m: dict[str, float], mibs: float) -> dict[str, float]:
    """The real run's metrics with fio's throughput set to `mibs` (IOPS and bytes in proportion)."""
    f = mibs * 1048576.0 / m["total.bw_bytes"]
    keys = (
        "total.bw_bytes",
        "total.io_bytes",
        "total.iops",
        "read.bw_bytes",
        "read.iops",
        "write.bw_bytes",
        "write.iops",
        "read.io_bytes",
        "write.io_bytes",
    )
    return {k: v * f if k in keys else v for k, v in m.items()}


def _test(n: int, target: Target, **params: Any) -> TbTest:
    return TbTest(n, f"synthetic-{n}-" + "-".join(str(v) for v in params.values()), target, params, {}, 30.0, 0.0)


RAW = Target("synthetic-disk", "raw", "/dev/synthetic", 1 << 30)
DS = Target("synthetic-fs", "dataset", "", 1 << 30, props={"compression": "lz4"}, pool="synthetic/pool")


def test_tuning_matrix_iops_and_p99_against_iodepth(tmp_path: Path) -> None:
    """Seed 001: bs 4k/64k × QD 1/4/16 × patterns -> IOPS and p99 against iodepth per test case, and the table."""
    tests = [
        _test(i + 1, RAW, rw=rw, bs=bs, iodepth=qd, io="direct", sync_mode="async")
        for i, (rw, bs, qd) in enumerate(itertools.product(("randread", "write"), ("4k", "64k"), (1, 4, 16)))
    ]

    def shape(t: TbTest, run_no: int, m: dict[str, float]) -> dict[str, float]:
        qd = int(t.params["iodepth"])
        m = _scale(m, 10.0 * qd**0.5 + run_no)
        m["read.lat_p99_ns"] = m["write.lat_p99_ns"] = 1e6 * qd + run_no
        return m

    a = analyse_journal(synthetic_journal(tmp_path / "SYNTHETIC-tuning.sqlite", "", tests, shape))
    ids = {f.id: f for f in a.figures}
    for case in ("read random 4k", "read random 64k", "write seq 4k", "write seq 64k"):
        iops, p99 = ids[f"iodepth-iops-{case}"], ids[f"iodepth-p99_ms-{case}"]
        assert iops.x_values == p99.x_values == ("1", "4", "16")
        vals = [v for _, v in iops.series[0].points]
        assert vals == sorted(vals) and vals[0] is not None  # IOPS grow with queue depth in the synthetic shape
        assert [v for _, v in p99.series[0].points] == sorted(v for _, v in p99.series[0].points)
    heat = ids["heatmap-case-iodepth"]
    assert [s.label for s in heat.series] == ["read random 4k", "read random 64k", "write seq 4k", "write seq 64k"]
    page = render_html(a)
    assert 'data-figure="iodepth-iops-read random 4k"' in page and '<table class="heatmap"' in page
    assert "### Figure: write seq 64k: p99 latency (ms) against iodepth" in summary_markdown(a)


def test_compression_cache_unwritten_vs_written_and_arc_per_repeat(tmp_path: Path) -> None:
    """Seed 002: read/randread on unwritten vs written files, 5 repeats, ARC MRU/MFU hits per repeat."""
    tests = [
        _test(i + 1, DS, rw=rw, bs="128k", layout=layout, io="buffered", sync_mode="async")
        for i, (rw, layout) in enumerate(itertools.product(("read", "randread"), ("unwritten", "random")))
    ]

    def shape(t: TbTest, run_no: int, m: dict[str, float]) -> dict[str, float]:
        unwritten = t.params["layout"] == "unwritten"
        m = _scale(m, 2400.0 if unwritten else 20.0 * run_no)  # the ARC warms run after run on the written file
        m.update(
            {
                "arc.mru_hits": 800.0 * run_no,
                "arc.mfu_hits": 600.0 * run_no**2,
                "dev.read_bw_bytes": 0.0 if unwritten else 5e7,
            }
        )
        return m

    a = analyse_journal(synthetic_journal(tmp_path / "SYNTHETIC-cache.sqlite", "", tests, shape, repeats=5))
    ids = {f.id: f for f in a.figures}
    side = ids["layout-read random 128k"]
    assert side.kind == "bars" and side.x_values == ("random", "unwritten")
    assert "unwritten" in side.note and "not the disks" in side.note
    for metric in ("arc_mru_hits", "arc_mfu_hits"):
        f = ids[f"repeat-{metric}-read seq 128k"]
        assert f.x_values == ("1", "2", "3", "4", "5")
        assert [v for _, v in f.series[0].points] == sorted(v for _, v in f.series[0].points)
    warn = {w.code: w for w in a.warnings}
    assert (
        len(warn["layout-reads-meaningless"].test_ids) == 2 and "seed 002" in warn["layout-reads-meaningless"].message
    )
    assert "cache-warming" in warn
    page = render_html(a)
    assert 'data-figure="layout-read seq 128k"' in page and "Why this matters:" in page
    md = summary_markdown(a)
    assert "### Figure: read seq 128k: ARC MFU hits per repeat" in md and "layout-reads-meaningless" in md


def test_recordsize_mix_by_storage_configuration(tmp_path: Path) -> None:
    """Seed 004: MiB/s and physical/logical against recordsize; the mix ranks storage setups, with sync_mode part
    of the workload (test cases grouped by rw, bs and sync_mode)."""
    spec = (
        '[report]\ntest_case = ["rw", "bs", "sync_mode"]\n[mix]\n"read random 4k sync_mode=async" = 0.7\n'
        '"write random 4k sync_mode=fsync" = 0.3\n'
    )
    combos = [("randread", "async"), ("randwrite", "async"), ("randwrite", "fsync")]
    tests = [
        _test(i + 1, DS, rw=rw, bs="4k", recordsize=rs, sync_mode=sm, io="buffered")
        for i, ((rw, sm), rs) in enumerate(itertools.product(combos, ("4k", "128k", "1M")))
    ]
    kib = {"4k": 4, "128k": 128, "1M": 1024}

    def shape(t: TbTest, run_no: int, m: dict[str, float]) -> dict[str, float]:
        rs = kib[str(t.params["recordsize"])]
        m = _scale(m, 40.0 / rs**0.5)
        m["zfs.logical_bytes_written"] = 1e8
        m["zfs.physical_bytes_written"] = 1e8 * rs / 4  # read-modify-write of whole records
        return m

    path = synthetic_journal(tmp_path / "SYNTHETIC-rsmix.sqlite", spec, tests, shape)
    a = analyse_journal(path)
    ids = {f.id: f for f in a.figures}
    case = "write random 4k sync_mode=fsync"
    f = ids[f"recordsize-physical_per_logical-{case}"]
    assert f.x_values == ("4k", "128k", "1M") and [v for _, v in f.series[0].points] == [1.0, 32.0, 256.0]
    assert f"recordsize-mibs-{case}" in ids
    assert a.mix is not None
    configs = [e.config for e in a.mix.entries]
    assert len(configs) == 3 and all("recordsize=" in c and "sync_mode" not in c for c in configs)
    assert all(not e.missing and e.expected for e in a.mix.entries)
    assert a.mix.entries[0].config.endswith("recordsize=4k")  # smallest records win this synthetic shape
    assert "heatmap-config-case" in ids


def test_group_by_and_where_without_touching_the_journal(tmp_path: Path) -> None:
    path = lab_zfs_journal(tmp_path)
    with Journal(path, create=False) as j:
        ds = load(j, group_by=("rw", "bs", "sync_mode"), where=[parse_where("slog=false"), parse_where("kind!=raw")])
    a = analyse_dataset(ds, selection=("--group-by rw,bs,sync_mode", "--where slog=false", "--where kind!=raw"))
    assert {lb.case for lb in a.leaderboards} == {
        "write seq 4k sync_mode=async",
        "write seq 4k sync_mode=fsync",
        "read random 4k sync_mode=async",
    }
    assert all(t.params.get("slog") is False and t.target_kind != "raw" for t in a.dataset.tests)
    assert "Selection: `--group-by rw,bs,sync_mode; --where slog=false; --where kind!=raw`." in summary_markdown(a)
    with Journal(path, create=False) as j:
        with pytest.raises(UserError, match="no test has sync=disbled"):
            load(j, where=[parse_where("sync!=disbled")])
        with pytest.raises(UserError, match="no test in .* has the axis 'pool_layout'"):
            load(j, where=[parse_where("pool_layout=raidz1")])
        with pytest.raises(UserError, match="--group-by rw,blocksize: no test has the axis 'blocksize'"):
            load(j, group_by=("rw", "blocksize"))
    with pytest.raises(UserError, match="bad --where 'sync'"):
        parse_where("sync")
    con = sqlite3.connect(path)
    assert con.execute("SELECT count(*) FROM tests").fetchone() == (18,)  # regrouping and filtering only read
    con.close()


def test_every_axis_is_compared(tmp_path: Path) -> None:
    """Comparisons along every axis that varies inside a test case, not only the built-in ones."""
    tests = [
        _test(i + 1, DS, rw="randread", bs="4k", io="direct", sync_mode="async", cache=c, logbias=lb)
        for i, (c, lb) in enumerate(itertools.product(("warm", "cold"), ("latency", "throughput")))
    ]
    a = analyse_journal(
        synthetic_journal(
            tmp_path / "SYNTHETIC-axes.sqlite",
            "",
            tests,
            lambda t, n, m: _scale(m, 300.0 + n if t.params["cache"] == "warm" else 100.0 + n),
        )
    )
    axes = {c.axis for c in a.comparisons}
    assert {"cache", "logbias"} <= axes
    cache = next(c for c in a.comparisons if c.axis == "cache")
    assert cache.entries[0][0] == "warm"


def test_copy_tests_rank_by_durable_with_cp_speed_beside(tmp_path: Path) -> None:
    """Copy tests: copy.* keys only (also an older journal's copy rows that stored cp's speed as total.bw_bytes)."""
    from tankbench.analysis.present import beside
    from tankbench.metrics import copy_metrics

    tests = [_test(i + 1, DS, workload=w, copy_size="64M") for i, w in enumerate(("cp", "dd"))]

    def shape(t: TbTest, run_no: int, m: dict[str, float]) -> dict[str, float]:
        wall, drain = (0.5, 2.0) if t.params["workload"] == "cp" else (1.0, 0.5)
        out = copy_metrics(64 << 20, wall, drain)
        if t.params["workload"] == "dd":  # as the runner of ab3fb23 stored it: cp's apparent speed as fio's bw
            out.update({"total.bw_bytes": (64 << 20) / wall, "total.io_bytes": float(64 << 20)})
        return out

    a = analyse_journal(synthetic_journal(tmp_path / "SYNTHETIC-copy.sqlite", "", tests, shape))
    by = {lb.case: lb for lb in a.leaderboards}
    cp, dd = by["copy cp 64M"], by["copy dd 64M"]
    for lb in (cp, dd):
        assert lb.metric == "durable_mibs" and "copy tests" in lb.reason
        assert lb.rows[0].test.mean("mibs") is None and "copy_mibs" in beside(lb) and "mibs" not in beside(lb)
    # the synthetic wall is 30.2 s (ramp + runtime + 0.2), drain 0.05: the figures follow the journal's clock
    assert cp.rows[0].value == pytest.approx(64 / (30.2 + 0.05))
    assert dd.rows[0].test.mean("copy_mibs") == pytest.approx(64 / 30.2)
