"""The bad-input corpus: each file must give `Error: …` naming file, key and value, a hint, exit 2,
no traceback, and write nothing (no journal, no target directory)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tankbench.journal.db import Journal
from tests.conftest import FIXTURES, tankbench

CORPUS = sorted((FIXTURES / "bad").glob("*.toml"))
CASES = [(p, c) for p in CORPUS for c in ("plan", "run") if c == "run" or b"# host-check" not in p.read_bytes()]
SPECIAL = {"not-utf8.toml": "not UTF-8"}


def expectation(path: Path) -> tuple[str, str]:
    if path.name in SPECIAL:
        return SPECIAL[path.name], ""
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect: "), f"{path.name} lacks its '# expect:' line"
    body = first[len("# expect: ") :]
    message, _, hint = body.partition("; hint: ")
    return message, hint


def test_corpus_is_not_empty():
    assert len(CORPUS) >= 20


@pytest.mark.parametrize("path,command", CASES, ids=[f"{c}-{p.stem}" for p, c in CASES])
def test_bad_input(path: Path, command: str, tmp_path: Path):
    campaign = tmp_path / path.name
    campaign.write_bytes(path.read_bytes().replace(b"@TMP@", str(tmp_path).encode()))
    work = tmp_path / "cwd"
    work.mkdir()
    jdir = tmp_path / "journals"  # an existing journal, as a finished `run` leaves it (WAL, nothing beside it)
    jdir.mkdir()
    Journal(str(jdir / "journal.sqlite")).close()
    before = {p.name: p.read_bytes() for p in jdir.iterdir()}
    res = tankbench(command, str(campaign), "--journal", str(jdir / "journal.sqlite"), cwd=work, timeout=120)
    message, hint = expectation(path)
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("Error: "), res.stderr
    assert "Traceback" not in res.stderr + res.stdout
    assert str(campaign) in res.stderr, "the error names the file"
    assert message in res.stderr, res.stderr
    assert "Hint: " in res.stderr
    if hint:
        assert hint in res.stderr
    assert os.listdir(work) == [], "nothing is written on bad input"
    assert {p.name: p.read_bytes() for p in jdir.iterdir()} == before, "the journal's directory is unchanged"
    assert not (tmp_path / "scratch").exists(), "the target directory is not created"


def test_missing_campaign_file(tmp_path: Path):
    res = tankbench("plan", str(tmp_path / "nope.toml"))
    assert res.returncode == 2 and res.stderr.startswith("Error: campaign file not found: ")


def test_directory_instead_of_file(tmp_path: Path):
    res = tankbench("run", str(tmp_path))
    assert res.returncode == 2 and "is a directory, not a campaign file" in res.stderr


def test_unreadable_campaign(tmp_path: Path):
    f = tmp_path / "locked.toml"
    f.write_text("[campaign]\n")
    f.chmod(0)
    argv = [sys.executable, "-m", "tankbench", "plan", str(f)]
    if os.geteuid() == 0:  # root reads mode-000 files: drop the two capabilities that let it (setpriv, util-linux)
        argv = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", *argv]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.startswith(f"Error: cannot read campaign file {f}: Permission denied"), res.stderr
    assert "Hint: check the file's permissions" in res.stderr


def test_campaign_saved_with_a_bom_is_read(tmp_path: Path):
    """Notepad and other Windows editors start UTF-8 files with a byte order mark: TOML without it."""
    good = (FIXTURES / "bad" / "runtime-zero.toml").read_text().replace('runtime = "0s"', 'runtime = "1s"')
    f = tmp_path / "bom.toml"
    f.write_bytes(b"\xef\xbb\xbf" + good.replace("@TMP@", str(tmp_path)).encode())
    res = tankbench("plan", str(f), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "1 tests on 1 configurations" in res.stdout


def test_a_device_named_as_the_campaign_is_refused_without_reading_it_all(tmp_path: Path):
    res = tankbench("plan", "/dev/zero", cwd=tmp_path, timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.startswith("Error: /dev/zero: larger than 16 MiB, not a campaign file"), res.stderr
    assert "Hint: pass the campaign's .toml file" in res.stderr and os.listdir(tmp_path) == []


def test_a_path_that_cannot_be_followed_gets_a_path_hint(tmp_path: Path):
    loop = tmp_path / "loop.toml"
    loop.symlink_to(loop)
    res = tankbench("plan", str(loop), cwd=tmp_path)
    assert res.returncode == 2 and "Too many levels of symbolic links" in res.stderr, res.stderr
    assert "Hint: check the path" in res.stderr and "permissions" not in res.stderr


def test_unknown_scale_names_the_scales_there_are(tmp_path: Path):
    res = tankbench("plan", "zvol-issues", "--scale", "huge", cwd=tmp_path)
    assert res.returncode == 2 and "no [scale.huge] in this campaign (scales: ci, quick)" in res.stderr
    assert "Hint: " in res.stderr and os.listdir(tmp_path) == []


HOST_FILES = sorted((FIXTURES / "bad" / "hostfile").glob("*.toml"))


@pytest.mark.parametrize("path", HOST_FILES, ids=[p.stem for p in HOST_FILES])
def test_bad_host_file(path: Path, tmp_path: Path):
    """`plan PRESET --host FILE`: a bad host file (or what it asks of the preset) is an Error naming the file."""
    message, hint = expectation(path)
    res = tankbench("plan", "tuning-matrix", "--scale", "quick", "--host", str(path), cwd=tmp_path, timeout=120)
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("Error: ") and "Traceback" not in res.stderr + res.stdout
    assert message in res.stderr and "Hint: " in res.stderr and hint in res.stderr, res.stderr
    if "campaign" not in message:  # errors of the preset after the overrides name the preset's file instead
        assert str(path) in res.stderr or "tuning-matrix.toml" in res.stderr
    assert os.listdir(tmp_path) == []


def test_a_journals_old_report_keys_are_still_read():
    """Unknown [report]/[[goal]] keys are refused in a campaign file, not in the copy an older journal keeps."""
    from tankbench.campaign.report import parse_settings

    s = parse_settings(
        '[report]\nbaseline = "hdd"\nretired_key = 1\n[[goal]]\ncase = "x"\nmetric = "IOPS"\nvalue = 1\nold = 2\n'
    )
    assert s.baseline == "hdd" and len(s.goals) == 1


@pytest.mark.parametrize(
    "target,message",
    [
        ("-", "Error: --export -: the export is a directory of scripts, not one stream"),
        ("afile", "Error: --export afile: exists and is not a directory"),
        ("taken", "Error: cannot write the export to taken/0001-job.fio: Is a directory"),
    ],
)
def test_plan_export_to_what_is_not_a_directory(tmp_path: Path, target: str, message: str):
    campaign = tmp_path / "c.toml"
    text = (FIXTURES / "bad" / "runtime-zero.toml").read_text().replace('runtime = "0s"', 'runtime = "1s"')
    campaign.write_text(text.replace("@TMP@", str(tmp_path)))
    (tmp_path / "afile").write_text("x")
    (tmp_path / "taken" / "0001-job.fio").mkdir(parents=True)
    res = tankbench("plan", str(campaign), "--export", target, cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.startswith(message) and "Hint: " in res.stderr, res.stderr
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("command", ["plan", "run", "report", "show"])
def test_a_journal_given_as_the_campaign_says_so(tmp_path: Path, command: str):
    journal = FIXTURES / "journal-local-file.sqlite"
    res = tankbench(command, str(journal), cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.startswith(f"Error: {journal}: a journal (an SQLite database), not a campaign file")
    assert f"Hint: a journal goes with --journal, e.g. tankbench report --journal {journal}" in res.stderr
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("weight", ["nan", "inf"])
def test_mix_weight_that_is_not_a_number(tmp_path: Path, weight: str):
    journal = FIXTURES / "journal-local-file.sqlite"
    res = tankbench("advise", "--journal", str(journal), "--mix", f"read random 4k={weight}", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.startswith(f"Error: bad --mix item 'read random 4k={weight}'")


@pytest.mark.parametrize("command", ["report", "advise"])
@pytest.mark.parametrize("value", ["", " , "])
def test_an_empty_group_by_is_refused(tmp_path: Path, command: str, value: str):
    """`--group-by ''` used to be taken as no grouping at all, silently."""
    journal = FIXTURES / "journal-local-file.sqlite"
    out = ["--out", str(tmp_path / "rep")] if command == "report" else []
    res = tankbench(command, "--journal", str(journal), "--group-by", value, *out, cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.startswith(f"Error: bad --group-by {value!r}"), res.stderr
    assert "Hint: name axes separated by commas" in res.stderr and os.listdir(tmp_path) == []


def test_host_file_with_a_bom_and_a_directory_as_host_file(tmp_path: Path):
    host = tmp_path / "host.toml"
    host.write_bytes(b'\xef\xbb\xbf[host]\nkind = "local"\n')
    res = tankbench("plan", "tuning-matrix", "--scale", "quick", "--host", str(host), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    (tmp_path / "d.toml").mkdir()
    res = tankbench("plan", "tuning-matrix", "--host", str(tmp_path / "d.toml"), cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.startswith(f"Error: --host {tmp_path / 'd.toml'}: is a directory")


def test_refine_of_a_journal_without_a_screening_step(tmp_path: Path):
    """`tankbench refine` follows a screening: a journal of an exhaustive campaign is refused, nothing written."""
    from tankbench.campaign.expand import expand
    from tankbench.campaign.parse import parse_spec
    from tankbench.journal.db import Journal

    text = (FIXTURES / "bad" / "design-unknown.toml").read_text().replace('design = "screen"', "")
    spec = parse_spec(text.replace("@TMP@", str(tmp_path)), str(tmp_path / "c.toml"))
    j = tmp_path / "j.sqlite"
    with Journal(str(j)) as journal:
        journal.add_campaign(spec.campaign_id, spec.name, spec.path, spec.text)
        journal.add_tests(spec.campaign_id, expand(spec), {})
    before, files = j.read_bytes(), sorted(os.listdir(tmp_path))
    res = tankbench("refine", str(j), cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.startswith(f"Error: {j}: has no screening step"), res.stderr
    assert "Hint: refine follows a screening: tankbench run CAMPAIGN --set campaign.design=screening" in res.stderr
    # the journal is as it was; SQLite's read-only WAL open may leave its -wal/-shm index files, nothing else
    assert j.read_bytes() == before
    assert {f for f in os.listdir(tmp_path) if not f.endswith(("-wal", "-shm"))} == set(files)


def test_refine_of_no_journal(tmp_path: Path):
    res = tankbench("refine", str(tmp_path / "none.sqlite"), cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.startswith("Error: ") and "Traceback" not in res.stderr, res.stderr
    assert os.listdir(tmp_path) == []


def _screened_journal(tmp_path: Path) -> tuple[Path, Path]:
    """A campaign with design = "screening" and a journal holding its screening step (no runs yet)."""
    from tankbench.campaign.parse import load_spec
    from tankbench.cli._design import record_screening

    text = (FIXTURES / "bad" / "design-one-storage-factor.toml").read_text().replace("@TMP@", str(tmp_path))
    campaign = tmp_path / "c.toml"
    campaign.write_text(
        text.replace('layout = ["random", "zero"]', 'layout = ["random", "zero"]\nsize = ["8M", "16M"]')
    )
    j = tmp_path / "j.sqlite"
    record_screening(load_spec(str(campaign)), str(j), {"campaign": str(campaign), "options": []})
    return campaign, j


def test_refine_of_a_screening_whose_campaign_changed_or_is_unfinished(tmp_path: Path):
    campaign, j = _screened_journal(tmp_path)
    res = tankbench("refine", str(j), cwd=tmp_path)
    assert res.returncode == 2 and "of the screening's tests have no finished run yet" in res.stderr, res.stderr
    assert "Hint: finish the screening first" in res.stderr
    campaign.write_text(campaign.read_text().replace("iodepth = [1, 4, 16]", "iodepth = [1, 4]"))
    res = tankbench("refine", str(j), "--plan", cwd=tmp_path)
    assert res.returncode == 2 and "it changed since the screening" in res.stderr, res.stderr
    campaign.unlink()
    res = tankbench("refine", str(j), cwd=tmp_path)
    assert res.returncode == 2 and f"the screening's campaign ({campaign}): campaign file not found" in res.stderr
    res = tankbench("refine", str(j), "--top", "0", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.startswith("Error: --top 0: must be 1 or more"), res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("command", ["report", "advise", "compare", "bundle", "import"])
def test_a_journal_with_a_damaged_page_is_an_error_not_a_traceback(tmp_path: Path, command: str):
    """A journal whose header is fine but whose second page is not (a bad copy, a failing disk): SQLite refuses a
    read part-way, which was a DatabaseError traceback (exit 1). Now `Error:` naming the journal, exit 2, and the
    read-only commands leave its directory as it was."""
    good = (FIXTURES / "journal-local-file.sqlite").read_bytes()
    d = tmp_path / "j"
    d.mkdir()
    j = d / "journal.sqlite"
    j.write_bytes(good[:4096] + b"\xff" * 4096 + good[8192:])
    before = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in d.iterdir())
    out = tmp_path / "out"
    argv = {
        "report": ["report", "--journal", str(j), "--out", str(out)],
        "advise": ["advise", "--journal", str(j)],
        "compare": ["compare", str(j), str(FIXTURES / "journal-local-file.sqlite"), "--out", str(out)],
        "bundle": ["bundle", "--journal", str(j), "-o", str(tmp_path / "b.tankbench.zip")],
        "import": ["import", "--journal", str(j), str(FIXTURES / "fio-public" / "fio-3.1-fioplot-randread-qd1.json")],
    }[command]
    res = tankbench(*argv, cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert f"{j}: damaged, SQLite cannot read it" in res.stderr or f"one of {j}" in res.stderr, res.stderr
    assert "Hint: " in res.stderr
    if command != "import":  # a writer upgrades an old journal's schema before it reads; its runs stay as they were
        assert sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in d.iterdir()) == before


def test_compare_out_naming_a_file_is_an_error(tmp_path: Path):
    """`compare --out FILE` raised FileExistsError (a traceback); `report --out FILE` already said why."""
    out = tmp_path / "a-file"
    out.write_text("mine\n")
    j = str(FIXTURES / "journal-local-file.sqlite")
    res = tankbench("compare", j, j.replace("local-file", "lab-zfs"), "--out", str(out), cwd=tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert f"Error: cannot create output directory {out}" in res.stderr and "Hint: " in res.stderr
    assert out.read_text() == "mine\n"


def test_compare_of_negative_figures_gives_no_ratio_not_a_traceback(tmp_path: Path):
    """A journal whose runs carry negative throughput (hand-edited metrics; the importer refuses them now) made
    compare's significance test raise ValueError. Such a pair gets no ratio and compare ends normally."""
    import sqlite3

    j = tmp_path / "neg.sqlite"
    src = FIXTURES / "fio-public" / "fio-3.1-fioplot-randread-qd1.json"
    assert tankbench("import", "--journal", str(j), str(src), cwd=tmp_path).returncode == 0
    conn = sqlite3.connect(j)
    with conn:
        conn.execute(
            "UPDATE runs SET metrics = json_set(metrics, '$.\"read.bw_bytes\"', -5.0, '$.\"total.bw_bytes\"', -5.0,"
            " '$.\"read.iops\"', -5.0, '$.\"total.iops\"', -5.0)"
        )
        conn.execute("DELETE FROM run_inputs")  # the compact copy would still hold the figures as imported
    conn.close()
    other = tmp_path / "neg2.sqlite"
    other.write_bytes(j.read_bytes())
    res = tankbench("compare", str(j), str(other), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stdout + res.stderr
    assert (tmp_path / "out" / "compare.md").exists()


def test_compare_names_its_own_option_and_refuses_a_journal_given_twice(tmp_path: Path):
    j = str(FIXTURES / "journal-local-file.sqlite")
    res = tankbench("compare", "--metric", "nonsense", j, j.replace("local-file", "lab-zfs"), cwd=tmp_path)
    assert res.returncode == 2 and "Error: unknown --metric 'nonsense'" in res.stderr, res.stderr
    res = tankbench("compare", j, os.path.relpath(j, tmp_path), cwd=tmp_path)  # the same file, spelt otherwise
    assert res.returncode == 2 and "is given twice" in res.stderr and "Hint: " in res.stderr, res.stderr
    assert not list(tmp_path.iterdir())  # no ./tankbench-compare


@pytest.mark.parametrize(
    "argv, message",
    [
        (["compare", "only-one.sqlite"], "Error: the following arguments are required: B\n"),
        (["schema", "nonsense"], "Error: argument which: invalid choice: 'nonsense'"),
        (["plan", "-dash.toml"], "Error: the following arguments are required: CAMPAIGN\n"),
    ],
)
def test_usage_errors_say_error_and_hint(tmp_path: Path, argv: list[str], message: str):
    """argparse's own refusals in the project's form: `Error:` and a `Hint:` (they printed `tankbench compare:
    error: …` and no hint; `plan -dash.toml` did not say how to name a file beginning with -)."""
    res = tankbench(*argv, cwd=tmp_path)
    assert res.returncode == 2 and message in res.stderr, res.stderr
    assert f"Hint: `tankbench {argv[0]} --help` says what it takes" in res.stderr
    if argv[1].startswith("-"):
        assert "tankbench plan -- -FILE" in res.stderr


def test_an_output_that_cannot_be_written_names_the_users_file_and_a_hint_for_this_command(tmp_path: Path):
    """compare into a directory it may not write: the error named the temporary file (compare.html.tmp-PID) and the
    hint spoke of journals keeping their runs, which only `run` has."""
    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(0o555)
    j = str(FIXTURES / "journal-local-file.sqlite")
    argv = [sys.executable, "-m", "tankbench", "compare", j, j.replace("local-file", "lab-zfs"), "--out", str(out)]
    if os.geteuid() == 0:  # root writes anywhere: drop the capabilities that let it
        argv = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", *argv]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 3 and "Traceback" not in res.stderr, res.stderr
    assert f"Error: cannot write {out}/compare.html: Permission denied\n" in res.stderr, res.stderr
    assert "Hint: " in res.stderr and "journal keeps every run" not in res.stderr
    assert not list(out.iterdir())


def test_mix_weights_whose_sum_overflows_are_scaled_not_divided_by_infinity(tmp_path: Path):
    """Each weight finite, their sum inf: every normalised weight was 0 and advise died in ZeroDivisionError."""
    res = tankbench(
        "advise",
        "--journal",
        str(FIXTURES / "journal-local-file.sqlite"),
        "--mix",
        "read random 4k=1e308,write seq 4k=1e308",
        "--json",
        cwd=tmp_path,
    )
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    import json

    doc = json.loads(res.stdout)
    assert sorted(round(w, 6) for w in doc["mix"]["weights"].values()) == [0.5, 0.5], doc["mix"]
