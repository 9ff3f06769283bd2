"""Campaign TOML -> validated Spec. Pure: reads the file, touches nothing else.

One module per section does the checking (campaign.py, host.py, targettable.py, pool.py, matrix.py,
fiotable.py), rules.py and fill.py the rules across sections; the vocabulary is in vocab.py, the values in
schema.py.
"""

from __future__ import annotations

import tomllib
from typing import Any

from tankbench.errors import UserError
from tankbench.keys import Keys
from tankbench.model import frozen_map
from tankbench.preflight import policy_from_table
from tankbench.spec.campaign import parse_campaign
from tankbench.spec.fill import check_fill
from tankbench.spec.fiotable import parse_fio
from tankbench.spec.host import parse_host
from tankbench.spec.hosts import parse_fleet
from tankbench.spec.matrix import parse_include, parse_matrix, parse_rule, parse_tunables_table, table_list
from tankbench.spec.overrides import Overrides, apply_overrides, resolve_sizes
from tankbench.spec.overrides import record as record_overrides
from tankbench.spec.pool import parse_pool
from tankbench.spec.report import settings_from_doc
from tankbench.spec.rules import check_guest_copies, check_new_axes
from tankbench.spec.schema import Cooldown, HostSpec, PoolSpec, Schedule, Spec
from tankbench.spec.targettable import parse_targets
from tankbench.spec.vocab import AXES, CAMPAIGN_KEYS, FIO_AXES, TOP_KEYS
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


def apply_scale(ctx: Keys, doc: dict[str, Any], scale: str) -> dict[str, Any]:
    """`[scale.NAME]` overrides: its tables are merged key by key into the file's, its arrays replace them."""
    scales = doc.get("scale", {})
    if not isinstance(scales, dict) or not all(isinstance(v, dict) for v in scales.values()):
        raise ctx.err("scale", scales, "must hold tables like [scale.quick]", "write [scale.quick] then overrides")
    if not scale:
        return doc
    if scale not in scales:
        known = ", ".join(sorted(scales)) or "none"
        raise UserError(
            f"{ctx.path}: no [scale.{scale}] in this campaign (scales: {known})",
            "pick one of its scales, or run it without --scale",
        )
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in doc.items()}
    for key, value in scales[scale].items():
        if key not in TOP_KEYS or key == "scale":
            raise ctx.err(f"scale.{scale}.{key}", None, "unknown key", f"known keys: {', '.join(TOP_KEYS)}")
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key].update(value)
        else:
            out[key] = value
    return out


def parse_spec(text: str, path: str = "<campaign>", scale: str = "", overrides: Overrides | None = None) -> Spec:
    """Validate campaign TOML text (pure); `scale` applies that [scale.NAME] table's overrides, then `overrides`
    the command line's (--set, --disks, --host; relative sizes are resolved through its facts provider)."""
    ctx = Keys(path)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(
            f"{path}: not valid TOML: {e}", "check quotes, brackets and `key = value` syntax there"
        ) from None
    ctx.unknown_keys(doc, TOP_KEYS, "")
    doc = apply_scale(ctx, doc, scale)
    doc = apply_overrides(path, doc, overrides, TOP_KEYS)
    camp = ctx.table(doc, "campaign", required=True)
    ctx.unknown_keys(camp, CAMPAIGN_KEYS, "campaign.")
    settings = parse_campaign(ctx, camp)
    host = parse_host(ctx, camp.get("host"), doc.get("host"))
    fleet = parse_fleet(path, camp, "host" in camp or "host" in doc)
    doc, resolved = resolve_sizes(path, doc, host, overrides)
    targets = parse_targets(ctx, doc.get("target"))
    pool = parse_pool(ctx, doc.get("pool"), targets)
    matrix = parse_matrix(ctx, ctx.table(doc, "matrix", required=True), targets)
    if True in matrix.get("slog", ()) and (pool is None or not pool.log):
        raise ctx.err(
            "matrix.slog",
            list(matrix["slog"]),
            "needs log devices in [pool]",
            'add log = ["/dev/disk/by-id/…"] (and confirm it) to a pool tankbench creates',
        )
    excludes = tuple(parse_rule(ctx, r, i, "exclude", targets) for i, r in enumerate(table_list(ctx, doc, "exclude")))
    includes = tuple(parse_include(ctx, r, i, targets) for i, r in enumerate(table_list(ctx, doc, "include")))
    check_guest_copies(ctx, matrix, includes, targets)
    check_client_targets(ctx, targets, matrix, includes, fleet is not None)
    fio = parse_fio(ctx, ctx.table(doc, "fio"))
    schedule: Schedule = settings["schedule"]
    if schedule.ss:  # fio's own steady-state detection: part of the job, so part of each test's id
        fio.update({"ss": schedule.ss, "ss_dur": f"{schedule.ss_dur_s:g}s", "ss_ramp": f"{schedule.ss_ramp_s:g}s"})
    tunables = parse_tunables_table(ctx, ctx.table(doc, "tunables"))
    check_new_axes(ctx, matrix, fio, pool, targets, settings["mode"])
    check_fill(ctx.err, matrix, excludes, includes, pool, targets, settings["fill_room"])
    report = settings_from_doc(
        doc, path, strict=True
    )  # the report reads these again from the journal's copy of the text
    extras: dict[str, Any] = {"resolved_sizes": tuple(r.line() for r in resolved)} if resolved else {}
    return Spec(
        path=path,
        text=record_overrides(text, overrides, resolved),
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
        preflight=policy_from_table(ctx.table(doc, "preflight"), path),
        tunables=frozen_map(tunables),
        fleet=fleet,
        **settings,
    )
