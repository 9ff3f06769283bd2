"""Bundles (issue 31): one file of a campaign's results that another machine opens; evidence that refuses edits;
anonymised so that nothing of the source machine is left in it."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import sqlite3
import zipfile
from pathlib import Path

import pytest

from tankbench.cli import main
from tankbench.errors import UserError
from tankbench.journal import bundle as B
from tankbench.journal.anonymise import Anonymiser, campaign_identifiers
from tests.conftest import FIXTURES

JOURNAL = FIXTURES / "journal-lab-zfs.sqlite"
GOLDEN = FIXTURES / "bundle-schema1.tankbench.zip"


def _bundle(tmp: Path, *extra: str, journal: Path = JOURNAL) -> Path:
    """`tankbench bundle JOURNAL -o tmp/b.tankbench.zip EXTRA` in this process (main() as the command runs it)."""
    out = tmp / "b.tankbench.zip"
    assert main(["bundle", str(journal), "-o", str(out), *extra]) == 0
    return out


@pytest.fixture(scope="module")
def good_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _bundle(tmp_path_factory.mktemp("good"))


def _rezip(src: Path, dest: Path, change: dict[str, bytes]) -> None:
    """A copy of the bundle with some members' bytes replaced (what an edit by hand does)."""
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(dest, "w") as w:
        for name in z.namelist():
            w.writestr(name, change.get(name, z.read(name)))


def test_bundle_holds_journal_campaign_fingerprints_and_report(good_bundle: Path) -> None:
    out = good_bundle
    manifest, members = B.read_manifest(str(out))
    assert manifest["format"] == "tankbench-bundle" and manifest["schema"] == B.SCHEMA
    assert manifest["tankbench"]["commit"] and manifest["runs"] == 36 and manifest["tests"] == 18
    assert manifest["campaigns"][0]["name"] == "report-lab-fixture"
    assert set(manifest["fingerprints"]) == {"aa638bd9d549885f"}
    assert {"journal.sqlite", "campaign.toml", "report/index.html", "report/summary.md"} <= set(members)
    assert members["campaign.toml"].decode().startswith("[campaign]") or b"[campaign]" in members["campaign.toml"]
    assert members["journal.sqlite"] == _sqlite_bytes_of_copy(members["journal.sqlite"])


def _sqlite_bytes_of_copy(data: bytes) -> bytes:
    assert data.startswith(b"SQLite format 3\x00")
    return data


