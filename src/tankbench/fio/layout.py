"""Where fio's files are and how they are laid out, from a test and what its target kind says (pure).

Below the target kinds in the layer order: a kind passes itself (`KindFacts`) rather than this module
looking it up in the registry, so the kinds can use these helpers without an import cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from tankbench.model import Test

if TYPE_CHECKING:
    from tankbench.agent import PrepareFileRequest, PrepareRawRequest


class Flags(Protocol):
    """The flags of a kind the file layout reads (targets' KindTraits has them)."""

    @property
    def block_device(self) -> bool: ...

    @property
    def needs_pool(self) -> bool: ...


class KindFacts(Protocol):
    """What the file layout needs to know of a target kind (a TargetKind class or a driver is one)."""

    @property
    def traits(self) -> Flags: ...

    def fio_filename(self, test: Test) -> str: ...


def owned_block(kind: KindFacts) -> bool:
    """A block device tankbench creates (a zvol): it may discard its blocks; a user's disk it never does."""
    return kind.traits.block_device and kind.traits.needs_pool


def layout_of(test: Test) -> str:
    """How the test file/region is laid out before each run: random (the default), zero, unwritten or
    compressible:<N>%."""
    return str(test.params.get("layout", "random"))


def numjobs_of(test: Test) -> int:
    return int(test.params.get("numjobs", 1))


def size_based(test: Test) -> bool:
    """A size-based run (campaign.mode = "size"): fio ends when each job has moved its size. A fill test
    (the guest writes its disk until the pool is full) is one too."""
    return test.params.get("mode") == "size" or test.is_fill


def ends_with_fsync(test: Test) -> bool:
    """The job flushes its files when its I/O is done (fio's end_fsync or fsync_on_close)."""
    return any(
        str(test.fio_options.get(k, "0")).strip() not in ("0", "", "false") for k in ("end_fsync", "fsync_on_close")
    )


def per_job_files(test: Test, kind: KindFacts) -> bool:
    """With numjobs > 1 each job of a file or dataset target gets its own laid-out file (fio filename_format);
    jobs on a block device (raw, zvol) each get their own region of it (offset_increment)."""
    return numjobs_of(test) > 1 and not kind.traits.block_device and not test.is_copy


def file_stem(test: Test, kind: KindFacts) -> str:
    """`tankbench-fs.fiodata` for random data, `tankbench-fs.unwritten.fiodata` etc.: one file per layout, so a
    layout is never laid over another's file between tests; `$jobnum` before the suffix for per-job files."""
    base = kind.fio_filename(test)
    layout = layout_of(test)
    stem = base[: -len(".fiodata")] if base.endswith(".fiodata") else base
    if layout != "random":
        stem += "." + (f"comp{layout.split(':')[1].rstrip('%')}" if layout.startswith("compressible:") else layout)
    return stem


def test_file_path(test: Test, kind: KindFacts) -> str:
    """The file or device fio opens: the device for raw and zvol, one laid-out file per target and layout for
    file and dataset (the first job's file when each job has its own)."""
    if kind.traits.block_device or test.is_copy:
        return kind.fio_filename(test)
    return test_file_paths(test, kind)[0]


def test_file_paths(test: Test, kind: KindFacts) -> list[str]:
    """Every file fio opens, one per job when each job has its own (what the layout must cover)."""
    if kind.traits.block_device or test.is_copy:
        return [kind.fio_filename(test)]
    stem = file_stem(test, kind)
    if per_job_files(test, kind):
        return [f"{stem}.{j}.fiodata" for j in range(numjobs_of(test))]
    return [f"{stem}.fiodata"]


def layout_request(test: Test, kind: KindFacts, path: str | None = None) -> PrepareFileRequest | PrepareRawRequest:
    """The agent request that lays out and verifies what fio will open, for the test's layout: every per-job
    file of a file/dataset target (`prepare_file`), or the region of a raw device / zvol (`prepare_raw`,
    `path` = the provisioned device). The runner sends it before each run (a write test changes the data)."""
    layout = layout_of(test)
    if kind.traits.block_device:
        return {
            "op": "prepare_raw",
            "path": path or test_file_path(test, kind),
            "size": test.target.size,
            "layout": layout,
        }
    return file_layout_request(test, kind)


def file_layout_request(test: Test, kind: KindFacts) -> PrepareFileRequest:
    """The `prepare_file` request of a test's file(s) (every per-job file)."""
    paths = test_file_paths(test, kind)
    return {"op": "prepare_file", "path": paths[0], "paths": paths, "size": test.target.size, "layout": layout_of(test)}
