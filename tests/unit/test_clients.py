"""A file target's `clients` (targets/clients.py): parsing, test ids, who counts as the server, the job a client
runs, and clients.md (analysis/sections/client_runs.py). The runs themselves: tests/integration/test_clients_run.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tankbench.analysis.analyse import analyse_dataset, load
from tankbench.campaign import expand
from tankbench.campaign.parse import parse_spec
from tankbench.errors import SpecError, UserError
from tankbench.fio.jobs import run_job_text
from tankbench.hosts.local import LocalHost
from tankbench.journal.clientruns import ClientRun, client_runs
from tankbench.journal.db import Journal
from tankbench.model import ClientHost, Run
from tankbench.reports.write import write_all
from tankbench.targets.clients import refuse_server_as_client, without_logs
from tests.reportdata import clients_markdown, local_journal

CAMPAIGN = """
[campaign]
name = "c"
runtime = "1s"
host = "local"

[[target]]
name = "load"
kind = "file"
path = "/srv/bench"
size = "8M"
{extra}

[matrix]
rw = ["read"]
bs = ["4k"]
"""


def spec(extra: str):
    return parse_spec(CAMPAIGN.format(extra=extra), "c.toml")


def test_clients_strings_and_tables():
    s = spec(
        'clients = ["root@10.0.0.2", "ssh:bench@host-b:2222", { address = "10.0.0.4", identity = "~/k", '
        'known_hosts = "/kh" }]\nclient_port = 9000'
    )
    t = s.targets[0]
    assert t.clients == (
        ClientHost("10.0.0.2"),
        ClientHost("host-b", user="bench", port=2222),
        ClientHost("10.0.0.4", identity="~/k", known_hosts="/kh"),
    )
    assert [c.name for c in t.clients] == ["ssh:root@10.0.0.2", "ssh:bench@host-b:2222", "ssh:root@10.0.0.4"]
    assert t.client_port == 9000
    six = spec('clients = ["root@[fd00::2]:2222", "fd00::3", "[fd00::4]"]').targets[0].clients
    assert [(c.address, c.port) for c in six] == [("fd00::2", 2222), ("fd00::3", 22), ("fd00::4", 22)]
    assert spec('clients = ["10.0.0.2"]').targets[0].client_port == 8765  # fio's own default


def test_clients_are_part_of_the_test_id_and_a_target_without_them_keeps_its_id():
    plain = expand(spec(""))[0]
    assert "clients" not in plain.target.canonical()
    one = expand(spec('clients = ["10.0.0.2"]'))[0]
    other = expand(spec('clients = ["10.0.0.3"]'))[0]
    port = expand(spec('clients = ["10.0.0.2"]\nclient_port = 9000'))[0]
    assert len({plain.id, one.id, other.id}) == 3
    assert port.id == one.id  # how we reach the clients is not what is measured


@pytest.mark.parametrize(
    "extra,key",
    [
        ('clients = ["10.0.0.2", "root@10.0.0.2"]', "target[0].clients[1]"),
        ('clients = ["lab"]', "target[0].clients[0]"),
        ('clients = ["10.0.0.2:0"]', "target[0].clients[0]"),
        ('clients = ["[fd00::2]x"]', "target[0].clients[0]"),
        ('clients = ["a b"]', "target[0].clients[0]"),
        ("clients = []", "target[0].clients"),
        ('clients = "10.0.0.2"', "target[0].clients"),
        ("clients = [3]", "target[0].clients[0]"),
        ('clients = [{ user = "root" }]', "target[0].clients[0].address"),
        ('clients = [{ address = "10.0.0.2", port = 70000 }]', "target[0].clients[0].port"),
        ("client_port = 9000", "target[0].client_port"),
        ('clients = ["10.0.0.2"]\nclient_port = 22', "target[0].client_port"),
    ],
)
def test_bad_clients(extra: str, key: str):
    with pytest.raises(SpecError) as e:
        spec(extra)
    assert key in str(e.value) and e.value.hint


def test_a_key_of_another_kind_is_refused():
    text = CAMPAIGN.format(extra='clients = ["10.0.0.2"]').replace('kind = "file"', 'kind = "dataset"')
    text = text.replace('path = "/srv/bench"\n', "") + '\n[pool]\nname = "tank"\nvdevs = ["/dev/disk/by-id/x"]\n'
    with pytest.raises(SpecError, match="a dataset target does not take clients"):
        parse_spec(text, "c.toml")


def _where(j: int) -> str:
    return f"c.toml: target[0].clients[{j}]"


def test_a_client_that_is_the_local_host_is_refused():
    for address in ("127.0.0.1", "127.0.0.2", "localhost"):
        with pytest.raises(UserError, match="is the campaign's host"):
            refuse_server_as_client(_where, LocalHost(), (ClientHost("192.0.2.7"), ClientHost(address)))
    refuse_server_as_client(_where, LocalHost(), (ClientHost("192.0.2.7"),))  # TEST-NET: not this machine


def test_the_job_a_client_runs_has_no_iops_logs():
    s = parse_spec(
        CAMPAIGN.format(extra='clients = ["10.0.0.2"]')
        .replace('rw = ["read"]', 'rw = ["write"]\nsize = ["4M"]')
        .replace('runtime = "1s"', 'mode = "size"')
        + "\n[fio]\nend_fsync = 1\n",
        "c.toml",
    )
    text = run_job_text(expand(s)[0])
    assert "write_iops_log=" in text  # the runner's job (size-based, ends with an fsync)
    stripped = without_logs(text)
    assert "log" not in stripped.replace("filename", "")
    assert [line for line in text.splitlines() if "log" not in line] == stripped.splitlines()


def _run(row: int, test_id: str, checks: dict, status: str = "done") -> Run:
    return Run(
        test_id=test_id,
        run_no=row,
        warmup=False,
        attempt=1,
        status=status,
        started=1.0,
        ended=2.0,
        host="local",
        expected_s=1.0,
        checks=checks,
    )


def test_clients_md_from_the_journal(tmp_path: Path):
    s = spec('clients = ["10.0.0.2", "10.0.0.3"]')
    tests = expand(s)
    per = {
        "ssh:root@10.0.0.2": {"read_bw_bytes": 2 * 1048576.0, "write_bw_bytes": 0.0, "read_iops": 32.0},
        "ssh:root@10.0.0.3": {"read_bw_bytes": 1048576.0, "write_bw_bytes": 0.0, "read_iops": 16.0},
    }
    total = {"read_bw_bytes": 3 * 1048576.0, "write_bw_bytes": 0.0, "read_iops": 48.0}
    j = Journal(str(tmp_path / "j.sqlite"))
    try:
        j.add_campaign(s.campaign_id, s.name, "c.toml", "")
        j.add_tests(s.campaign_id, tests, {t.id: "" for t in tests})
        for n, (checks, status) in enumerate(
            [
                ({"clients.results": per, "clients.total": total}, "done"),
                ({"clients.results": per}, "failed"),
                ({}, "done"),
            ],
            start=1,
        ):
            row = j.begin_run(tests[0].id, n, False, 1, 1.0, "local")
            j.finish_run(row, _run(n, tests[0].id, checks, status))
        runs = client_runs(j)
        assert runs == [ClientRun(1, tests[0].name, 1, "local", per, total)]  # done runs with clients only
        paths = write_all(analyse_dataset(load(j), journal=j), str(tmp_path / "report"))
    finally:
        j.close()
    md = Path(next(p for p in paths if p.endswith("/clients.md"))).read_text()
    assert md == clients_markdown(runs)
    row = next(line for line in md.splitlines() if line.startswith("| 1 |"))
    assert row == ("| 1 | local | 2.00 MiB/s (32.0 IOPS) | 1.00 MiB/s (16.0 IOPS) | 3.00 MiB/s (48.0 IOPS) | 0.50 |")


def test_no_clients_md_without_client_runs(tmp_path: Path):
    with Journal.open_readonly(local_journal(tmp_path)) as j:
        paths = write_all(analyse_dataset(load(j), journal=j), str(tmp_path / "report"))
    assert len(paths) == 5 and not (tmp_path / "report" / "clients.md").exists()


def test_a_copy_include_on_a_client_target_is_refused_and_on_another_target_not():
    text = CAMPAIGN.format(extra='clients = ["10.0.0.2"]') + '\n[[include]]\ntarget = "load"\nworkload = "cp"\n'
    with pytest.raises(SpecError, match=r"include\[0\].workload = 'cp': target 'load' has clients"):
        parse_spec(text, "c.toml")
    other = '[[target]]\nname = "local"\nkind = "file"\npath = "/srv/x"\nsize = "8M"\n\n'
    fine = text.replace('target = "load"', 'target = "local"').replace("[matrix]", other + "[matrix]")
    assert len(parse_spec(fine, "c.toml").includes) == 1


def test_targets_sharing_a_client_share_the_whole_set_or_use_another_port():
    second = '[[target]]\nname = "two"\nkind = "file"\npath = "/srv/b"\nsize = "8M"\n'
    text = CAMPAIGN.format(extra='clients = ["10.0.0.2", "10.0.0.3"]')
    same = text.replace("[matrix]", second + 'clients = ["10.0.0.2", "10.0.0.3"]\n\n[matrix]')
    assert len(parse_spec(same, "c.toml").targets) == 2
    other_port = text.replace("[matrix]", second + 'clients = ["10.0.0.3"]\nclient_port = 9000\n\n[matrix]')
    assert len(parse_spec(other_port, "c.toml").targets) == 2
    overlap = text.replace("[matrix]", second + 'clients = ["10.0.0.3"]\n\n[matrix]')
    with pytest.raises(SpecError, match=r"target\[1\].clients = \['ssh:root@10.0.0.3'\]: shares client"):
        parse_spec(overlap, "c.toml")


def test_the_main_report_summarises_client_runs_per_test():
    from tankbench.analysis.clients import client_rows

    a = {"read_bw_bytes": 3 * 1048576.0, "read_iops": 48.0}
    b = {"read_bw_bytes": 1 * 1048576.0, "read_iops": 16.0}
    net = {"net.limit": "disks", "net.why": "eth0 moved 4 MiB/s: 3 % of 1000 Mb/s"}
    runs = [
        ClientRun(2, "share-read", 1, "h", {"a": a, "b": b}, {}, net),
        ClientRun(2, "share-read", 2, "h", {"a": b, "b": b}, {"read_bw_bytes": 2 * 1048576.0}, {}),
        ClientRun(5, "load-write", 1, "h", {"x": {"write_bw_bytes": 1048576.0}}, {}),
    ]
    first, second = client_rows(runs)
    assert (first.test_number, first.direction, first.runs) == (2, "read", 2)
    assert first.clients == (("a", 2.0), ("b", 1.0))  # means over the runs: (3 + 1) / 2 and (1 + 1) / 2
    assert first.total_mibs == 3.0  # run 1: the clients' sum (4), run 2: fio's aggregate (2)
    assert first.even == 0.5 and first.limit == "disks" and "3 % of 1000" in first.why
    assert (second.direction, second.clients, second.even, second.limit) == ("write", (("x", 1.0),), 1.0, "")
    assert first.as_dict()["clients_mibs"] == {"a": 2.0, "b": 1.0}
