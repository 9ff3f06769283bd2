"""Anonymising a copy of a journal for a bundle (`tankbench bundle --anonymise`, docs/bundle.md).

What is replaced: host names (the machine running tankbench and every benchmarked host the journal names), user
names, IPv4/IPv6 and MAC addresses, disk serials and WWNs (the source machine's own, and any `/dev/disk/by-id/`
name), each by a token such as `host-3fa29c1e`. A token is an HMAC of the value under a key kept in the user's
configuration directory, so the same serial maps to the same token in every bundle one user writes, and nobody
without the key can recover it. JSON cells are rewritten value by value (never a key), other text cells as text;
the copy is then rebuilt with VACUUM INTO so no old page keeps an original.
"""

from __future__ import annotations

import getpass
import hashlib
import hmac
import ipaddress
import json
import os
import pwd
import re
import socket
import sqlite3
import subprocess
import tomllib
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

#: kinds of identifier, in the order a summary names them
KINDS = ("host", "user", "address", "mac", "serial", "wwn", "disk")
#: values never replaced: they name no machine or person
_KEEP = {"localhost", "local", "lab", "root", "none", "unknown", "nobody", "tankbench", "debian", "ubuntu"}
_LOOPBACK = {"127.0.0.1", "0.0.0.0", "::1", "::"}
_B = r"(?<![A-Za-z0-9_-])"  # an identifier's left edge: not inside a longer name
_E = r"(?![A-Za-z0-9_-])"
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")
_IPV6 = re.compile(r"(?<![0-9A-Fa-f:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?:%\w+)?(?![0-9A-Fa-f:])")
_MAC = re.compile(r"(?<![0-9A-Fa-f:])(?:[0-9A-Fa-f]{2}:){5}[0-9A-Fa-f]{2}(?![0-9A-Fa-f:])")
#: a /dev/disk/by-id name: its bus prefix is kept (ata-, nvme-, wwn-, …), the rest (model, serial) replaced;
#: the lab's own disks (virtio-tb…) name nothing real and stay
_BY_ID = re.compile(r"(?<=/dev/disk/by-id/)([a-z0-9]+)-(?!tb)([A-Za-z0-9_.:+@-]+?)(?=-part\d+\b|[\s\"'/,;)\]]|$)")
#: a World Wide Name or an NVMe EUI/NGUID wherever it stands (wwn-0x…, naa.…, eui.…)
_WWN = re.compile(
    r"(?<![A-Za-z0-9])(?:0x[0-9a-fA-F]{16}(?:[0-9a-fA-F]{16})?|(?:naa|eui|nguid)\.[0-9a-fA-F]{16,32})(?![0-9a-fA-F])"
)
_USER_AT = re.compile(_B + r"([a-z_][a-z0-9_.-]{0,31})@(?=[A-Za-z0-9\[])")
#: a TOML string (basic or literal, one line) or a comment: what a campaign file's identifiers stand in
_TOML_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*')
_HOME = re.compile(r"/home/([A-Za-z0-9_.-]+)")
_ROOT_HOME = re.compile(r"(?<![A-Za-z0-9_.-])/root(?=/|\b)")


def key_path() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "tankbench", "anonymise.key")


def user_key() -> bytes:
    """This user's anonymisation key (32 random bytes, created 0600 on first use)."""
    path = key_path()
    try:
        with open(path, "rb") as f:
            key = f.read()
        if len(key) >= 16:
            return key
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    key = os.urandom(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key)
    return key


