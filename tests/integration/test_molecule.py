"""Molecule scenarios: each role converges, is idempotent and verifies in a
systemd container built from the virtual cluster's node image."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ALL_SCENARIOS = sorted(path.parent.name for path in (REPO / "molecule").glob("*/molecule.yml"))
# The NVIDIA stack scenarios (molecule/nvidia-debian12, -debian13) are not in
# the suite yet: each took about 40 minutes on the 2-core CI machines (under
# load), which CI's budget cannot hold. Run them by hand with
# `molecule test -s nvidia-debian12`; they join this list once they fit.
NOT_IN_SUITE_YET = {"nvidia-debian12", "nvidia-debian13"}
SCENARIOS = [name for name in ALL_SCENARIOS if name not in NOT_IN_SUITE_YET]


@pytest.fixture(scope="module")
def node_image():
    from deepops_py.virtual import image

    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        pytest.skip("no Docker engine: molecule needs one (scripts/start-docker.sh)")
    image.ensure_node_image(image.NodeImage("debian12"))
    # Scenarios on Debian 13 use its node image too.
    if any("deepops-node:debian13" in (REPO / "molecule" / name / "molecule.yml").read_text() for name in SCENARIOS):
        image.ensure_node_image(image.NodeImage("debian13"))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_molecule_scenario(node_image, scenario):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(
        [str(Path(sys.executable).parent / "molecule"), "test", "-s", scenario],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1800,
    )
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-8000:]
