"""The JSON Schemas agree with the code: the campaign schema (generated from the parser's key tables) refuses every
corpus file the parser refuses for an unknown key, takes every preset and example, and knows exactly the keys the
parser knows, table by table (a bogus key is refused by both; each key the schema names gets past the parser's key
check); results.json's schema is what the exporter writes today and takes each fixture journal's export."""

from __future__ import annotations

import copy
import json
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tankbench.campaign import parse_spec
from tankbench.campaign.jsonschema import campaign_schema
from tankbench.errors import SpecError
from tankbench.reports.json import analysis_dict
from tankbench.reports.jsonschema import dumps, results_schema
from tests.conftest import FIXTURES

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = campaign_schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
CAMPAIGNS = sorted((ROOT / "src" / "tankbench" / "presets").glob("*.toml")) + sorted(
    (ROOT / "src" / "tankbench" / "examples").glob("*.toml")
)
UNKNOWN = [
    p
    for p in sorted((FIXTURES / "bad").glob("*.toml"))
    if p.read_bytes().startswith(b"# expect: ") and b"unknown key" in p.read_bytes().splitlines()[0]
]
#: a campaign the parser takes, with every table a campaign can have
BASE = """
[campaign]
name = "s"
runtime = "1s"
cooldown = { fixed = "1s" }
repeats = { min = 1, max = 2 }
[host]
kind = "local"
[pool]
name = "tbs"
vdevs = ["/dev/disk/by-id/ata-A"]
confirm = ["/dev/disk/by-id/ata-A"]
[[target]]
name = "f"
kind = "dataset"
size = "8M"
[matrix]
rw = ["read"]
bs = ["4k"]
[[exclude]]
bs = "1M"
[[include]]
rw = "write"
[report]
baseline = "f"
[[goal]]
case = "read seq 4k"
metric = "IOPS"
op = ">="
value = 1
[preflight]
scrub = "warn"
[tunables]
zfs_txg_timeout = 5
"""


def errors(doc: dict[str, Any]) -> list[str]:
    return [e.message for e in VALIDATOR.iter_errors(doc)]


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("path", CAMPAIGNS, ids=lambda p: p.stem)
def test_every_preset_and_example_validates(path: Path) -> None:
    assert errors(tomllib.loads(path.read_text())) == []


def test_the_corpus_has_unknown_key_files() -> None:
    assert len(UNKNOWN) >= 5, UNKNOWN


@pytest.mark.parametrize("path", UNKNOWN, ids=lambda p: p.stem)
def test_a_file_the_parser_refuses_for_an_unknown_key_the_schema_refuses(path: Path) -> None:
    doc = tomllib.loads(path.read_text())
    assert errors(doc), f"{path.name}: the schema takes a key the parser refuses"


def test_the_base_campaign_is_taken_by_both() -> None:
    parse_spec(BASE, "base.toml")
    assert errors(tomllib.loads(BASE)) == []


def tables(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(where, the table in `doc`, its schema) for every table of BASE the schema closes."""
    defs = SCHEMA["$defs"]
    out = []
    for top, value in doc.items():
        sch = defs[top]
        sch = sch.get("items", sch) if isinstance(value, list) else sch
        sch = next((s for s in sch.get("anyOf", []) if s.get("type") == "object"), sch)
        table = value[0] if isinstance(value, list) else value
        if sch.get("additionalProperties") is False:
            out.append((top, table, sch))
    for key in ("cooldown", "repeats"):
        sub = next(s for s in defs["campaign"]["properties"][key]["anyOf"] if s.get("type") == "object")
        out.append((f"campaign.{key}", doc["campaign"][key], sub))
    return out


def refusal(doc: dict[str, Any]) -> str:
    try:
        parse_spec(_toml(doc), "probe.toml")
    except SpecError as e:
        return str(e)
    return ""


def _toml(doc: dict[str, Any]) -> str:
    """A minimal TOML writer for the probe documents (tables, arrays of tables, scalars, lists, inline tables)."""

    def val(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{json.dumps(k)} = {val(x)}" for k, x in v.items()) + " }"
        raise TypeError(v)

    out = []
    for top, value in doc.items():
        for t in value if isinstance(value, list) else [value]:
            out.append(f"[[{top}]]" if isinstance(value, list) else f"[{top}]")
            out += [f"{json.dumps(k)} = {val(v)}" for k, v in t.items()]
    return "\n".join(out) + "\n"


def test_table_by_table_the_schema_knows_the_keys_the_parser_knows() -> None:
    base = tomllib.loads(BASE)
    for where, _table, sch in tables(base):
        bogus = copy.deepcopy(base)
        path = where.split(".")
        t = bogus[path[0]][0] if isinstance(bogus[path[0]], list) else bogus[path[0]]
        for p in path[1:]:
            t = t[p]
        t["zz_not_a_key"] = 1
        assert "unknown key" in refusal(bogus) or "does not take" in refusal(bogus), where
        assert errors(bogus), f"{where}: the schema takes a key the parser refuses"
        for key in sch["properties"]:
            probe = copy.deepcopy(base)
            t = probe[path[0]][0] if isinstance(probe[path[0]], list) else probe[path[0]]
            for p in path[1:]:
                t = t[p]
            if key in t:
                continue
            t[key] = "x"
            said = refusal(probe)
            if "unknown key" in said or "does not take" in said:  # another kind's key: the schema refuses it too
                assert errors(probe), f"{where}.{key}: the parser refuses it ({said}), the schema takes it"


def test_every_target_kind_takes_only_its_own_keys_in_both() -> None:
    base = tomllib.loads(BASE)
    base["target"][0] = {"name": "f", "kind": "dataset", "size": "8M", "path": "/tmp/x"}
    assert "does not take" in refusal(base)
    assert errors(base)


def test_results_schema_is_what_the_exporter_writes() -> None:
    journals = sorted(str(p) for p in FIXTURES.glob("journal-*.sqlite"))
    fresh = dumps(results_schema(journals))
    shipped = (ROOT / "src" / "tankbench" / "schemas" / "results.schema.json").read_text()
    assert fresh == shipped, (
        "results.json's layout changed: regenerate its schema with\n"
        "  python -m tankbench.reports.jsonschema tests/fixtures/journal-*.sqlite"
        " > src/tankbench/schemas/results.schema.json"
    )
    validator = jsonschema.Draft202012Validator(json.loads(shipped))
    from tankbench.analysis.analyse import analyse_journal

    for j in journals:
        doc = json.loads(json.dumps(analysis_dict(analyse_journal(j)), default=str))
        assert [e.message for e in validator.iter_errors(doc)] == [], j
        doc.pop("tests")
        assert list(validator.iter_errors(doc)), "a results.json without its tests is refused"
