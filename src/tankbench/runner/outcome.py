"""What a campaign run did (counts for the summary and the exit status), and the lines that say it."""

from __future__ import annotations

from dataclasses import dataclass, field

from tankbench.errors import HostError, UserError
from tankbench.metrics import worst_p99_ms
from tankbench.model import Run
from tankbench.units import fmt_duration


@dataclass
class Outcome:
    """What a campaign run did, for the summary and the exit status."""

    tests: int = 0
    runs_done: int = 0
    runs_failed: int = 0
    runs_timeout: int = 0
    runs_crashed_found: int = 0
    #: times the host went down during this run of the campaign and was waited for (recovery.py)
    host_failures: int = 0
    #: times a test guest died while its host stayed up, and was booted again (guest_failed)
    guest_failures: int = 0
    runs_skipped_existing: int = 0
    tests_skipped: list[str] = field(default_factory=list)
    journal: str = ""
    seconds: float = 0.0

    @property
    def exit_status(self) -> int:
        return 0 if not (self.runs_failed or self.runs_timeout or self.tests_skipped) else 1

    def count(self, run: Run) -> None:
        """Count a run that went through (done, failed or timed out)."""
        if run.status == "done":
            self.runs_done += 1
        elif run.status == "timeout":
            self.runs_timeout += 1
        else:
            self.runs_failed += 1

    def add(self, other: Outcome) -> None:
        """Add another runner's counts (a fleet host's test cases, one runner each)."""
        self.tests += other.tests
        self.runs_done += other.runs_done
        self.runs_failed += other.runs_failed
        self.runs_timeout += other.runs_timeout
        self.runs_skipped_existing += other.runs_skipped_existing
        self.tests_skipped += other.tests_skipped
        self.host_failures += other.host_failures
        self.guest_failures += other.guest_failures


def describe(run: Run) -> str:
    """One line: IOPS, MiB/s, p99 and the timing KPI of a run."""
    m = run.metrics
    bits = []
    if "copy.bytes" in m:
        bits.append(
            f"apparent {m['copy.apparent_bw_bytes'] / 1048576:.1f} MiB/s, "
            f"durable {m['copy.durable_bw_bytes'] / 1048576:.1f} MiB/s"
        )
    elif "total.iops" in m:
        bits.append(f"{m['total.iops']:.0f} IOPS, {m.get('total.bw_bytes', 0) / 1048576:.1f} MiB/s")
        if "timing.durable_bw_bytes" in m:
            bits.append(f"durable {m['timing.durable_bw_bytes'] / 1048576:.1f} MiB/s")
    p99 = worst_p99_ms(m)
    if p99 is not None:
        bits.append(f"p99 {p99:.2f} ms")
    if run.wall_s is not None:
        bits.append(f"wall {run.wall_s:.1f}s vs expected {run.expected_s:.1f}s")
    if run.drain_s:
        bits.append(f"drain {run.drain_s:.1f}s")
    if run.checks.get("timing.issue"):
        bits.append("TIMING ISSUE")
    if run.note:
        bits.append(run.note)
    return ", ".join(bits)


def stop_status(e: BaseException) -> int:
    """The exit status `tankbench run` ends with for an exception that stopped the campaign (cli/run.py)."""
    if isinstance(e, HostError):
        return 3
    if isinstance(e, UserError):
        return e.exit_status  # 2 bad input; 3 a fault of this machine (LocalError: a full journal filesystem)
    return 130 if isinstance(e, KeyboardInterrupt) else 1


def summary_line(o: Outcome) -> str:
    """The campaign's last line: the time belongs to the runs ("13 run(s) done in 8m00s, the host went down 1
    time(s) …"), not to the last clause, which read as if the host had been waited for that long."""
    parts = [f"{o.runs_done} run(s) done in {fmt_duration(o.seconds)}"]
    if o.runs_failed:
        parts.append(f"{o.runs_failed} failed")
    if o.runs_timeout:
        parts.append(f"{o.runs_timeout} timed out")
    if o.runs_skipped_existing:
        parts.append(f"{o.runs_skipped_existing} already in the journal")
    if o.tests_skipped:
        parts.append(f"{len(o.tests_skipped)} test(s) skipped after crashing the host (campaign.crash_retries)")
    if o.host_failures:
        parts.append(f"the host went down {o.host_failures} time(s) and was waited for")
    if o.guest_failures:
        parts.append(f"the test guest died {o.guest_failures} time(s) and was booted again")
    return f"{', '.join(parts)}; journal: {o.journal}"
