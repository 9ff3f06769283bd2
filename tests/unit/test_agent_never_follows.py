"""The agent's layout never writes through a symlink or into a device node where a test file should be: the
last guard if one appears after the read-only probe (the probe's refusal is in tests/integration/test_safety_loop)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tankbench import agent


@pytest.mark.parametrize("layout", ["random", "unwritten"])
def test_prepare_file_refuses_a_symlinked_test_file(tmp_path: Path, layout: str) -> None:
    precious = tmp_path / "thesis.odt"
    precious.write_bytes(b"years of work")
    link = tmp_path / "tankbench-scratch.fiodata"
    link.symlink_to(precious)
    with pytest.raises(ValueError, match="is a symlink or not a regular file"):
        agent.op_prepare_file({"op": "prepare_file", "paths": [str(link)], "size": 1 << 20, "layout": layout})
    assert precious.read_bytes() == b"years of work" and link.is_symlink()


def test_probe_names_test_files_that_are_not_plain_files(tmp_path: Path) -> None:
    (tmp_path / "tankbench-a.fiodata").symlink_to("/dev/null")
    (tmp_path / "tankbench-b.fiodata").write_bytes(b"")
    (tmp_path / "tankbench-c.0.fiodata").mkdir()
    (tmp_path / "other.fiodata").symlink_to("/dev/null")  # not a name tankbench writes
    assert agent.not_regular_test_files(str(tmp_path)) == ["tankbench-a.fiodata", "tankbench-c.0.fiodata"]
