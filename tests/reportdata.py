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
