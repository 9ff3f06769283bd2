"""Real journals for the report tests: the committed local-file journal and the imported lab fio JSON."""

from __future__ import annotations

import shutil
from pathlib import Path

from tankbench.fio.importer import import_files
from tankbench.journal.db import Journal

FIXTURES = Path(__file__).resolve().parent / "fixtures"
LOCAL_JOURNAL = FIXTURES / "journal-local-file.sqlite"
LAB_ZFS_JOURNAL = FIXTURES / "journal-lab-zfs.sqlite"
LAB_JSON = sorted((FIXTURES / "fio-3.33-lab").glob("*.json"))
LAB_FACTS = {"accelerator": "tcg", "zfs_version": "2.3.2", "kernel": "6.12.95"}


def local_journal(tmp: Path) -> str:
    """A private copy of the journal written by a real `tankbench run` (opening it switches it to WAL)."""
    dst = tmp / "local.sqlite"
    shutil.copy(LOCAL_JOURNAL, dst)
    return str(dst)


def imported_journal(tmp: Path) -> str:
    """A journal with the real lab fio outputs imported, marked as run under qemu TCG."""
    path = tmp / "lab.sqlite"
    with Journal(str(path), create=True) as j:
        import_files(j, [str(p) for p in LAB_JSON], LAB_FACTS)
    return str(path)


def lab_zfs_journal(tmp: Path) -> str:
    """A private copy of the journal of a real `tankbench run` in the lab VM (OpenZFS, TCG): raw disk,
    datasets (recordsize 4k/default) and zvols, with and without SLOG, ZFS metrics and checks."""
    dst = tmp / "labzfs.sqlite"
    shutil.copy(LAB_ZFS_JOURNAL, dst)
    return str(dst)


LAB_VMDISK_JOURNAL = FIXTURES / "journal-lab-vmdisk.sqlite"


def lab_vmdisk_journal(tmp: Path) -> str:
    """A private copy of the journal of a real `tankbench run` of the zvol-vs-qcow2 quick form in the lab: fio in
    a test guest (nested TCG) on a zvol, qcow2 (64k, 8k) and raw images, ioengine sync and libaio, beside the
    same workload on a host zvol, with the ZIL counters, the final fsync and the sync check."""
    dst = tmp / "labvm.sqlite"
    shutil.copy(LAB_VMDISK_JOURNAL, dst)
    return str(dst)


LAB_FILL_JOURNAL = FIXTURES / "journal-lab-fill.sqlite"


def lab_fill_journal(tmp: Path) -> str:
    """A private copy of the journal of a real `tankbench run journal-lab-fill.toml` in the lab VM: the pool-full
    experiment (workload = "fill") on a zvol, a qcow2 and a raw image, each paused once by qemu and resumed."""
    dst = tmp / "labfill.sqlite"
    shutil.copy(LAB_FILL_JOURNAL, dst)
    return str(dst)


def section_html(a, name: str) -> str:  # type: ignore[no-untyped-def]
    """One section of index.html (analysis/sections/NAME.py) as the report renders it; "" when it shows nothing."""
    from tankbench.reports.html import section_html as render
    from tankbench.reports.render import rendered

    return "".join(render(r.section) for r in rendered(a) if r.spec.name == name)


def clients_markdown(runs) -> str:  # type: ignore[no-untyped-def]
    """clients.md of these client runs (the client_runs section written alone)."""
    from tankbench.analysis.sections import client_runs
    from tankbench.reports.markdown import section_file
    from tankbench.reports.render import Rendered

    sec = client_runs.render(None, tuple(runs))  # type: ignore[arg-type]
    return section_file(Rendered(client_runs.SECTION, sec)) if sec else ""


def fleet_each_journal(tmp: Path) -> str:
    """The local journal as a fleet campaign with hosts_mode = "each" would leave it: every run again on a second
    host (ssh:root@10.0.0.9, its own fingerprint, 10 % faster), the two hosts recorded in the `hosts` table."""
    import json
    import sqlite3

    path = local_journal(tmp)
    con = sqlite3.connect(path)
    cols = [r[1] for r in con.execute("PRAGMA table_info(runs)") if r[1] != "id"]
    (fid, data) = con.execute("SELECT id, data FROM fingerprints").fetchone()
    other = dict(json.loads(data), hostname="otherhost", cpu_model="Other CPU", device_models={"vda": "QEMU HARDDISK"})
    con.execute("INSERT INTO fingerprints(id, data) VALUES ('ffff000011112222', ?)", (json.dumps(other),))
    picked = {"host": "'ssh:root@10.0.0.9'", "fingerprint_id": "'ffff000011112222'"}
    con.execute(f"INSERT INTO runs ({', '.join(cols)}) SELECT {', '.join(picked.get(c, c) for c in cols)} FROM runs")
    rows = con.execute("SELECT id, metrics FROM runs WHERE host = 'ssh:root@10.0.0.9'").fetchall()
    for rid, metrics in rows:
        m = {
            k: v * 1.1 if k.startswith("total.") and isinstance(v, float) else v for k, v in json.loads(metrics).items()
        }
        con.execute("UPDATE runs SET metrics = ? WHERE id = ?", (json.dumps(m), rid))
    if con.execute("SELECT 1 FROM sqlite_master WHERE name = 'run_inputs'").fetchone():
        con.execute("DELETE FROM run_inputs")  # the compact copy would hold the first host's figures
    con.commit()
    con.close()
    with Journal(path, create=False) as j:
        j.set_hosts("each", [("local", "local", ""), ("ssh:root@10.0.0.9", "ssh", "10.0.0.9")])
    return path
