"""Molecule scenarios: each role converges, is idempotent and verifies in a
systemd container built from the virtual cluster's node image.

A scenario with a vars/releases.yml (molecule/nvidia) runs once per Debian
release in it, the release in DEEPOPS_<SCENARIO>_RELEASE; the others run
once. Each run is named `<scenario>` or `<scenario>-<release>` (the test's id and its log,
.deepops/integration/molecule/<name>.log) and keeps molecule's state in its
own directory beside the log, so two releases of one scenario never share it
(molecule's default is one directory per scenario name).

The runs start two at a time, as soon as this module begins, and each test
waits for its own. Measured on CI's 2 cores (2026-12-03, whole suite runs): an
NVIDIA run alone keeps them 62% busy and takes 9 minutes; two side by side (the
cluster and an NVIDIA run) kept them 86% busy and each took 10; the module took
19.6 minutes two at a time and 21.2 three at a time. The runs are CPU-bound
(about 33 core-minutes in all): only less work shortens the module.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
AT_ONCE = 2
TIMEOUT_S = 1800
LOG_DIR = REPO / ".deepops" / "integration" / "molecule"


def _runs() -> dict[str, tuple[str, dict[str, str]]]:
    """Every run by name: its scenario and the environment that selects its release."""
    runs = {}
    for path in sorted((REPO / "molecule").glob("*/molecule.yml")):
        scenario = path.parent.name
        releases = path.parent / "vars" / "releases.yml"
        if not releases.exists():
            runs[scenario] = (scenario, {})
            continue
        for release in yaml.safe_load(releases.read_text()):
            runs[f"{scenario}-{release}"] = (scenario, {f"DEEPOPS_{scenario.upper()}_RELEASE": release})
    return runs


RUNS = _runs()
# Started longest first: the whole cluster and the NVIDIA runs (about 10 minutes
# each), then the one-role scenario (1.5) beside the last of them.
QUICK_SCENARIOS = ("default",)
START_ORDER = sorted(RUNS, key=lambda name: (RUNS[name][0] in QUICK_SCENARIOS, name))


class ScenarioRuns:
    """`molecule test` for every run, AT_ONCE at a time, each logged to a file."""

    def __init__(self, names: list[str]):
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self._processes: dict[str, subprocess.Popen] = {}
        self._pool = ThreadPoolExecutor(max_workers=AT_ONCE)
        self.futures: dict[str, Future] = {name: self._pool.submit(self._run, name) for name in names}

    def log(self, name: str) -> Path:
        return LOG_DIR / f"{name}.log"

    def _run(self, name: str) -> int:
        scenario, release_env = RUNS[name]
        env = {
            **os.environ,
            **release_env,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "MOLECULE_EPHEMERAL_DIRECTORY": str(LOG_DIR / f"{name}.state"),
        }
        with self.log(name).open("w") as log:
            process = subprocess.Popen(
                [str(Path(sys.executable).parent / "molecule"), "test", "-s", scenario],
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
def scenario_runs(request):
    from deepops_py.virtual import image

    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        pytest.skip("no Docker engine: molecule needs one (scripts/start-docker.sh)")
    # Built before any scenario starts: two scenarios must not build one image at once.
    for release in ("debian12", "debian13"):
        image.ensure_node_image(image.NodeImage(release))
    # Only the runs whose tests were selected (pytest -k nvidia), in START_ORDER.
    selected = {item.callspec.params["run"] for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec")}
    runs = ScenarioRuns([name for name in START_ORDER if name in selected])
    yield runs
    runs.stop()


@pytest.mark.parametrize("run", list(RUNS))
def test_molecule_scenario(scenario_runs, run):
    returncode = scenario_runs.futures[run].result()
    output = scenario_runs.log(run).read_text(errors="replace")
    sys.stderr.write(output[-3000:])
    scenario, release_env = RUNS[run]
    command = " ".join([*(f"{key}={value}" for key, value in release_env.items()), "molecule test -s", scenario])
    assert returncode == 0, f"{command} failed (whole log: {scenario_runs.log(run)})\n" + output[-12000:]
