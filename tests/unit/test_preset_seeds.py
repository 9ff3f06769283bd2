"""Issue 17 item 4: each preset carries its seed's axes (plan level: they expand and validate)."""

from __future__ import annotations

from tankbench.cli.presets import resolve_campaign
from tankbench.spec import expand, load_spec


def test_recordsize_mix_has_the_seeds_queue_depths_and_its_uncompressed_dataset():
    tests = expand(load_spec(resolve_campaign("recordsize-mix")))
    depths = {(t.params["rw"], t.params["iodepth"]) for t in tests}
    # CrystalDiskMark's: SEQ1M Q1T1 and Q8T1, RND4K Q1T1 and Q32T1
    assert depths == {
        ("read", 1),
        ("read", 8),
        ("write", 1),
        ("write", 8),
        ("randread", 1),
        ("randread", 32),
        ("randwrite", 1),
        ("randwrite", 32),
    }
    off = [t for t in tests if t.params["compression"] == "off"]
    # the seed's uncompressed dataset, at its default recordsize only: every workload and depth once
    assert {t.params["recordsize"] for t in off} == {"default"} and len(off) == 8
    assert {t.params["compression"] for t in tests} == {"lz4", "off"}


def test_recordsize_mix_small_forms_keep_their_cost():
    for scale, runs in (("quick", 8), ("ci", 6)):
        tests = expand(load_spec(resolve_campaign("recordsize-mix"), scale))
        assert len(tests) == runs, scale
        assert {t.params["iodepth"] for t in tests} == {1}
        assert "compression" not in tests[0].params or {t.params["compression"] for t in tests} == {"lz4"}
