"""Issue 31 end to end: one campaign run on two namespace hosts and in the lab (on a modelled disk), each bundled
(one anonymised), and `tankbench compare` of the three bundles: compare.html in headless Chromium (a screenshot
kept in the test's directory), with a claim that holds in the lab and not on the namespace hosts shown as such.

The claim is physics, not a threshold tuned to this machine: 1M random reads move 1 MiB per request, 4k ones 4 KiB.
On the lab's modelled disk (hdd: 40 requests/s, 16 MiB/s) that is ~100x in MiB/s (measured 103.5x [103.5-103.6]);
on a namespace host, direct reads of the 8 MiB file go to this machine's own disk, where a request's fixed cost is
far smaller than a modelled seek: 25-30x here (intervals up to 49.5x with 3 runs), so the claim asks for 70x."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from tankbench.hosts.lab import LabHost
from tankbench.lab import vm
from tests.browser.test_html_chromium import chromium, console_errors, png_pixels
from tests.conftest import tankbench
from tests.lab.conftest import LAB
from tests.netns import namespace_hosts

CLAIM = """
[[claim]]
name = "1M random reads move at least 70x the MiB/s of 4k ones"
compare = {{ bs = ["1M", "4k"] }}
metric = "mibs"
expect = ">= 70x"
"""

CAMPAIGN = (
    """
[campaign]
name = "machines"
runtime = "3s"
ramp = "0s"
warmup = false
repeats = 3
cooldown = "0s"
{host}
[[target]]
{target}

[matrix]
rw = ["randread"]
bs = ["4k", "1M"]
iodepth = [1]
io = ["direct"]
"""
    + CLAIM
)

FILE_TARGET = 'name = "scratch"\nkind = "file"\npath = "{dir}"\nsize = "8M"'
LAB_TARGET = 'name = "scratch"\nkind = "raw"\npath = "{disk}"\nconfirm = "{disk}"\nsize = "64M"'


def _run(campaign: Path, journal: Path, *extra: str) -> None:
    cp = tankbench("run", str(campaign), "--journal", str(journal), *extra, timeout=900)
    assert cp.returncode == 0, cp.stdout + cp.stderr


def test_three_machines_compared_with_a_claim_that_holds_on_one_only(lab: LabHost, tmp_path: Path) -> None:
    bundles = []
    with namespace_hosts(2, tmp_path / "ns") as (hosts, target):
        for i, h in enumerate(hosts):
            hostfile = tmp_path / f"ns{i}.toml"
            hostfile.write_text(
                f'[host]\nkind = "ssh"\naddress = "{h.address}"\nidentity = "{h.identity}"\n'
                f'known_hosts = "{h.known_hosts}"\n'
            )
            c = tmp_path / f"ns{i}-campaign.toml"
            c.write_text(CAMPAIGN.format(host="", target=FILE_TARGET.format(dir=target / "scratch")))
            _run(c, tmp_path / f"ns{i}.sqlite", "--host", str(hostfile))
    disk = vm.lab_data_disks(LAB)[0]  # its /dev/disk/by-id path
    c = tmp_path / "lab-campaign.toml"
    lab_host = f'\n[host]\nkind = "lab"\nname = "{LAB}"\ndisk_model = "hdd"\n'
    c.write_text(CAMPAIGN.format(host=lab_host, target=LAB_TARGET.format(disk=disk)))
    _run(c, tmp_path / "lab.sqlite")
    for name, extra in (("ns0", ()), ("ns1", ("--anonymise",)), ("lab", ())):
        out = tmp_path / f"{name}.tankbench.zip"
        cp = tankbench("bundle", str(tmp_path / f"{name}.sqlite"), "-o", str(out), *extra)
        assert cp.returncode == 0, cp.stderr
        bundles.append(str(out))
    out = tmp_path / "cmp"
    cp = tankbench("compare", *bundles, "--out", str(out), "--json")
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(cp.stdout)["machines"]
    (claim,) = doc["claims"]
    verdicts = [v["verdict"] for v in claim["verdicts"]]
    # the claim holds on the lab only. On the two namespace hosts (a file, 1M reads 13-34x the 4k ones) it does not
    # hold, or with 3 noisy runs stays undecided: a full run saw 1M reads at 1,234-2,914 MiB/s there (cv 40 %), 33x
    # [12.5-89] on the log scale, which straddles 70x (Fieller's interval, [0.66-66], had passed just below 70x)
    assert verdicts[2] == "holds" and all(v in ("does not hold", "undecided") for v in verdicts[:2]), claim
    lab_ratio = claim["verdicts"][2]["ratio"]
    assert lab_ratio >= 70, claim
    html = (out / "compare.html").read_text()
    assert re.search(r'<td class="holds">holds on lab [\d.]+× \[', html), html[:2000]
    assert html.count('<td class="fails">does not hold on ns') == 2
    # the lab is emulated, the namespace hosts are not: the fingerprint row differs, marked as such
    assert '<tr class="diff"><td>accelerator ≠</td><td>—</td><td>—</td><td>tcg</td></tr>' in html, html[:3000]
    shot = out / "compare.png"
    r = chromium("--window-size=1280,2000", f"--screenshot={shot}", (out / "compare.html").as_uri())
    assert r.returncode == 0 and not console_errors(r.stderr), r.stderr[-2000:]
    width, height, rows = png_pixels(shot.read_bytes())
    assert width == 1280 and len({row for row in rows[:400]}) > 20  # not blank: text and tables drawn
    subprocess.run(["cp", str(shot), str(tmp_path / "compare-screenshot.png")], check=True)
