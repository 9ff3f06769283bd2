"""What bounded each test, said where people look (issue 32): the sentence for a test case whose winner and
runner-up had different limiters, and the campaign `advise` proposes to move each limiter."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from tankbench.analysis.analyse import analyse_journal
from tankbench.analysis.leaderboard import Leaderboard
from tankbench.analysis.limiters import Limit
from tankbench.analysis.why import move, pair_sentence
from tests.conftest import tankbench
from tests.reportdata import lab_zfs_journal

DISKS = Limit(
    "data-disks", "tbdata0 at 40 IOPS (160.0 KiB/s) of the 40 it can do at 4.0 KiB requests (100 %)", "tbdata0"
)
THROTTLE = Limit("write-throttle", "ZFS held writers back 1,900 times (dirty_delay 1,900; dmu_tx); 4 txgs synced")


def board(tmp_path: Path) -> Leaderboard:
    a = analyse_journal(lab_zfs_journal(tmp_path))
    return next(lb for lb in a.leaderboards if len([r for r in lb.rows if r.value is not None]) >= 2)


def with_limits(lb: Leaderboard, first: Limit, second: Limit) -> Leaderboard:
    rows = list(lb.rows)
    rows[0] = replace(rows[0], test=replace(rows[0].test, limit=first))
    rows[1] = replace(rows[1], test=replace(rows[1].test, limit=second))
    return replace(lb, rows=tuple(rows))


def test_different_limiters_at_the_top_are_one_sentence(tmp_path: Path) -> None:
    lb = with_limits(board(tmp_path), DISKS, THROTTLE)
    a, b = lb.rows[0].test, lb.rows[1].test
    text = pair_sentence(lb)
    assert text == (
        f"Different limiters at the top: #{a.number} {a.name} is bound by the pool's data disks (IOPS or bandwidth) "
        f"(tbdata0): {DISKS.evidence}; #{b.number} {b.name} is bound by ZFS's dirty-data write throttle / txg sync: "
        "ZFS held writers back 1,900 times (dirty_delay 1,900; dmu_tx)."
    )
    assert pair_sentence(with_limits(board(tmp_path), DISKS, DISKS)) == ""


def test_each_limiter_has_the_campaign_that_moves_it(tmp_path: Path) -> None:
    t = board(tmp_path).rows[0].test
    rmw = move(replace(t, limit=Limit("read-modify-write", "4k writes into 8k blocks …")))
    assert rmw is not None and ("volblocksize" in rmw.campaign or "recordsize" in rmw.campaign)
    arc = move(replace(t, limit=Limit("arc", "the ARC served 99 % …")))
    assert arc is not None and "primarycache" in arc.campaign and "larger than the ARC" in arc.text
    log = move(replace(t, params={**t.params, "sync_mode": "sync"}, limit=DISKS))
    assert log is not None and log.campaign == "[matrix]\nslog = [false, true]"
    emu = move(replace(t, limit=Limit("cpu", "the emulator …", "emulator")))
    assert emu is not None and "real host" in emu.text


def test_advise_prints_and_exports_the_moves(tmp_path: Path) -> None:
    journal = lab_zfs_journal(tmp_path)
    text = tankbench("advise", "--journal", journal)
    assert text.returncode == 0, text.stderr
    assert "What bounded the runs, and the campaign that would move it:" in text.stdout
    doc = json.loads(tankbench("advise", "--journal", journal, "--json").stdout)
    kinds = {m["limit.kind"] for m in doc["limiter_moves"]}
    assert "arc" in kinds and all(m["proposal"] and m["limit.evidence"] for m in doc["limiter_moves"])


def test_latency_histogram_of_json_plus_merges_jobs_into_powers_of_two() -> None:
    from tankbench.analysis.histogram import histogram, percent_by_bucket
    from tests.conftest import FIXTURES

    text = (FIXTURES / "fio-public" / "local-fio-3.33-jsonplus-numjobs2-two-jobs.json").read_text()
    h = histogram(text)
    doc = json.loads(text)
    for d in ("read", "write"):
        ios = sum(int(c) for j in doc["jobs"] for c in j[d]["clat_ns"].get("bins", {}).values())
        assert sum(n for _, n in h[d]) == ios > 0
        edges = [e for e, _ in h[d]]
        assert edges == sorted(edges) and all(
            round(e * 1e6) & (round(e * 1e6) - 1) == 0 and round(e * 1e6).bit_length() % 2 for e in edges
        )
    assert abs(sum(p for _, p in percent_by_bucket(h["read"])) - 100) < 0.1
    assert histogram("not json") == {}
