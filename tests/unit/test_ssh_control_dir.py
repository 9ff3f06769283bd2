"""ssh's control sockets live in a directory only we can change (a planted socket would impersonate the host)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tankbench.errors import HostError
from tankbench.hosts.ssh import control_path


def test_a_new_control_dir_is_0700(short_tmp: Path) -> None:
    path = control_path("root@h", 22, short_tmp / "cm")
    assert stat.S_IMODE(os.stat(short_tmp / "cm").st_mode) == 0o700 and path.startswith(str(short_tmp / "cm"))


def test_our_own_open_control_dir_is_tightened(short_tmp: Path) -> None:
    d = short_tmp / "cm"
    d.mkdir()
    os.chmod(d, 0o777)
    control_path("root@h", 22, d)
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700


def test_a_control_dir_of_another_user_is_refused(short_tmp: Path) -> None:
    d = short_tmp / "cm"
    d.mkdir(mode=0o777)
    os.chown(d, 65534, 65534)  # what another local user's `mkdir /tmp/tankbench-ssh-0` leaves
    with pytest.raises(HostError, match="not a directory of uid"):
        control_path("root@h", 22, d)


def test_a_symlinked_control_dir_is_refused(short_tmp: Path) -> None:
    (short_tmp / "real").mkdir(mode=0o700)
    (short_tmp / "cm").symlink_to(short_tmp / "real")
    with pytest.raises(HostError, match="not a directory of uid"):
        control_path("root@h", 22, short_tmp / "cm")
