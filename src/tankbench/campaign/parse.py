"""Campaign TOML -> validated Spec. Pure: reads the file, touches nothing else.

One module per section does the checking (campaign.py, host.py, targettable.py, pool.py, matrix.py,
fiotable.py), rules.py and fill.py the rules across sections; the vocabulary is in vocab.py, the values in
schema.py.
"""

from __future__ import annotations

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
    resolve_sizes,
)
from tankbench.campaign.overrides import record as record_overrides
from tankbench.campaign.pool import parse_pool
from tankbench.campaign.report import settings_from_doc
from tankbench.campaign.rules import check_guest_copies, check_new_axes
from tankbench.campaign.schema import Cooldown, HostSpec, PoolSpec, Schedule, Spec
from tankbench.campaign.settings import parse_campaign
from tankbench.campaign.targettable import parse_targets
from tankbench.campaign.vocab import AXES, CAMPAIGN_KEYS, FIO_AXES, TOP_KEYS
from tankbench.errors import UserError
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
    the command line's (--set, --disks, --host; relative sizes are resolved through its facts provider)."""
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
