"""The machine tankbench runs on."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from tankbench.hosts.base import Host, agent_digest, agent_source


class LocalHost(Host):
    """Commands run as subprocesses here; the agent runs with this Python."""

    name = "local"
    python = sys.executable or "python3"

    def command(self, argv: Sequence[str]) -> list[str]:
        return list(argv)

    def agent_path(self) -> str:
        path = f"/var/tmp/tankbench-agent-{agent_digest()}.py"
        if not os.path.exists(path):
            tmp = f"{path}.{os.getpid()}"
            with open(tmp, "wb") as f:
                f.write(agent_source())
            os.replace(tmp, path)
        return path
