"""Campaign TOML -> validated Spec. Pure: reads the file, touches nothing else.

One module per section does the checking (campaign.py, host.py, targettable.py, pool.py, matrix.py,
fiotable.py), rules.py and fill.py the rules across sections; the vocabulary is in vocab.py, the values in
schema.py.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import replace
from typing import Any

from tankbench.campaign.fill import check_fill
from tankbench.campaign.fiotable import parse_fio
from tankbench.campaign.host import parse_host
from tankbench.campaign.hosts import parse_fleet
from tankbench.campaign.matrix import parse_include, parse_matrix, parse_rule, parse_tunables_table, table_list
from tankbench.campaign.overrides import (
    NESTING_HINT,
    NESTING_PROBLEM,
    Overrides,
    apply_overrides,
    nested_too_deep,
    relative_sizes,
    resolve_sizes,
)
from tankbench.campaign.overrides import record as record_overrides
from tankbench.campaign.pool import check_lab_devices, parse_pool
from tankbench.campaign.report import settings_from_doc
from tankbench.campaign.rules import check_guest_copies, check_new_axes
from tankbench.campaign.schema import Cooldown, HostSpec, PoolSpec, Schedule, Spec
from tankbench.campaign.settings import parse_campaign
from tankbench.campaign.targettable import parse_targets
from tankbench.campaign.vocab import AXES, CAMPAIGN_KEYS, FIO_AXES, TOP_KEYS
from tankbench.errors import SpecError, UserError
from tankbench.keys import Keys
from tankbench.model import frozen_map
from tankbench.preflight import policy_from_table
from tankbench.targets.clients import check_client_targets

__all__ = ["AXES", "FIO_AXES", "Cooldown", "HostSpec", "PoolSpec", "Schedule", "Spec", "load_spec", "parse_spec"]


#: a campaign file is a few KiB; reading stops beyond this (a device or /dev/zero named by mistake)
MAX_CAMPAIGN_BYTES = 16 << 20


def load_spec(path: str, scale: str = "", overrides: Overrides | None = None) -> Spec:
    """Read and validate a campaign file; raise UserError/SpecError naming the file, key and value."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_CAMPAIGN_BYTES + 1)
    except FileNotFoundError:
        raise UserError(
            f"campaign file not found: {path}", "check the path; `tankbench presets` lists the presets"
        ) from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, not a campaign file", "pass the .toml file itself") from None
    except PermissionError as e:
        raise UserError(f"cannot read campaign file {path}: {e.strerror}", "check the file's permissions") from e
    except OSError as e:
        raise UserError(f"cannot read campaign file {path}: {e.strerror}", "check the path") from e
    if len(raw) > MAX_CAMPAIGN_BYTES:
        raise UserError(
            f"{path}: larger than {MAX_CAMPAIGN_BYTES >> 20} MiB, not a campaign file",
            "pass the campaign's .toml file (a few KiB), not a device or a data file",
        )
    if raw.startswith(b"SQLite format 3\x00"):
        raise UserError(
            f"{path}: a journal (an SQLite database), not a campaign file",
            f"a journal goes with --journal, e.g. tankbench report --journal {path}",
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text", "save the campaign file as UTF-8") from None
    return parse_spec(text.removeprefix("\ufeff"), path, scale, overrides)  # editors on Windows write a BOM


def apply_scale(keys: Keys, doc: dict[str, Any], scale: str) -> dict[str, Any]:
    """`[scale.NAME]` overrides: its tables are merged key by key into the file's, its arrays replace them."""
    scales = doc.get("scale", {})
    if not isinstance(scales, dict) or not all(isinstance(v, dict) for v in scales.values()):
        raise keys.err("scale", scales, "must hold tables like [scale.quick]", "write [scale.quick] then overrides")
    if not scale:
        return doc
    if scale not in scales:
        known = ", ".join(sorted(scales)) or "none"
        raise UserError(
            f"{keys.path}: no [scale.{scale}] in this campaign (scales: {known})",
            "pick one of its scales, or run it without --scale",
        )
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in doc.items()}
    for key, value in scales[scale].items():
        if key not in TOP_KEYS or key == "scale":
            raise keys.err(f"scale.{scale}.{key}", None, "unknown key", f"known keys: {', '.join(TOP_KEYS)}")
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key].update(value)
        else:
            out[key] = value
    return out