@pytest.mark.parametrize("case", ["member-edited", "manifest-edited", "truncated", "newer-schema", "no-manifest"])
def test_bad_bundles_are_refused_and_nothing_is_written(
    tmp_path: Path, case: str, good_bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = good_bundle
    bad = tmp_path / "bad" / "x.tankbench.zip"
    bad.parent.mkdir()
    manifest, members = B.read_manifest(str(good))
    if case == "member-edited":
        con = tmp_path / "edit.sqlite"
        con.write_bytes(members["journal.sqlite"])
        with sqlite3.connect(con) as c:
            c.execute("UPDATE runs SET metrics = replace(metrics, '\"total.iops\": 3', '\"total.iops\": 9')")
        _rezip(good, bad, {"journal.sqlite": con.read_bytes()})
        expect = "bundle changed after it was written (journal.sqlite does not match"
    elif case == "manifest-edited":  # the member and its recorded hash changed together: the content hash tells
        data = members["campaign.toml"] + b"\n# edited\n"
        manifest["members"]["campaign.toml"]["sha256"] = B.sha256(data)
        _rezip(good, bad, {"campaign.toml": data, B.MANIFEST: json.dumps(manifest).encode()})
        expect = "the manifest does not match its content hash"
    elif case == "truncated":
        bad.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
        expect = "a damaged or truncated ZIP archive"
    elif case == "newer-schema":
        manifest["schema"] = B.SCHEMA + 1
        manifest["content_hash"] = B.content_hash(manifest)
        _rezip(good, bad, {B.MANIFEST: json.dumps(manifest).encode()})
        expect = f"bundle schema {B.SCHEMA + 1}, written by a newer tankbench"
    else:
        with zipfile.ZipFile(bad, "w") as z:
            z.writestr("notes.txt", "hello")
        expect = "not a usable tankbench bundle (no tankbench-bundle.json in the archive)"
    before = sorted(os.listdir(bad.parent))
    for argv in (["report", str(bad)], ["show", str(bad)], ["results", "--journal", str(bad)]):
        status = main(argv)  # in-process: the same main() the command runs, without a new interpreter each time
        err = capsys.readouterr().err
        assert status == 2, (argv, err)
        assert err.startswith("Error: ") and expect in err, err
    assert sorted(os.listdir(bad.parent)) == before


def test_golden_bundle_of_an_earlier_commit_still_opens(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bundle written by the commit that introduced bundles (schema 1) opens in every later one."""
    copy = tmp_path / GOLDEN.name
    shutil.copy(GOLDEN, copy)
    assert main(["report", str(copy), "--out", str(tmp_path / "r")]) == 0
    assert "18 tests, 36 runs" in capsys.readouterr().out
    summary = (tmp_path / "r" / "summary.md").read_text()
    assert "report-lab-fixture" in summary


def test_bundle_refuses_what_it_cannot_bundle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "x.tankbench.zip"
    out.write_text("mine")
    assert main(["bundle", str(JOURNAL), "-o", str(out)]) == 2
    assert "exists" in capsys.readouterr().err and out.read_text() == "mine"
    empty = tmp_path / "empty.sqlite"
    with sqlite3.connect(JOURNAL) as src, sqlite3.connect(empty) as dst:
        src.backup(dst)
        dst.execute("DELETE FROM runs")
    assert main(["bundle", str(empty), "-o", str(tmp_path / "e.tankbench.zip")]) == 2
    assert "no runs to bundle" in capsys.readouterr().err
    assert not (tmp_path / "e.tankbench.zip").exists()
    notj = tmp_path / "n.sqlite"
    notj.write_bytes(b"SQLite format 3\x00" + b"\0" * 100)
    assert main(["bundle", str(notj), "-o", str(tmp_path / "n.tankbench.zip")]) == 2
    assert capsys.readouterr().err.startswith("Error: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.sqlite", "n.sqlite", "x.tankbench.zip"]


# -- anonymising ----------------------------------------------------------------------------------------------
SECRETS = {
    "host": "pve-basement-07",
    "ssh_host": "nas.example.org",
    "user": "alice",
    "ip": "192.168.17.42",
    "ip6": "fd12:3456:789a::42",
    "mac": "52:54:00:ab:cd:ef",
    "serial": "WD-WCC4N7XKQ9AB",
    "wwn": "0x5000c500a1b2c3d4",
}


def _identifying_journal(tmp: Path) -> Path:
    """The lab fixture with a real machine's identifiers planted where tankbench records them."""
    j = tmp / "id.sqlite"
    with sqlite3.connect(JOURNAL) as src, sqlite3.connect(j) as dst:
        src.backup(dst)
        s = SECRETS
        fp = json.loads(dst.execute("SELECT data FROM fingerprints").fetchone()[0])
        fp.update(hostname=s["host"], host=f"ssh://{s['user']}@{s['ssh_host']}:22", disk_serials={"sda": s["serial"]})
        dst.execute("UPDATE fingerprints SET data = ?", (json.dumps(fp),))
        dst.execute("UPDATE runs SET host = ?", (f"ssh://{s['user']}@{s['ssh_host']}:22",))
        path = f"/dev/disk/by-id/ata-WDC_WD40EFRX-68N32N0_{s['serial']}"
        dst.execute(
            "UPDATE runs SET stderr_tail = ? WHERE id = 1",
            (f"fio: {path}: host {s['host']} ({s['ip']}, {s['ip6']}, {s['mac']}) wwn-{s['wwn']} /home/{s['user']}/x",),
        )
        text = dst.execute("SELECT spec_text FROM campaigns").fetchone()[0]
        text = text.replace("[campaign]", f"# run by {s['user']} on {s['host']}\n[campaign]", 1)
        text += f'\n# disk {path}\n# hosts = ["{s["user"]}@{s["ip"]}"]\n'
        dst.execute("UPDATE campaigns SET spec_text = ?", (text,))
        dst.execute("UPDATE tests SET fio_job = fio_job || ? WHERE number = 1", (f"\n# filename={path}\n",))
    return j


def _all_text(bundle: Path, raw: bool = True) -> bytes:
    """The bundle's bytes (raw), every member's bytes, and every member of the XLSX inside it."""
    parts = [bundle.read_bytes()] if raw else []
    with zipfile.ZipFile(bundle) as z:
        for name in z.namelist():
            data = z.read(name)
            if raw or not name.endswith(".xlsx"):  # an XLSX is itself compressed: any two letters by chance
                parts.append(data)
            if name.endswith(".xlsx"):
                with zipfile.ZipFile(__import__("io").BytesIO(data)) as x:
                    parts += [x.read(n) for n in x.namelist()]
    return b"\n".join(parts)


def test_anonymised_bundle_holds_no_identifier_of_the_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    out = _bundle(tmp_path, "--anonymise", journal=_identifying_journal(tmp_path))
    blob = _all_text(out)
    for value in SECRETS.values():
        assert value.encode() not in blob, value
        assert value.lower().encode() not in blob.lower(), value
    here = socket.gethostname()  # this machine's own name, as a whole name (it may be short, e.g. "vm")
    if here != "localhost":
        text = _all_text(out, raw=False)  # compressed bytes hold any two letters by chance
        assert not re.search(rb"(?<![A-Za-z0-9_-])" + re.escape(here.encode()) + rb"(?![A-Za-z0-9_-])", text), here
    manifest, members = B.read_manifest(str(out))
    assert manifest["anonymised"]["host"] >= 2 and manifest["anonymised"]["serial"] >= 1
    # the bundle still works: the campaign parses, the report opens
    __import__("tomllib").loads(members["campaign.toml"].decode())
    assert main(["report", str(out), "--out", str(tmp_path / "r")]) == 0


def test_anonymising_is_consistent_across_bundles_of_one_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    j = _identifying_journal(tmp_path)
    a, b, c = (tmp_path / f"{x}.tankbench.zip" for x in "abc")
    for out in (a, b):
        assert main(["bundle", str(j), "-o", str(out), "--anonymise"]) == 0
        assert "pve-basement-07 -> host-" in capsys.readouterr().out  # says what it changed, on the terminal only
    fa = B.read_manifest(str(a))[0]["fingerprints"]
    fb = B.read_manifest(str(b))[0]["fingerprints"]
    assert fa == fb and list(fa.values())[0]["hostname"].startswith("host-")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "other-user"))
    assert main(["bundle", str(j), "-o", str(c), "--anonymise"]) == 0
    fc = B.read_manifest(str(c))[0]["fingerprints"]
    assert list(fc.values())[0]["hostname"] != list(fa.values())[0]["hostname"]  # another user's key


