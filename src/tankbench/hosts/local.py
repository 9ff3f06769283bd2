"""The machine tankbench runs on."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from tankbench.hosts.base import Host


class LocalHost(Host):
    """Commands run as subprocesses here; the agent runs with this Python (fed through stdin, see base)."""

    name = "local"
    python = sys.executable or "python3"

    def command(self, argv: Sequence[str]) -> list[str]:
        return list(argv)
