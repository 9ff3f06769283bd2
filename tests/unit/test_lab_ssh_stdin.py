"""`lab ssh` with no command and stdin closed refuses as for a pipe, without a traceback (QA F9)."""

from __future__ import annotations

import argparse
import sys

import pytest

from tankbench.errors import UserError


def test_lab_ssh_without_a_command_and_with_stdin_closed_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    from tankbench.cli import lab as cli_lab

    monkeypatch.setattr(cli_lab.vm, "require_up", lambda name: object())
    monkeypatch.setattr(cli_lab.vm, "ssh_host", lambda state: object())
    monkeypatch.setattr(sys, "stdin", None)  # what `tankbench lab ssh <&-` has
    with pytest.raises(UserError, match="no command given and stdin is not a terminal"):
        cli_lab.cmd_ssh(argparse.Namespace(name="lab", cmd=[]))
