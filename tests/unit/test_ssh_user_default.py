"""One default user for every ssh host entry (issue 34 item 6): a `[host]` without `user` logged in as the local user
while `hosts` and `clients` entries logged in as root. Every entry is root unless it names a user (README)."""

from __future__ import annotations

from pathlib import Path

from tankbench.campaign import parse_spec
from tankbench.cli._campaign import host_option
from tankbench.targets.clients import client_options

BASE = """
[campaign]
name = "u"
runtime = "1s"
{campaign}

{host}

[[target]]
name = "t"
kind = "file"
path = "/srv/bench"
size = "1M"
{clients}

[matrix]
rw = ["read"]
bs = ["4k"]
"""


def spec(tmp_path: Path, campaign: str = "", host: str = "", clients: str = ""):  # type: ignore[no-untyped-def]
    path = tmp_path / "c.toml"
    path.write_text(BASE.format(campaign=campaign, host=host, clients=clients))
    return parse_spec(path.read_text(), str(path))


def test_every_ssh_host_entry_defaults_to_root(tmp_path: Path) -> None:
    single = spec(tmp_path, host='[host]\nkind = "ssh"\naddress = "10.0.0.2"')
    assert single.host.user == "root"
    fleet = spec(tmp_path, campaign='hosts = ["10.0.0.2", { address = "10.0.0.3" }]\nhosts_mode = "split"')
    assert fleet.fleet is not None and [h.user for h in fleet.fleet.hosts] == ["root", "root"]
    clients = spec(tmp_path, host='[host]\nkind = "local"', clients='clients = ["10.0.0.4", { address = "10.0.0.5" }]')
    assert [c.user for c in client_options(clients.targets[0]).clients] == ["root", "root"]
    table, _, _ = host_option("ssh://10.0.0.2")
    assert table is not None and "user" not in table  # so it is read as a [host] table without user: root


def test_a_named_user_is_kept_everywhere(tmp_path: Path) -> None:
    single = spec(tmp_path, host='[host]\nkind = "ssh"\naddress = "10.0.0.2"\nuser = "bench"')
    assert single.host.user == "bench"
    fleet = spec(tmp_path, campaign='hosts = ["bench@10.0.0.2", "10.0.0.3"]\nhosts_mode = "each"')
    assert fleet.fleet is not None and [h.user for h in fleet.fleet.hosts] == ["bench", "root"]
