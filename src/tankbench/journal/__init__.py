"""The journal: one SQLite file per campaign, every run committed the moment it ends."""

from tankbench.journal.db import Journal, host_crash_count, stale_run_status

__all__ = ["Journal", "host_crash_count", "stale_run_status"]
