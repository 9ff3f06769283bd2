"""Journal checks of the pool-full experiment (workload = "fill"), shared by the lab tests that run it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tankbench.guestconf.fill import SAW
from tankbench.guestconf.pauses import WERROR_VALUES

MIB = 1 << 20
#: (test name, params, status, checks, metrics) of a measured run
Row = tuple[str, Mapping[str, Any], str, Mapping[str, Any], Mapping[str, float]]


def assert_fill_runs(rows: Sequence[Row], disk_bytes: int, room: int) -> dict[str, str]:
    """Every fill run recorded what its guest saw consistently: a pause was followed by a resume and an intact
    verify, an I/O error by an intact verify of what came before it; the ballast left `room` and is gone, and
    the pool's available space is back. Returns {backing: what the guest saw} for the caller's own checks."""
    seen: dict[str, str] = {}
    fills = [r for r in rows if r[1].get("workload") == "fill"]
    assert fills, "no fill runs in the journal"
    for name, params, status, c, m in fills:
        assert status == "done", (name, status, c)
        saw = c["fill.guest_saw"]
        assert saw in SAW and c["fill.werror"] in WERROR_VALUES, (name, c)
        assert m["fill.disk_bytes"] == disk_bytes
        asked = m["fill.write_bytes"]  # what the fill job writes: twice the room, at most the disk
        assert asked == min(disk_bytes, 2 * room), (name, m)
        # ZFS's view: the ballast left about the room asked for, and everything it took came back
        assert room <= m["fill.room_bytes"] <= room + 16 * MIB, (name, m)
        assert c["fill.ballast_destroyed"] and c["fill.cleaned"], (name, c)
        assert m["fill.pool_available_after"] >= m["fill.pool_available_before"] - 16 * MIB, (name, m)
        assert 0 < m["fill.bytes_before_stop"] <= m["fill.bytes_written"] <= asked, (name, m)
        assert m["fill.host_io_errors"] >= 1, (name, m)  # the pool was really full: the host refused a write
        assert c["fill.intact"] is True, (name, c)  # what the guest was told was written reads back
        assert m["fill.verified_bytes"] == m["fill.bytes_written"] // MIB * MIB, (name, m)
        if saw == "paused":
            pauses = c["fill.pause_records"]
            assert m["fill.pauses"] == len(pauses) >= 1 and c["fill.resumed"] is True, (name, c)
            assert all(p["resumed"] and p["paused_s"] > 0 and p["command_rc"] == 0 for p in pauses), pauses
            assert m["fill.bytes_written"] == asked, (name, m)  # the guest went on after the resume
            assert m["fill.bytes_before_stop"] < asked
        elif saw == "io-error":
            assert c["fill.fio_errno"] in (5, 28) and c["fill.resumed"] is None, (name, c)
            assert m["fill.bytes_written"] < asked, (name, m)
        seen[str(params.get("backing"))] = saw
    return seen
