"""The pool-full experiment's pure parts: ballast arithmetic, fio jobs, the controller's pause records, what
the guest saw, and the verdict of a fill run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tankbench.errors import UserError
from tankbench.guest.qemu import GuestDisk, device
from tankbench.guestconf.fill import (
    FillOutcome,
    FioPass,
    ballast_bytes,
    fill_checks,
    fill_job,
    fill_metrics,
    fill_size,
    fill_status,
    fio_pass,
    first_bad_offset,
    verifiable_bytes,
    verify_job,
)
from tankbench.guestconf.pauses import effective_werror, parse_io_errors, parse_pauses, pause_record

MIB = 1 << 20

#: a pause as the controller records it (from a real run: tests/integration/test_guest_pause_local.py)
PAUSE = {
    "at": 1795490374.961996,
    "status": "io-error",
    "resumed": True,
    "io_status": {"tbf0": "nospace"},
    "wr_bytes": {"tbf0": 50331648},
    "errors": [
        {
            "device": "",
            "nospace": True,
            "node-name": "tbf0",
            "reason": "No space left on device",
            "operation": "write",
            "action": "stop",
        }
    ],
    "command": {"rc": 0, "output": "", "seconds": 0.412},
    "resumed_at": 1795490375.969,
    "paused_s": 1.007,
}
IO_ERRORS = [
    {
        "node": "tbf0",
        "operation": "write",
        "action": "stop",
        "reason": "No space left on device",
        "nospace": True,
        "count": 2,
        "first_at": 1795490374.96,
    }
]


def test_ballast_leaves_the_room_in_whole_mebibytes() -> None:
    assert ballast_bytes(1000 * MIB, 64 * MIB) == 936 * MIB
    # rounded down: the room is never smaller than asked
    assert ballast_bytes(1000 * MIB + 12345, 64 * MIB) == 936 * MIB
    assert ballast_bytes(64 * MIB, 64 * MIB) == 0 and ballast_bytes(10 * MIB, 64 * MIB) == 0


def test_the_fill_writes_twice_the_room_at_most_the_disk() -> None:
    assert fill_size(20 << 30, 64 * MIB) == 128 * MIB  # a big guest disk: only a little past the room
    assert fill_size(96 * MIB, 64 * MIB) == 96 * MIB


def test_fill_job_writes_checksummed_blocks_one_at_a_time_and_the_verify_job_reads_them_back() -> None:
    job = fill_job("/dev/vda", 128 * MIB)
    lines = job.splitlines()
    for want in ("filename=/dev/vda", "rw=write", f"bs={MIB}", "iodepth=1", "ioengine=psync", "direct=1"):
        assert want in lines
    assert f"size={128 * MIB}" in lines and "verify=crc32c" in lines and "do_verify=0" in lines
    assert lines[-1] == "[fill]"
    v = verify_job("/dev/vda", 48 * MIB).splitlines()
    assert f"size={48 * MIB}" in v and "verify_only=1" in v and "do_verify=1" in v and "do_verify=0" not in v
    # the same job otherwise: fio regenerates exactly what the fill wrote
    assert [x for x in v if x not in ("do_verify=1", "verify_only=1", "verify_fatal=1")] == [
        x.replace(f"size={128 * MIB}", f"size={48 * MIB}") for x in lines if x != "do_verify=0"
    ]
    assert verifiable_bytes(48 * MIB + 4096) == 48 * MIB


def test_fio_pass_reads_errno_bytes_and_the_first_error_line() -> None:
    fio = {"jobs": [{"error": 5, "write": {"io_bytes": 41943040}, "read": {"io_bytes": 0}}]}
    err = "fio: io_u error on file /dev/vda: Input/output error: write offset=41943040, buflen=1048576\nmore\n"
    p = fio_pass(1, fio, err)
    assert p == FioPass(1, 5, 41943040, 0, err.splitlines()[0]) and not p.ok
    assert fio_pass(0, None, "").ok and fio_pass(0, None, "").write_bytes == 0
    assert fio_pass(137, None, "Killed").message == "Killed"
    msg = "verify: bad magic header 0, wanted acca at file /dev/vda offset 50331648, length 1048576"
    assert first_bad_offset(msg) == 50331648 and first_bad_offset("") is None


def test_pause_records_parse_into_frozen_values_and_back_to_journal_checks() -> None:
    (p,) = parse_pauses([PAUSE])
    assert p.resumed and p.nospace and p.paused_s == 1.007 and p.wr_bytes == {"tbf0": 50331648}
    assert p.command is not None and p.command.rc == 0 and p.command.seconds == 0.412
    rec = pause_record(p)
    assert rec["reason"] == "No space left on device" and rec["command_rc"] == 0 and "command_output" not in rec
    json.dumps(rec)  # a journal check value
    left = dict(PAUSE, resumed=False, resumed_at=None, paused_s=None, command=None, note="left paused: …")
    later = dict(PAUSE, at=PAUSE["at"] + 5)
    assert [q.at for q in parse_pauses([later, left])] == [PAUSE["at"], PAUSE["at"] + 5]  # in time order
    assert parse_pauses([left])[0].command is None
    with pytest.raises(ValueError, match="malformed pause record"):
        parse_pauses([{"io_status": {}}])
    (e,) = parse_io_errors(IO_ERRORS)
    assert (e.action, e.reason, e.nospace, e.count) == ("stop", "No space left on device", True, 2)


def test_werror_auto_means_enospc_and_the_device_gets_the_policy_only_when_set() -> None:
    assert effective_werror("auto") == "enospc" and effective_werror("") == "enospc"
    assert effective_werror("report") == "report"
    assert "werror" not in device(GuestDisk("tbd0", "/x.img"), "microvm")
    assert device(GuestDisk("tbd0", "/x.img", werror="stop"), "microvm")["werror"] == "stop"
    with pytest.raises(UserError, match="werror = 'pause' is not supported"):
        GuestDisk("tbd0", "/x.img", werror="pause")


def _outcome(**kw: Any) -> FillOutcome:
    base: dict[str, Any] = {
        "fill": FioPass(0, 0, 128 * MIB, 0, ""),
        "verify": FioPass(0, 0, 0, 128 * MIB, ""),
        "verified_bytes": 128 * MIB,
        "pauses": parse_pauses([PAUSE]),
        "io_errors": parse_io_errors(IO_ERRORS),
        "node": "tbf0",
        "werror_property": "auto",
    }
    base.update(kw)
    return FillOutcome(**base)


def test_a_paused_and_resumed_guest_with_intact_data() -> None:
    o = _outcome()
    assert (o.guest_saw, o.resumed, o.intact, o.bytes_before_stop) == ("paused", True, True, 50331648)
    m, c = fill_metrics(o), fill_checks(o)
    assert m["fill.pauses"] == 1 and m["fill.paused_s"] == 1.007 and m["fill.host_io_errors"] == 2
    assert c["fill.werror"] == "enospc" and c["fill.werror_property"] == "auto" and "fill.fio_error" not in c
    assert c["fill.host_errors"] == [
        {"action": "stop", "reason": "No space left on device", "nospace": True, "count": 2, "operation": "write"}
    ]
    json.dumps(c)
    status, notes = fill_status(m, c)
    assert status == "done" and notes == ("qemu paused the VM 1x; resumed after space was freed",)


def test_an_io_error_in_the_guest_is_a_result_not_a_failure() -> None:
    err = "fio: io_u error on file /dev/vda: Input/output error: write offset=41943040, buflen=1048576"
    io = [dict(IO_ERRORS[0], action="report", nospace=False, count=1)]
    o = _outcome(
        fill=FioPass(1, 5, 40 * MIB, 0, err),
        verify=FioPass(0, 0, 0, 40 * MIB, ""),
        verified_bytes=40 * MIB,
        pauses=(),
        io_errors=parse_io_errors(io),
        werror_property="report",
    )
    assert (o.guest_saw, o.resumed, o.intact, o.bytes_before_stop) == ("io-error", None, True, 40 * MIB)
    c = fill_checks(o)
    assert c["fill.fio_errno"] == 5 and c["fill.fio_error"] == f"EIO (5): {err}"
    status, notes = fill_status(fill_metrics(o), c)
    assert status == "done" and notes == (f"the guest saw EIO (5): {err}",)


def test_ignored_errors_lose_data_and_the_verify_says_where() -> None:
    bad = "verify: bad magic header 0, wanted acca at file /dev/vda offset 50331648, length 1048576"
    o = _outcome(
        verify=FioPass(1, 84, 0, 49 * MIB, bad),
        pauses=(),
        io_errors=parse_io_errors([dict(IO_ERRORS[0], action="ignore", nospace=False, count=160)]),
        werror_property="ignore",
    )
    assert o.guest_saw == "none" and o.intact is False
    c = fill_checks(o)
    assert c["fill.verify_error"] == bad and c["fill.verify_bad_offset"] == 50331648
    status, notes = fill_status(fill_metrics(o), c)
    assert status == "done"
    assert notes == (
        "qemu ignored the host's write errors: the guest saw none",
        f"data written before is NOT intact: {bad}",
    )


@pytest.mark.parametrize(
    "change,why",
    [
        ({"pauses": (), "io_errors": ()}, "the pool never filled"),
        ({"verify": None}, "the verify pass did not run"),
        ({"watch_error": "OSError: QMP connection closed"}, "the controller's pause watch failed"),
        (
            {"pauses": parse_pauses([dict(PAUSE, resumed=False, resumed_at=None, paused_s=None)])},
            "paused the VM and it was not resumed",
        ),
    ],
)
def test_a_fill_run_that_measured_nothing_fails(change: dict[str, Any], why: str) -> None:
    o = _outcome(**change)
    status, notes = fill_status(fill_metrics(o), fill_checks(o))
    assert status == "failed" and why in notes[0], notes