def load_toml(text: str, path: str) -> dict[str, Any]:
    """The campaign's TOML document, or UserError naming the file and what TOML said."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(
            f"{path}: not valid TOML: {e}", "check quotes, brackets and `key = value` syntax there"
        ) from None
    except RecursionError:  # tomllib reads nested arrays and tables recursively: a few hundred levels end it
        raise UserError(f"{path}: {NESTING_PROBLEM}", NESTING_HINT) from None
    too_deep = nested_too_deep(doc)
    if too_deep:  # later steps (copies, error messages) recurse too: refuse it here, by key
        raise UserError(f"{path}: {too_deep}: {NESTING_PROBLEM}", NESTING_HINT)
    return doc


def check_slog(keys: Keys, matrix: dict[str, tuple[Any, ...]], pool: PoolSpec | None) -> None:
    """matrix.slog = true needs log devices in a [pool] tankbench creates."""
    if True in matrix.get("slog", ()) and (pool is None or not pool.log):
        raise keys.err(
            "matrix.slog",
            list(matrix["slog"]),
            "needs log devices in [pool]",
            'add log = ["/dev/disk/by-id/…"] (and confirm it) to a pool tankbench creates',
        )


def parse_spec(text: str, path: str = "<campaign>", scale: str = "", overrides: Overrides | None = None) -> Spec:
    """Validate campaign TOML text (pure); `scale` applies that [scale.NAME] table's overrides, then `overrides`
    the command line's (--set, --disks, --host; relative sizes are resolved through its facts provider). Every
    other [scale.NAME] is validated too (a preset's broken scale fails a plain plan), and an error in a value that
    came from --set or the scale names `--set KEY` or `scale.NAME.KEY`, not the file's key."""
    try:
        spec = _parse(text, path, scale, overrides)
    except SpecError as e:
        raise blame(e, load_toml(text, path), scale, overrides) from None
    check_other_scales(text, path, scale, overrides)
    return spec


def check_other_scales(text: str, path: str, chosen: str, overrides: Overrides | None) -> None:
    """Parse the campaign at each [scale.NAME] not chosen (results dropped); a scale whose sizes are relative to
    the host is skipped (resolving them asks the host), and so are all of them when the command line changes the
    campaign (--disks, --set, --host fit the chosen scale: another may take other disks)."""
    if overrides is not None and not overrides.empty:
        return
    doc = load_toml(text, path)
    scales = doc.get("scale")
    for name in scales if isinstance(scales, dict) else {}:
        if name == chosen:
            continue
        if relative_sizes(apply_scale(Keys(path), doc, name)):
            continue
        try:
            _parse(text, path, name, None)
        except SpecError as e:
            raise blame(e, doc, name, overrides, f" (at [scale.{name}], which `--scale {name}` applies)") from None


def blame(e: SpecError, doc: dict[str, Any], scale: str, ov: Overrides | None, at: str = "") -> SpecError:
    """The error with its key as the user wrote it: `--set KEY…` for a value from --set, `scale.NAME.KEY` for one
    from the chosen scale's table; else as it was (`at` says which scale made it)."""
    for k, _ in ov.sets if ov is not None else ():
        local = _as_parsed(k, doc)
        if e.key == local or e.key.startswith((local + ".", local + "[")):
            return SpecError(e.path, f"--set {k}{e.key[len(local) :]}", e.value, e.problem, e.hint)
    table = doc.get("scale", {}).get(scale) if scale and isinstance(doc.get("scale"), dict) else None
    if isinstance(table, dict) and _sets(table, e.key):
        return SpecError(e.path, f"scale.{scale}.{e.key}", e.value, e.problem, e.hint)
    return SpecError(e.path, e.key, e.value, e.problem + at, e.hint) if at else e


def _as_parsed(key: str, doc: dict[str, Any]) -> str:
    """A --set key as the parser names it: `target.fs.size` -> `target[0].size` (arrays by their index)."""
    parts = key.split(".")
    items = doc.get(parts[0])
    if len(parts) < 2 or not isinstance(items, list):
        return key
    if parts[1].isdigit():
        index = int(parts[1])
    else:
        index = next((i for i, t in enumerate(items) if isinstance(t, dict) and t.get("name") == parts[1]), -1)
    return f"{parts[0]}[{index}]" + "".join(f".{p}" for p in parts[2:]) if index >= 0 else key


def _sets(table: dict[str, Any], key: str) -> bool:
    """Whether a scale's table sets the value an error's key names (or the array or table around it)."""
    node: Any = table
    for part in re.findall(r"[^.\[\]]+", key):
        if not isinstance(node, dict):
            return True  # an array or value the scale replaces whole
        if part not in node:
            return False
        node = node[part]
    return True


def _parse(text: str, path: str, scale: str, overrides: Overrides | None) -> Spec:
    keys = Keys(path)
    doc = load_toml(text, path)
    keys.unknown_keys(doc, TOP_KEYS, "")
    doc = apply_scale(keys, doc, scale)
    doc = apply_overrides(path, doc, overrides, TOP_KEYS)
    camp = keys.table(doc, "campaign", required=True)
    keys.unknown_keys(camp, CAMPAIGN_KEYS, "campaign.")
    settings = parse_campaign(keys, camp)
    host = parse_host(keys, camp.get("host"), doc.get("host"))
    fleet = parse_fleet(path, camp, "host" in camp or "host" in doc)
    doc, resolved = resolve_sizes(path, doc, host, overrides)
    targets = parse_targets(keys, doc.get("target"))
    pool = parse_pool(keys, doc.get("pool"), targets)
    check_lab_devices(keys, host, pool)
    matrix = parse_matrix(keys, keys.table(doc, "matrix", required=True), targets)
    check_slog(keys, matrix, pool)
    excludes = tuple(parse_rule(keys, r, i, "exclude", targets) for i, r in enumerate(table_list(keys, doc, "exclude")))
    includes = tuple(parse_include(keys, r, i, targets) for i, r in enumerate(table_list(keys, doc, "include")))
    check_guest_copies(keys, matrix, includes, targets)
    check_client_targets(keys, targets, matrix, includes, fleet is not None)
    fio = parse_fio(keys, keys.table(doc, "fio"))
    schedule: Schedule = settings["schedule"]
    if schedule.ss:  # fio's own steady-state detection: part of the job, so part of each test's id
        fio.update({"ss": schedule.ss, "ss_dur": f"{schedule.ss_dur_s:g}s", "ss_ramp": f"{schedule.ss_ramp_s:g}s"})
    tunables = parse_tunables_table(keys, keys.table(doc, "tunables"))
    check_new_axes(keys, matrix, fio, pool, targets, settings["mode"])
    check_fill(keys.err, matrix, excludes, includes, pool, targets, settings["fill_room"])
    report = settings_from_doc(doc, path, strict=True)  # the report reads these again from the journal's copy
    schedule = replace(schedule, claims=report.claims, case_keys=report.case_keys)  # what repeats.decide waits for
    extras: dict[str, Any] = {"resolved_sizes": tuple(r.line() for r in resolved)} if resolved else {}
    return Spec(
        path=path,
        text=record_overrides(text, overrides, resolved, scale),
        host=host,
        targets=targets,
        matrix=frozen_map(matrix),
        excludes=excludes,
        includes=includes,
        fio=frozen_map(fio),
        report=report,
        extras=frozen_map(extras),
        pool=pool,
        scale=scale,
        preflight=policy_from_table(keys.table(doc, "preflight"), path),
        tunables=frozen_map(tunables),
        fleet=fleet,
        **{**settings, "schedule": schedule},
    )
