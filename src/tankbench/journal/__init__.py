"""The journal: one SQLite file per campaign, every run committed the moment it ends."""

from tankbench.journal.db import Journal

__all__ = ["Journal"]
