"""report, compare, advise and import as a user runs them: subprocess, exact errors, exit codes."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tankbench.journal.db import Journal
from tests.conftest import tankbench
from tests.reportdata import LAB_JSON, imported_journal, local_journal

OUTPUTS = ["index.html", "results.csv", "results.json", "results.xlsx", "summary.md"]


def test_report_writes_five_outputs(tmp_path: Path) -> None:
    j = local_journal(tmp_path)
    out = tmp_path / "rep"
    r = tankbench("report", "--journal", j, "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(out)) == OUTPUTS
    assert "16 tests, 48 runs, 2 test cases" in r.stdout
    assert all(os.path.getsize(out / f) > 1000 for f in OUTPUTS)


def test_report_rank_by_corrected_is_durable(tmp_path: Path) -> None:
    out = tmp_path / "rep"
    r = tankbench("report", "--journal", local_journal(tmp_path), "--out", str(out), "--rank-by", "corrected")
    assert r.returncode == 0, r.stderr
    d = json.loads((out / "results.json").read_text())
    assert d["rank_by"] == "durable_mibs" and {lb["metric"] for lb in d["leaderboards"]} == {"durable_mibs"}


def test_report_tcg_note(tmp_path: Path) -> None:
    r = tankbench("report", "--journal", imported_journal(tmp_path), "--out", str(tmp_path / "rep"))
    assert r.returncode == 0 and r.stdout.startswith("Note: emulated machine (qemu TCG)")


def test_missing_journal(tmp_path: Path) -> None:
    missing = tmp_path / "missing.sqlite"
    r = tankbench("report", "--journal", str(missing), "--out", str(tmp_path / "rep"))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == (
        f"Error: no journal at {missing}\nHint: run `tankbench run CAMPAIGN` first, or pass --journal PATH\n"
    )
    assert not (tmp_path / "rep").exists() and not missing.exists()


def test_empty_journal(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    Journal(str(path), create=True).close()
    r = tankbench("report", "--journal", str(path), "--out", str(tmp_path / "rep"))
    assert r.returncode == 2
    assert r.stderr == (
        f"Error: {path}: the journal has no runs\nHint: run a campaign first: tankbench run CAMPAIGN.toml\n"
    )
    assert not (tmp_path / "rep").exists()


def test_unknown_rank_by_writes_nothing(tmp_path: Path) -> None:
    r = tankbench("report", "--journal", local_journal(tmp_path), "--out", str(tmp_path / "rep"), "--rank-by", "speed")
    assert r.returncode == 2
    assert r.stderr == (
        "Error: unknown --rank-by 'speed'\nHint: use one of: auto, mibs, durable_mibs, iops, p99_ms, "
        "copy_mibs (aliases: corrected, durable, p99)\n"
    )
    assert not (tmp_path / "rep").exists()


def test_advise_json_and_mix(tmp_path: Path) -> None:
    j = local_journal(tmp_path)
    r = tankbench("advise", "--journal", j, "--json", "--mix", "read random 4k=3,write seq 4k=1")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["mix"]["weights"] == {"read random 4k": 0.75, "write seq 4k": 0.25}
    assert d["recommendations"] and d["goals"][0]["name"] == "enough random reads"
    text = tankbench("advise", "--journal", j)
    assert text.returncode == 0 and "Recommendations:" in text.stdout and "Workload mix" in text.stdout


def test_advise_bad_mix(tmp_path: Path) -> None:
    j = local_journal(tmp_path)
    r = tankbench("advise", "--journal", j, "--mix", "read random 4k")
    assert r.returncode == 2 and r.stderr == (
        "Error: bad --mix item 'read random 4k'\nHint: write test cases with "
        'positive weights: --mix "read random 4k=70,write random 4k=30"\n'
    )
    r = tankbench("advise", "--journal", j, "--mix", "read seq 1M=1")
    assert r.returncode == 2 and r.stderr == (
        "Error: --mix names test cases not in the journal: 'read seq 1M'\n"
        "Hint: test cases in this journal: read random 4k, write seq 4k\n"
    )


def test_compare_refuses_other_system_unless_forced(tmp_path: Path) -> None:
    a, b = local_journal(tmp_path), imported_journal(tmp_path)
    r = tankbench("compare", a, b, cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("Error: the journals come from different systems (accelerator:  vs tcg; ")
    assert r.stderr.endswith(
        "Hint: compare runs of one system, or pass --force to compare anyway (the output then lists the differences)\n"
    )
    f = tankbench("compare", a, b, "--force", "--json", cwd=tmp_path)
    assert f.returncode == 0, f.stderr
    d = json.loads(f.stdout)
    assert d["forced"] and d["fingerprint_diff"] and len(d["only_a"]) == 16


def test_compare_same_system(tmp_path: Path) -> None:
    a = local_journal(tmp_path)
    b = tmp_path / "copy.sqlite"
    b.write_bytes(Path(a).read_bytes())
    r = tankbench("compare", a, str(b), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    deltas = json.loads(r.stdout)["deltas"]
    assert len(deltas) == 16 and all(d["change_pct"] == 0 and not d["significant"] for d in deltas)
    # every write of this journal finished late (10 % of 3 s): auto compares the durable figure, fio's beside it;
    # reads compare fio's own figure (a read has nothing to make durable: its extra wall time is start-up)
    writes = [d for d in deltas if d["case"].startswith("write")]
    assert (
        writes and {d["metric"] for d in writes} == {"durable_mibs"} and all(d["mibs_a"] > d["mean_a"] for d in writes)
    )
    assert {d["metric"] for d in deltas if d["case"].startswith("read")} == {"mibs"}
    text = tankbench("compare", a, str(b), cwd=tmp_path)
    assert text.returncode == 0 and "durable MiB/s" in text.stdout and "fio MiB/s" in text.stdout
    fio = tankbench("compare", a, str(b), "--metric", "mibs", "--json", cwd=tmp_path)
    assert {d["metric"] for d in json.loads(fio.stdout)["deltas"]} == {"mibs"}


def test_import(tmp_path: Path) -> None:
    j = tmp_path / "imp.sqlite"
    r = tankbench("import", "--journal", str(j), "--fingerprint", "accelerator=tcg", *map(str, LAB_JSON))
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"imported 8 runs of 8 tests into {j}\n"
    with Journal(str(j), create=False) as jj:
        runs = jj.runs(with_samples=False)
        assert all(x.wall_s is None and "imported from" in x.note for x in runs)
        assert {t.target_kind for t in jj.tests()} == {"file", "zvol"}


def test_import_bad_file_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("fio: no such file\n")
    j = tmp_path / "imp.sqlite"
    r = tankbench("import", "--journal", str(j), str(LAB_JSON[0]), str(bad))
    assert r.returncode == 2
    assert r.stderr == (
        f"Error: {bad}: no JSON object in fio output\nHint: pass fio JSON files written by --output-format=json\n"
    )
    assert not j.exists()


def test_help_texts() -> None:
    for cmd in ("report", "compare", "advise", "import"):
        r = tankbench(cmd, "--help")
        assert r.returncode == 0 and len(r.stdout) > 300, cmd


def test_report_group_by_and_where(tmp_path: Path) -> None:
    j = local_journal(tmp_path)
    out = tmp_path / "rep"
    r = tankbench("report", "--journal", j, "--out", str(out), "--group-by", "rw,bs,iodepth", "--where", "io=direct")
    assert r.returncode == 0, r.stderr
    assert "8 tests, 24 runs, 4 test cases" in r.stdout
    d = json.loads((out / "results.json").read_text())
    assert d["selection"] == ["--group-by rw,bs,iodepth", "--where io=direct"]
    assert {lb["case"] for lb in d["leaderboards"]} == {
        "read random 4k iodepth=1",
        "read random 4k iodepth=4",
        "write seq 4k iodepth=1",
        "write seq 4k iodepth=4",
    }
    bad = tankbench("report", "--journal", j, "--out", str(tmp_path / "x"), "--where", "iodepth=7")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr == (
        "Error: --where iodepth=7: no test has iodepth=7\nHint: values of iodepth in this journal: 1, 4\n"
    )
    assert not (tmp_path / "x").exists()


def test_compare_chain_of_tuning_steps(tmp_path: Path) -> None:
    """Seed 001: one journal per tuning step; each step is compared with the one before."""
    a = local_journal(tmp_path)
    steps = [a]
    for name in ("step2.sqlite", "step3.sqlite"):
        p = tmp_path / name
        p.write_bytes(Path(a).read_bytes())
        steps.append(str(p))
    r = tankbench("compare", *steps, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["journals"] == steps and [(s["a"], s["b"]) for s in d["steps"]] == list(zip(steps, steps[1:]))
    assert all(len(s["deltas"]) == 16 for s in d["steps"])
    text = tankbench("compare", *steps)
    assert text.returncode == 0 and f"Step 2: {steps[1]} → {steps[2]}" in text.stdout
