"""SshHost argv construction: quoting for the remote shell, control sockets, options."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from tankbench.hosts.ssh import SshHost, control_path


def test_command_quotes_argv_for_the_remote_shell(short_tmp: Path) -> None:
    host = SshHost("10.0.0.5", user="root", port=2222, identity="/k/id", control_dir=short_tmp)
    argv = ["sh", "-c", "echo $HOME; rm -rf /", "a b", "it's", ""]
    cmd = host.command(argv)
    assert cmd[0] == "ssh"
    assert cmd[-3:-1] == ["--", "root@10.0.0.5"]
    # the remote shell splits the last word back into exactly the argv we gave
    assert shlex.split(cmd[-1]) == argv


def test_options_batchmode_controlmaster_port_identity(short_tmp: Path) -> None:
    host = SshHost(
        "example.org",
        user="bench",
        port=2200,
        identity="/k/id",
        known_hosts="/k/known",
        control_dir=short_tmp,
        connect_timeout=7,
    )
    opts = host.ssh_options()
    joined = " ".join(opts)
    for expected in (
        "BatchMode=yes",
        "ConnectTimeout=7",
        "ControlMaster=auto",
        "ControlPersist=",
        f"ControlPath={short_tmp}/cm-",
        "-p 2200",
        "-i /k/id",
        "UserKnownHostsFile=/k/known",
        "IdentitiesOnly=yes",
    ):
        assert expected in joined
    assert "StrictHostKeyChecking=no" not in joined
    assert host.name == "ssh:bench@example.org:2200"


def test_strict_host_keys_can_be_turned_off_explicitly(short_tmp: Path) -> None:
    host = SshHost("h", strict_host_keys=False, control_dir=short_tmp)
    assert "StrictHostKeyChecking=no" in host.ssh_options()
    assert "-p" not in host.ssh_options()  # port 22 is ssh's default


def test_control_path_is_short_and_per_target(short_tmp: Path) -> None:
    a = control_path("root@h", 22, short_tmp)
    b = control_path("root@h", 23, short_tmp)
    assert a != b and a.startswith(str(short_tmp))
    deep = short_tmp / ("x" * 120)
    c = control_path("root@h", 22, deep)
    assert len(c) <= 90 and not c.startswith(str(deep))


def test_shell_command_and_interactive(short_tmp: Path) -> None:
    host = SshHost("h", control_dir=short_tmp)
    assert shlex.split(host.shell_command("zpool list | head")[-1]) == ["sh", "-c", "zpool list | head"]
    assert host.interactive_command()[:2] == ["ssh", "-t"]
    assert host.interactive_command()[-1] == "root@h"


def test_a_user_or_address_beginning_with_a_dash_is_never_an_ssh_option(short_tmp: Path) -> None:
    """A campaign's `user = "-oProxyCommand=touch FILE"` once reached ssh as an option and ran a local command (the
    target came before `--`). Real ssh, no network: TEST-NET-1 and a 2 s connect timeout; the file never appears."""
    pwned = short_tmp / "pwned"
    for user, address in ((f"-oProxyCommand=touch {pwned}", "192.0.2.1"), ("root", f"-oProxyCommand=touch {pwned}")):
        host = SshHost(address, user=user, control_dir=short_tmp, connect_timeout=2)
        for argv in (host.command(["true"]), host.interactive_command(["true"])):
            subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, timeout=30)
            assert not list(short_tmp.glob("pwned*")), argv  # ProxyCommand would touch "pwned@192.0.2.1"
