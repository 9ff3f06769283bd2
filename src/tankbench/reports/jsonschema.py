"""results.json's JSON Schema, generated from what the exporter (reports/json.py) writes: the exporter's own output
for the journals in tests/fixtures (file, ZFS, VM-disk and fill campaigns run for real), merged: every object's
keys, which are always there (required), and each value's JSON types; maps keyed by data (test ids, metric keys of
fingerprints, parameters) are maps, not fixed keys. Shipped as tankbench/schemas/results.schema.json; a test
regenerates it and fails with the command to run when the exporter changed:

    python -m tankbench.reports.jsonschema tests/fixtures/journal-*.sqlite > src/tankbench/schemas/results.schema.json
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from tankbench import EXPORT_FORMAT
from tankbench.analysis.analyse import analyse_journal
from tankbench.reports.json import analysis_dict

#: objects whose keys are data, not a layout: their values share one schema
MAPS = frozenset({"fingerprints", "params", "props", "axes", "storage_config", "lab_disk_models", "tunables"})
#: maps whose values are objects with whatever fields a host reported (a fingerprint's)
OPEN = frozenset({"fingerprints"})

_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}


def _type(v: Any) -> str:
    if isinstance(v, dict):
        return "object"
    if isinstance(v, list):
        return "array"
    return _TYPES.get(type(v), "string")


def infer(samples: Sequence[Any], key: str = "", top: bool = False) -> dict[str, Any]:
    """The schema of every value in `samples` (one key's values across documents, or a list's items). A number may
    also be null (orjson writes NaN as null: a figure not measured); keys are required at the top level only (the
    exporter writes them all; deeper ones depend on what the journal holds)."""
    types = {_type(s) for s in samples}
    if types & {"integer", "number"}:
        types = (types - {"integer"}) | {"number", "null"}
    ordered = sorted(types)
    out: dict[str, Any] = {"type": ordered[0] if len(ordered) == 1 else ordered}
    dicts = [s for s in samples if isinstance(s, dict)]
    if dicts and key in OPEN:
        out["additionalProperties"] = {"type": "object"}
    elif dicts and key in MAPS:
        values = [v for d in dicts for v in d.values()]
        if values:
            out["additionalProperties"] = infer(values)
    elif dicts:
        keys = list(dict.fromkeys(k for d in dicts for k in d))
        out["properties"] = {k: infer([d[k] for d in dicts if k in d], k) for k in keys}
        if top:
            out["required"] = [k for k in keys if all(k in d for d in dicts)]
    items = [i for s in samples if isinstance(s, list) for i in s]
    if items:
        out["items"] = infer(items, key)
    return out


def results_schema(journals: Sequence[str]) -> dict[str, Any]:
    """The schema of results.json, from the exporter's output for `journals`."""
    docs = [json.loads(json.dumps(analysis_dict(analyse_journal(j)), default=str)) for j in journals]
    schema = infer(docs, top=True)
    schema["properties"]["format_version"] = {"const": EXPORT_FORMAT}
    schema["properties"]["tankbench_version"] = {"type": "string"}
    schema["properties"]["journal"] = {"type": "string"}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://tankbench.invalid/schemas/results-{EXPORT_FORMAT}.schema.json",
        "title": f"tankbench results.json (format_version {EXPORT_FORMAT})",
        "description": "Generated from tankbench's exporter (reports/jsonschema.py); every number traces to tests.id "
        "and runs.id.",
        **schema,
    }


def dumps(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=1, sort_keys=False) + "\n"


if __name__ == "__main__":
    sys.stdout.write(dumps(results_schema(sys.argv[1:])))
