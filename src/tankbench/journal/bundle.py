"""A bundle: one self-contained file of a campaign's results that another machine can open (docs/bundle.md).

A bundle is a ZIP archive (any unzip tool lists it) with a manifest, `tankbench-bundle.json`, that names the
format and its schema version, the tankbench that wrote it (version, commit), the campaign, every host's
fingerprint, whether it was anonymised, and each member's SHA-256. Its `content_hash` is the SHA-256 of the
manifest's canonical JSON without that field, so a member changed by hand, or a manifest edited to match, no
longer matches: `read_bundle` refuses it. Reading never writes beside the bundle: the journal is checked, then
copied to a private temporary directory that is removed when the process ends.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import tempfile
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tankbench.errors import UserError

FORMAT = "tankbench-bundle"
#: bump when a member or manifest key changes meaning or goes away; readers refuse a newer schema
SCHEMA = 1
MANIFEST = "tankbench-bundle.json"
JOURNAL = "journal.sqlite"
CAMPAIGN = "campaign.toml"
REPORT_DIR = "report/"
SUFFIX = ".tankbench.zip"
#: a bundle larger than this is refused before anything is read (a journal of 100,000 runs is ~200 MB)
MAX_MEMBER_BYTES = 4 << 30
#: a bundle's report has a dozen files; a fleet's, one directory per host
MAX_MEMBERS = 10_000
_ZIP_MAGIC = b"PK\x03\x04"
_HINT = "pass a file that `tankbench bundle` wrote (NAME.tankbench.zip), or a journal (.sqlite)"


@dataclass(frozen=True)
class OpenedBundle:
    """A verified bundle: its manifest, and the journal copied out of it (read it with Journal.open_readonly)."""

    path: str
    manifest: Mapping[str, Any]
    journal_path: str

    @property
    def campaign_text(self) -> str:
        return str(self.manifest.get("campaign", {}).get("text", ""))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def content_hash(manifest: Mapping[str, Any]) -> str:
    """The SHA-256 of the manifest's canonical JSON (sorted keys, no whitespace) without `content_hash`."""
    body = {k: v for k, v in manifest.items() if k != "content_hash"}
    return sha256(json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode())


def looks_like_bundle(path: str) -> bool:
    """A ZIP file (by its first bytes): what `report`, `show`, `results` and `compare` treat as a bundle."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == _ZIP_MAGIC
    except OSError:
        return False


def write_bundle(path: str, manifest: dict[str, Any], members: Mapping[str, bytes]) -> dict[str, Any]:
    """Write `members` and the manifest (members' hashes and the content hash filled in) to `path` atomically:
    a temporary file beside it, renamed into place once complete. Returns the manifest as written."""
    manifest = dict(manifest, format=FORMAT, schema=SCHEMA)
    manifest["members"] = {name: {"sha256": sha256(data), "bytes": len(data)} for name, data in sorted(members.items())}
    manifest["content_hash"] = content_hash(manifest)
    text = json.dumps(manifest, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as z:
            z.writestr(_info(MANIFEST), text)
            for name, data in sorted(members.items()):
                z.writestr(_info(name), data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return manifest


def _info(name: str) -> zipfile.ZipInfo:
    """A member with a fixed time and mode: two bundles of the same content differ only in the manifest."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    return info


def _bad(path: str, why: str, hint: str = _HINT) -> UserError:
    return UserError(f"{path}: not a usable tankbench bundle ({why})", hint)


def read_manifest(path: str) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The manifest and members of the bundle at `path`, verified (format, schema, every member's hash, the
    content hash); UserError naming what is wrong otherwise. Nothing is written."""
    if not os.path.isfile(path):
        raise UserError(f"no bundle at {path}", _HINT)
    try:
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            if MANIFEST not in names:
                raise _bad(path, f"no {MANIFEST} in the archive")
            infos = z.infolist()
            for info in infos:
                if info.file_size > MAX_MEMBER_BYTES:
                    raise _bad(path, f"member {info.filename} is {info.file_size} bytes")
            # every member is read into memory to be verified: a bundle of many members that each expand to GiBs
            # (zeros compress 1000:1) would exhaust it. A real one holds a journal, a campaign and a report.
            total = sum(i.file_size for i in infos)
            if len(infos) > MAX_MEMBERS or total > MAX_MEMBER_BYTES:
                raise _bad(path, f"{len(infos)} members of {total} bytes in all, more than a bundle holds")
            data = {n: z.read(n) for n in names if not n.endswith("/")}
    except zipfile.BadZipFile as e:
        raise _bad(
            path, f"a damaged or truncated ZIP archive: {e}", "copy the bundle again; it did not arrive whole"
        ) from e
    except (OSError, EOFError, zlib.error) as e:
        raise _bad(path, f"cannot read it: {e}", "copy the bundle again; it did not arrive whole") from e
    try:
        manifest = json.loads(data.pop(MANIFEST).decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _bad(path, f"its manifest is not JSON: {e}") from e
    _check_manifest(path, manifest, data)
    return manifest, data


def _check_manifest(path: str, manifest: Any, data: Mapping[str, bytes]) -> None:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _bad(path, f"its manifest does not say format = {FORMAT!r}")
    schema = manifest.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise _bad(path, f"its manifest's schema is {schema!r}, not a number")
    if schema > SCHEMA:
        raise UserError(
            f"{path}: bundle schema {schema}, written by a newer tankbench (this one reads schema {SCHEMA})",
            "upgrade tankbench to open this bundle",
        )
    if schema < 1:
        raise _bad(path, f"unknown schema {schema}")
    members = manifest.get("members")
    if not isinstance(members, dict) or JOURNAL not in members:
        raise _bad(path, f"its manifest lists no {JOURNAL}")
    if set(members) != set(data):
        extra = sorted(set(data) - set(members)) + sorted(set(members) - set(data))
        raise _tampered(path, f"members differ from the manifest's list: {', '.join(extra[:5])}")
    for name, entry in members.items():
        if not isinstance(entry, dict) or entry.get("sha256") != sha256(data[name]):
            raise _tampered(path, f"{name} does not match the hash recorded in the manifest")
    if manifest.get("content_hash") != content_hash(manifest):
        raise _tampered(path, "the manifest does not match its content hash")


def _tampered(path: str, why: str) -> UserError:
    return UserError(
        f"{path}: bundle changed after it was written ({why})",
        "a bundle is evidence: ask its author for the file as `tankbench bundle` wrote it",
    )


_extracted: list[str] = []


def _cleanup() -> None:
    for d in _extracted:
        shutil.rmtree(d, ignore_errors=True)


atexit.register(_cleanup)


def read_bundle(path: str) -> OpenedBundle:
    """Verify the bundle at `path` and copy its journal to a private temporary directory (removed at exit)."""
    manifest, data = read_manifest(path)
    tmp = tempfile.mkdtemp(prefix="tankbench-bundle-")
    _extracted.append(tmp)
    journal = os.path.join(tmp, JOURNAL)
    with open(journal, "wb") as f:
        f.write(data[JOURNAL])
    os.chmod(journal, 0o444)
    return OpenedBundle(path=path, manifest=manifest, journal_path=journal)


def default_report_dir(bundle_path: str) -> str:
    """Where `report BUNDLE` writes without --out: `NAME-report/` beside the bundle (never inside a temp dir)."""
    base = os.path.basename(bundle_path)
    for suffix in (SUFFIX, ".zip"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            break
    return os.path.join(os.path.dirname(os.path.abspath(bundle_path)), f"{base}-report")
