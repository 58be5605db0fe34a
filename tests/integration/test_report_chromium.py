"""The acceptance report (deepops validate --report) in a real browser: Debian's headless Chromium.

No cluster is needed: a synthetic report is rendered to a file, Chromium takes
a screenshot of it and dumps the DOM it built, and the test checks that the
screenshot is a real image and that the plots are in the rendered page.
Chromium comes from scripts/setup.sh (``system_packages``); without it this
test fails, it does not skip.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from deepops_py import html_report, reports
from deepops_py.run_results import RunResult

WIDTH, HEIGHT = 1280, 2000
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def nccl(node: str, plateau: float, simulated: bool = True) -> dict:
    curve = [[2**k, round(min(plateau, 2**k / 2**22 * plateau / 4), 2)] for k in range(3, 31)]
    return {"check": "nccl", "node": node, "status": "pass" if plateau >= 300 else "fail", "simulated": simulated,
            "detail": f"busbw {plateau} GB/s, threshold 300", "measurements": {
                "busbw_gbps": plateau, "threshold_gbps": 300.0, "curve": curve, "gpus": 8, "model": "H100 80GB HBM3",
                "interconnect": "NVLink"}}


DATA = {
    "validate_nodes": [{"check": "nodes", "node": n, "status": "pass", "detail": "idle"} for n in ("gpu01", "gpu02")],
    "validate_nccl": [nccl("gpu01", 370.0), nccl("gpu02", 120.0)],
    "validate_dcgm": [{"check": "dcgm", "node": "gpu01", "status": "pass", "simulated": True, "measurements": {
        "level": 3, "tests": {name: {str(i): "pass" for i in range(8)} for name in ("software", "pcie", "memory")}}}],
    "validate_burnin": [{"check": "burnin", "node": "gpu01", "status": "pass", "simulated": True, "measurements": {"gpus": [
        {"index": i, "tflops": 900.0 - i, "peak_tflops": 989.4, "mem_bw_gbps": 3000.0, "peak_mem_bw_gbps": 3350.0,
         "throttle": []} for i in range(8)]}}],
    "validate_versions": {"slurm": "22.05.8", "nodes": {"gpu01": {"driver": "535.104.05", "cuda": "12.2", "nccl": "2.18.3"}}},
}


def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        pytest.fail("chromium is not installed: run scripts/setup.sh (as root it installs Debian's chromium package)")
    return found


def run_chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    argv = [
        chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
        "--hide-scrollbars", f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}", *args,
    ]
    # Its own HOME: the browser writes caches and settings there, never into the user's.
    env = {**os.environ, "HOME": str(tmp_path)}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    return proc


class Plots(HTMLParser):
    def __init__(self):
        super().__init__()
        self.nccl_nodes: list[str] = []
        self.thresholds = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "svg" and attrs.get("data-plot") == "nccl":
            self.nccl_nodes.append(attrs.get("data-node"))
        if tag == "line" and "threshold" in (attrs.get("class") or "").split():
            self.thresholds += 1

    handle_startendtag = handle_starttag


@pytest.fixture
def page(tmp_path) -> Path:
    result = RunResult(run_id="20261130-101500-validate-ab12", command="validate", playbook="validate.yml",
                       inventory="inv.yml", start="s", artifacts="/tmp/runs/x", status="ok", data=DATA)
    path = tmp_path / "acceptance.html"
    path.write_text(html_report.render_html(reports.report_from_run(result), cluster_name="dgx-pod",
                                            generated_at="2026-11-30T10:20:00+00:00"), encoding="utf-8")
    return path


def test_chromium_renders_a_screenshot_of_the_report(page, tmp_path):
    shot = tmp_path / "report.png"
    run_chromium(tmp_path, f"--screenshot={shot}", page.as_uri())
    assert shot.is_file(), "chromium wrote no screenshot"
    data = shot.read_bytes()
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (WIDTH, HEIGHT)
    # A blank page of this size compresses to a few KiB; tables, plots and text take far more.
    assert len(data) > 40_000, f"screenshot of {len(data)} bytes: is the page blank?"


def test_the_plots_are_in_the_rendered_dom(page, tmp_path):
    dom = run_chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    plots = Plots()
    plots.feed(dom)
    assert plots.nccl_nodes == ["gpu01", "gpu02"]  # svg[data-plot=nccl], one per node
    assert plots.thresholds == 2
    assert "SIMULATED" in dom and "22.05.8" in dom
