"""index.html in real headless Chromium: renders non-blank, DOM has charts and leaderboards, no console errors."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from tests.conftest import tankbench
from tests.reportdata import fleet_each_journal, imported_journal, lab_zfs_journal, local_journal

pytestmark = pytest.mark.browser


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "Chromium is missing: install the Debian package `chromium` (scripts/setup does)"
    return subprocess.run(
        [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA PNG into rows of raw pixel bytes (stdlib only)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, bpp = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a, b = line[i - bpp] if i >= bpp else 0, prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows


def console_errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


def test_console_error_detection_works(tmp_path: Path) -> None:
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>undefinedFn();</script></body></html>")
    assert console_errors(chromium("--dump-dom", page.as_uri()).stderr)


@pytest.mark.parametrize("which", ["local", "lab", "labzfs"])
def test_report_renders(tmp_path: Path, which: str) -> None:
    journal = {"local": local_journal, "lab": imported_journal, "labzfs": lab_zfs_journal}[which](tmp_path)
    out = tmp_path / "rep"
    r = tankbench("report", "--journal", journal, "--out", str(out))
    assert r.returncode == 0, r.stderr
    uri = (out / "index.html").as_uri()
    dom = chromium("--dump-dom", uri)
    assert dom.returncode == 0 and not console_errors(dom.stderr), dom.stderr[-2000:]
    assert dom.stdout.count('class="leaderboard"') >= 2 and '<svg class="chart"' in dom.stdout
    assert 'id="warnings"' in dom.stdout and 'id="recommendations"' in dom.stdout
    if which == "local":
        assert 'data-series="load1"' in dom.stdout and 'id="emulated"' not in dom.stdout
        assert 'data-figure="iodepth-iops-read random 4k"' in dom.stdout and 'class="heatmap"' in dom.stdout
    elif which == "labzfs":
        assert 'data-series="arc_hits_per_s"' in dom.stdout and '<tr class="zvol">' in dom.stdout
        assert 'data-figure="recordsize-physical_per_logical-write seq 4k"' in dom.stdout  # seed 004's figure
        assert 'data-figure="percentiles-write seq 4k"' in dom.stdout  # fio-plot's percentile plot
        assert 'data-metric="durable_mibs"' in dom.stdout and "Ranked by <b>durable MiB/s</b>" in dom.stdout
    else:
        assert 'id="emulated"' in dom.stdout and '<tr class="zvol">' in dom.stdout
    shot = tmp_path / f"{which}.png"
    s = chromium(f"--screenshot={shot}", "--window-size=1280,2200", uri)
    assert s.returncode == 0 and shot.exists(), s.stderr[-2000:]
    assert not console_errors(s.stderr)
    width, height, rows = png_pixels(shot.read_bytes())
    assert (width, height) == (1280, 2200)
    colours = {row[i : i + 3] for row in rows[::10] for i in range(0, len(row), 3 * 10)}
    assert len(colours) > 20, "screenshot is blank"
    keep = Path(__file__).resolve().parents[2] / "tests" / "browser" / "last-screenshots"
    keep.mkdir(exist_ok=True)
    shutil.copy(shot, keep / shot.name)  # for a human to look at


def test_fleet_each_report_shows_the_hosts_side_by_side(tmp_path: Path) -> None:
    """hosts_mode = "each" (issue 34 item 6): index.html compares the hosts side by side and says that the rest
    of it pools their runs per test; each host's own report is beside it."""
    out = tmp_path / "rep"
    r = tankbench("report", "--journal", fleet_each_journal(tmp_path), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "pools their runs per test" in r.stdout
    dom = chromium("--dump-dom", (out / "index.html").as_uri())
    assert dom.returncode == 0 and not console_errors(dom.stderr), dom.stderr[-2000:]
    page = dom.stdout
    assert '<h2 id="hosts">Hosts side by side: local vs ssh:root@10.0.0.9</h2>' in page
    assert "pool the hosts' runs per test" in page and "<code>ssh-root-10.0.0.9/</code>" in page
    assert "<th>ssh:root@10.0.0.9 / local</th>" in page
    assert page.count("1.10× (") == 16, "every test on the second host against the first"  # its figures × 1.1
    assert "<td>vda: QEMU HARDDISK</td>" in page and "{'vda'" not in page
    assert page.index('id="hosts"') < page.index('id="leaderboards"'), "before the pooled leaderboards"
    for slug in ("local", "ssh-root-10.0.0.9"):
        assert (out / slug / "index.html").exists() and 'id="hosts"' not in (out / slug / "index.html").read_text()
    assert (out / "hosts.md").read_text().startswith("# Hosts side by side: local vs ssh:root@10.0.0.9")
    shot = tmp_path / "fleet.png"
    s = chromium(f"--screenshot={shot}", "--window-size=1280,1400", (out / "index.html").as_uri())
    assert s.returncode == 0 and shot.exists() and not console_errors(s.stderr)
    _, _, rows = png_pixels(shot.read_bytes())
    assert len({row[i : i + 3] for row in rows[::10] for i in range(0, len(row), 30)}) > 20, "screenshot is blank"
    keep = Path(__file__).resolve().parents[2] / "tests" / "browser" / "last-screenshots"
    keep.mkdir(exist_ok=True)
    shutil.copy(shot, keep / shot.name)