class Anonymiser:
    """Replaces identifiers by keyed tokens; `seen` counts what it replaced, by kind."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        self.exact: dict[str, tuple[str, str]] = {}  # value -> (kind, token)
        self.seen: dict[str, dict[str, str]] = {k: {} for k in KINDS}  # kind -> {original: token}
        self._pattern: re.Pattern[str] | None = None

    def token(self, kind: str, value: str) -> str:
        digest = hmac.new(self.key, f"{kind}:{value}".encode(), hashlib.sha256).hexdigest()
        return f"{kind}-{digest[:8]}"

    def add(self, kind: str, value: str) -> None:
        """Replace `value` wherever it stands as a whole name (not part of a longer one)."""
        value = value.strip()
        if (
            len(value) < (2 if kind == "host" else 3)
            or value.lower() in _KEEP
            or value in _LOOPBACK
            or value in self.exact
        ):
            return
        self.exact[value] = (kind, self.token(kind, value))
        self._pattern = None

    def _record(self, kind: str, value: str) -> str:
        tok = self.token(kind, value)
        self.seen[kind][value] = tok
        return tok

    def text(self, s: str) -> str:
        """`s` with every identifier replaced."""
        if not s:
            return s
        s = _BY_ID.sub(self._by_id, s)
        s = _HOME.sub(lambda m: f"/home/{self._user(m.group(1))}", s)
        s = _ROOT_HOME.sub(lambda m: f"/home/{self._record('user', 'root')}", s)
        s = _USER_AT.sub(lambda m: f"{self._user(m.group(1))}@", s)
        if self.exact:
            if self._pattern is None:
                names = sorted(self.exact, key=len, reverse=True)
                self._pattern = re.compile(_B + "(" + "|".join(re.escape(n) for n in names) + ")" + _E)
            s = self._pattern.sub(self._exact, s)
        s = _WWN.sub(lambda m: self._record("wwn", m.group(0)), s)
        s = _MAC.sub(lambda m: self._addr("mac", m.group(0)), s)
        s = _IPV4.sub(lambda m: self._addr("address", m.group(0)), s)
        return _IPV6.sub(lambda m: self._addr("address", m.group(0)), s)

    def _by_id(self, m: re.Match[str]) -> str:
        name, tail = m.group(0), ""
        if name.endswith(":"):  # a colon after the name (`…_SERIAL: error`), not part of it
            name, tail = name[:-1], ":"
        return f"{m.group(1)}-{self._record('disk', name)}{tail}"

    def discover(self, s: str) -> None:
        """Learn the identifiers that patterns find in `s` (users before @ or under /home, the serial at the end
        of a by-id name) so that they are replaced wherever else they stand, e.g. in a comment."""
        for m in _USER_AT.finditer(s):
            if m.group(1).lower() not in _KEEP:
                self.add("user", m.group(1))
        for m in _HOME.finditer(s):
            self.add("user", m.group(1))
        for m in _BY_ID.finditer(s):
            name = m.group(2).rstrip(":")
            if "_" in name and m.group(1) in ("ata", "scsi", "usb", "nvme", "mmc", "ieee1394"):
                self.add("serial", name.rsplit("_", 1)[1])
            elif m.group(1) == "wwn":
                self.add("wwn", name)

    def _exact(self, m: re.Match[str]) -> str:
        kind, _ = self.exact[m.group(1)]
        return self._record(kind, m.group(1))

    def _user(self, name: str) -> str:
        return name if name.lower() in _KEEP - {"root"} else self._record("user", name)

    def _addr(self, kind: str, value: str) -> str:
        if kind == "address":
            try:
                ip = ipaddress.ip_address(value.split("%")[0])
            except ValueError:
                return value  # a version number or a time, not an address
            if ip.is_loopback or ip.is_unspecified:
                return value
        return self._record(kind, value)

    def value(self, v: Any) -> Any:
        """A JSON value with every string replaced (keys too where they are identifiers, e.g. host names)."""
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, dict):
            return {self._key(k): self.value(x) for k, x in v.items()}
        return v

    def _key(self, k: str) -> str:
        """A JSON key is replaced only when it is itself an identifier (a host's name keying a dict)."""
        return self._record(self.exact[k][0], k) if k in self.exact else k

    def cell(self, s: str) -> str:
        """A journal cell: JSON rewritten value by value (same JSON, other strings), other text as text."""
        stripped = s.lstrip()
        if stripped[:1] in ("{", "["):
            try:
                doc = json.loads(s)
            except ValueError:
                return self.text(s)
            new = self.value(doc)
            return s if new == doc else json.dumps(new, separators=(",", ":"), ensure_ascii=False)
        return self.text(s)

    def toml(self, text: str) -> str:
        """A campaign file: only its string values and comments are rewritten, so keys and tables stay and the
        file still parses."""
        return _TOML_STRING.sub(lambda m: self.text(m.group(0)), text)

    def summary(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.seen.items() if v}


# -- what to replace -----------------------------------------------------------------------------------------
def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return ""


def local_identifiers() -> list[tuple[str, str]]:
    """The machine running tankbench: its host names, users, addresses, MACs, disk serials and WWNs."""
    found: list[tuple[str, str]] = [("host", socket.gethostname()), ("host", socket.getfqdn())]
    for name in (getpass.getuser(), os.environ.get("SUDO_USER", ""), os.environ.get("LOGNAME", "")):
        found.append(("user", name))
    try:
        found.append(("user", pwd.getpwuid(os.getuid()).pw_name))
    except KeyError:
        pass
    found += [("address", a) for a in _local_addresses()]
    for dev in _listdir("/sys/class/net"):
        mac = _read(f"/sys/class/net/{dev}/address")
        if mac and mac != "00:00:00:00:00:00":
            found.append(("mac", mac))
    for dev in _listdir("/sys/block"):
        for f, kind in (("device/serial", "serial"), ("serial", "serial"), ("device/wwid", "wwn"), ("wwid", "wwn")):
            v = _read(f"/sys/block/{dev}/{f}")
            if v:
                found.append((kind, v))
    return found


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _local_addresses() -> list[str]:
    try:
        out = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [m.group(1) for m in re.finditer(r"\binet6? ([0-9a-fA-F.:]+)/", out)]


def journal_identifiers(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """Host names and addresses the journal itself names: fingerprints, the hosts table, the runs' hosts."""
    found: list[tuple[str, str]] = []
    for (data,) in conn.execute("SELECT data FROM fingerprints"):
        fp = json.loads(data)
        found.append(("host", str(fp.get("hostname", ""))))
        found += _host_label(str(fp.get("host", "")))
        found += _keyed(fp)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "hosts" in tables:
        for name, address in conn.execute("SELECT name, address FROM hosts"):
            found += _host_label(str(name)) + _host_label(str(address))
    for (host,) in conn.execute("SELECT DISTINCT host FROM runs"):
        found += _host_label(str(host or ""))
    for (text,) in conn.execute("SELECT spec_text FROM campaigns"):
        found += campaign_identifiers(text or "")
    return found


def campaign_identifiers(text: str) -> list[tuple[str, str]]:
    """Users and hosts a campaign file names: [host] user/address, hosts = [...], clients = [...]."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return []
    found: list[tuple[str, str]] = []

    def walk(v: Any, key: str) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, k)
        elif isinstance(v, list):
            for x in v:
                walk(x, key)
        elif isinstance(v, str):
            if key == "user":
                found.append(("user", v))
            elif key in ("address", "hosts", "clients", "host", "hostname", "server"):
                found.extend(_host_label(v))
                if "@" in v:
                    found.append(("user", v.removeprefix("ssh://").split("@", 1)[0]))

    walk(doc, "")
    return found


def _keyed(v: Any, key: str = "") -> list[tuple[str, str]]:
    """Values under keys that name serials or WWNs, at any depth of a fingerprint."""
    if isinstance(v, dict):
        return [x for k, item in v.items() for x in _keyed(item, str(k) if not key else key)]
    if isinstance(v, list):
        return [x for item in v for x in _keyed(item, key)]
    if isinstance(v, str) and ("serial" in key or "wwn" in key):
        return [("wwn" if "wwn" in key else "serial", v)]
    return []


def _host_label(label: str) -> list[tuple[str, str]]:
    """`ssh://user@addr:port`, `user@addr`, `lab:NAME`, `addr` -> the host name or address in it."""
    label = label.removeprefix("ssh://").strip()
    if not label or label == "local":
        return []
    if label.startswith("lab:"):
        return []  # a lab VM's name on this machine (its host name is the fingerprint's)
    host = label.rsplit("@", 1)[-1]
    host = (
        host[1:].split("]", 1)[0] if host.startswith("[") else host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    )
    try:
        ipaddress.ip_address(host)
        return []  # addresses are found by pattern wherever they stand
    except ValueError:
        return [("host", host)]


# -- the journal copy -----------------------------------------------------------------------------------------
def anonymise_journal(src: str, dest: str, anon: Anonymiser, extra: Iterable[tuple[str, str]] = ()) -> None:
    """Write an anonymised copy of the journal `src` (read, never changed) to `dest` (must not exist)."""
    work = dest + ".work"
    with sqlite3.connect(f"file:{src}?mode=ro", uri=True) as s, sqlite3.connect(work) as w:
        s.backup(w)
    conn = sqlite3.connect(work, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=DELETE")
        for kind, value in [*local_identifiers(), *journal_identifiers(conn), *extra]:
            anon.add(kind, value)
        for table in [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]:
            _scan_table(conn, table, anon.discover)
        conn.execute("BEGIN")
        for table in [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]:
            _rewrite_table(conn, table, anon.cell, {"spec_text": anon.toml} if table == "campaigns" else {})
        conn.execute("COMMIT")
        conn.execute("VACUUM INTO ?", (dest,))
    finally:
        conn.close()
        os.unlink(work)


def _scan_table(conn: sqlite3.Connection, table: str, fn: Callable[[str], None]) -> None:
    for row in conn.execute(f'SELECT * FROM "{table}"'):
        for v in row:
            if isinstance(v, str):
                fn(v)


def _rewrite_table(
    conn: sqlite3.Connection, table: str, fn: Callable[[str], str], by_column: dict[str, Callable[[str], str]]
) -> None:
    cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
    rows = conn.execute(f'SELECT rowid, {", ".join(chr(34) + c + chr(34) for c in cols)} FROM "{table}"').fetchall()
    for row in rows:
        changes = {}
        for c, v in zip(cols, row[1:]):
            new = by_column.get(c, fn)(v) if isinstance(v, str) else v
            if new != v:
                changes[c] = new
        if changes:
            sets = ", ".join(f'"{c}" = ?' for c in changes)
            conn.execute(f'UPDATE "{table}" SET {sets} WHERE rowid = ?', (*changes.values(), row[0]))


def describe(anon: Anonymiser) -> list[str]:
    """What was replaced, for the terminal (originals shown: they never leave this machine)."""
    lines = []
    counts = Counter({k: len(v) for k, v in anon.seen.items()})
    for kind in KINDS:
        if counts[kind]:
            pairs = ", ".join(f"{o} -> {t}" for o, t in sorted(anon.seen[kind].items())[:6])
            more = f", … ({counts[kind] - 6} more)" if counts[kind] > 6 else ""
            lines.append(f"  {kind}: {counts[kind]} ({pairs}{more})")
    return lines