def test_anonymiser_units() -> None:
    an = Anonymiser(b"k" * 32)
    an.add("host", "zfs")  # a host named like a word: JSON keys and longer names stay
    assert an.cell('{"zfs.dataset": "zfs", "x": "zfs_arc_max"}') == json.dumps(
        {"zfs.dataset": an.token("host", "zfs"), "x": "zfs_arc_max"}, separators=(",", ":")
    )
    assert (
        an.text("fio-3.33 on kernel 6.12.95 at 10.0.2.15")
        == f"fio-3.33 on kernel 6.12.95 at {an.token('address', '10.0.2.15')}"
    )
    assert an.text("127.0.0.1 and 12:34:56") == "127.0.0.1 and 12:34:56"
    assert an.text("/dev/disk/by-id/virtio-tbdata1") == "/dev/disk/by-id/virtio-tbdata1"
    toml = '[report]\nname = "zfs"  # zfs\n[zfs]\n'
    assert an.toml(toml) == f'[report]\nname = "{an.token("host", "zfs")}"  # {an.token("host", "zfs")}\n[zfs]\n'
    assert ("user", "bob") in campaign_identifiers('hosts = ["bob@10.0.0.2"]\n[host]\nuser = "bob"\n')


def test_a_bundle_whose_members_would_fill_memory_is_refused_before_reading(tmp_path: Path) -> None:
    """Each member is read into memory to be verified: three members declaring 2 GiB each (zeros compress 1000:1, so
    such a file is small) passed the per-member limit and would have taken 6 GiB. Refused from the directory."""
    import struct

    out = tmp_path / "big.tankbench.zip"
    with zipfile.ZipFile(out, "w") as z:
        for name in (B.MANIFEST, B.JOURNAL, "report/index.html"):
            z.writestr(name, b"x")
    data = bytearray(out.read_bytes())
    at = 0
    while (at := data.find(b"PK\x01\x02", at)) >= 0:  # each central directory entry: its uncompressed size
        struct.pack_into("<I", data, at + 24, 0x7FFFFFFF)
        at += 4
    out.write_bytes(bytes(data))
    with pytest.raises(UserError, match=r"3 members of 6442450941 bytes in all, more than a bundle holds"):
        B.read_manifest(str(out))
