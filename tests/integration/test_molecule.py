"""Molecule scenarios: each role converges, is idempotent and verifies in a
systemd container built from the virtual cluster's node image.

The scenarios start two at a time, as soon as this module begins, and each
test waits for its own: they spend most of their time in dpkg and docker
exec rather than on the CPU, so two of them share CI's 2 cores well (the two
NVIDIA scenarios: 7 minutes side by side, 9.5 one after the other).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = sorted(path.parent.name for path in (REPO / "molecule").glob("*/molecule.yml"))
AT_ONCE = 2
TIMEOUT_S = 1800
LOG_DIR = REPO / ".deepops" / "integration" / "molecule"


class ScenarioRuns:
    """`molecule test` for every scenario, AT_ONCE at a time, each logged to a file."""

    def __init__(self, names: list[str]):
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self._processes: dict[str, subprocess.Popen] = {}
        self._pool = ThreadPoolExecutor(max_workers=AT_ONCE)
        self.futures: dict[str, Future] = {name: self._pool.submit(self._run, name) for name in names}

    def log(self, name: str) -> Path:
        return LOG_DIR / f"{name}.log"

    def _run(self, name: str) -> int:
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
        with self.log(name).open("w") as log:
            process = subprocess.Popen(
                [str(Path(sys.executable).parent / "molecule"), "test", "-s", name],
                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
            self._processes[name] = process
            try:
                return process.wait(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                raise

    def stop(self) -> None:
        """Cancel what has not started and stop what runs (pytest -x, Ctrl-C):
        a scenario's next run begins by destroying what this one left."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        for process in self._processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)


@pytest.fixture(scope="module")
def scenario_runs():
    from deepops_py.virtual import image

    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        pytest.skip("no Docker engine: molecule needs one (scripts/start-docker.sh)")
    # Built before any scenario starts: two scenarios must not build one image at once.
    for release in ("debian12", "debian13"):
        image.ensure_node_image(image.NodeImage(release))
    runs = ScenarioRuns(SCENARIOS)
    yield runs
    runs.stop()


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_molecule_scenario(scenario_runs, scenario):
    returncode = scenario_runs.futures[scenario].result()
    output = scenario_runs.log(scenario).read_text(errors="replace")
    sys.stderr.write(output[-3000:])
    assert returncode == 0, f"molecule test -s {scenario} failed (whole log: {scenario_runs.log(scenario)})\n" + output[-12000:]
