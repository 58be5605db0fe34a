"""Molecule scenario runs in the background of the integration suite.

Each run is `molecule test -s <scenario>` for one scenario and, where the
scenario has a vars/releases.yml (molecule/nvidia), one Debian release (in
DEEPOPS_<SCENARIO>_RELEASE). A run is named `<scenario>` or
`<scenario>-<release>`, logs to .deepops/integration/molecule/<name>.log and
keeps molecule's state in its own directory beside the log, so two releases
of one scenario never share it (molecule's default is one directory per
scenario name).

Why in the background: the runs are CPU-bound (about 33 core-minutes on CI's
2 cores) and took a third of CI when they ran on their own, while the rest of
the integration suite leaves the cores partly idle (deploys keep them about
70% busy; failover, upgrade, health and alert tests mostly wait). So the
runs start when the suite starts, two at a time, at a low CPU priority: their
Ansible controllers run niced, and their containers get a small CPU weight
(docker update --cpu-shares), so the tests in the foreground keep nearly all
the CPU they want and the runs take what is left. test_molecule.py, ordered
last (conftest.py), waits for them; the summary at the end says when each ran.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
LOG_DIR = REPO / ".deepops" / "integration" / "molecule"
AT_ONCE = 2
# A run may wait behind the whole foreground suite (about 35 minutes on CI).
TIMEOUT_S = 3600
# Niceness of the runs' controllers (weight 110 against 1024 at nice 0) and
# the CPU weight of their containers (against docker's default 1024): about a
# tenth of a contended core, so a run never stalls outright, all of an idle one.
NICE = 10
CONTAINER_CPU_SHARES = 100
WEIGHT_POLL_S = 2.0
# The molecule/cluster scenario's virtual cluster: the name its vars/cluster.yml
# picks by default (so a run by hand and the suite's share one cluster and
# state directory), given to the runs explicitly, so its containers are known.
CLUSTER_NAME = "mol-" + hashlib.sha256(str(REPO).encode()).hexdigest()[:8]
# Started longest first: the whole cluster and the NVIDIA runs (about 10
# minutes each alone), then the one-role scenario beside the last of them.
QUICK_SCENARIOS = ("default",)


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
START_ORDER = sorted(RUNS, key=lambda name: (RUNS[name][0] in QUICK_SCENARIOS, name))


def command_line(name: str) -> str:
    """How to run one of them by hand."""
    scenario, release_env = RUNS[name]
    return " ".join([*(f"{key}={value}" for key, value in release_env.items()), "molecule test -s", scenario])


def _is_molecule_container(labels: str) -> bool:
    """Containers of the molecule driver (label owner=molecule) and of the cluster scenario."""
    owner, _sep, virtual = labels.partition(" ")
    return owner == "molecule" or virtual == CLUSTER_NAME


class ScenarioRuns:
    """`molecule test` for each named run, AT_ONCE at a time, at low priority, each logged to a file."""

    def __init__(self, names: list[str]):
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.started_at = time.monotonic()
        self.times: dict[str, tuple[float, float]] = {}  # name: (start, end) in seconds from started_at
        self._processes: dict[str, subprocess.Popen] = {}
        self._stopping = threading.Event()
        self._weighted: set[str] = set()
        self._pool = ThreadPoolExecutor(max_workers=AT_ONCE)
        self.futures: dict[str, Future] = {name: self._pool.submit(self._run, name) for name in names}
        threading.Thread(target=self._keep_containers_light, daemon=True).start()

    def log(self, name: str) -> Path:
        return LOG_DIR / f"{name}.log"

    def _run(self, name: str) -> int:
        scenario, release_env = RUNS[name]
        env = {
            **os.environ,
            **release_env,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "MOLECULE_EPHEMERAL_DIRECTORY": str(LOG_DIR / f"{name}.state"),
            "DEEPOPS_MOLECULE_CLUSTER_NAME": CLUSTER_NAME,
        }
        start = time.monotonic() - self.started_at
        with self.log(name).open("w") as log:
            process = subprocess.Popen(
                ["nice", "-n", str(NICE), str(Path(sys.executable).parent / "molecule"), "test", "-s", scenario],
                # stdin: not pytest's, which ansible-playbook refuses when it is non-blocking
                cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            self._processes[name] = process
            try:
                return process.wait(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                raise
            finally:
                self.times[name] = (start, time.monotonic() - self.started_at)

    def _keep_containers_light(self) -> None:
        """Give every container the runs start a small CPU weight, as soon as it appears.

        Their work arrives by docker exec and SSH, outside the niced process
        tree, so niceness alone would leave it at full priority. Stops once
        every run has ended."""
        while not self._stopping.wait(WEIGHT_POLL_S) and not all(run.done() for run in self.futures.values()):
            listed = subprocess.run(
                ["docker", "ps", "--no-trunc", "--format", '{{.ID}} {{.Label "owner"}} {{.Label "deepops.virtual"}}'],
                capture_output=True, text=True,
            )
            fresh = []
            for line in listed.stdout.splitlines():
                container, _sep, labels = line.partition(" ")
                if container not in self._weighted and _is_molecule_container(labels):
                    fresh.append(container)
            if fresh and subprocess.run(["docker", "update", "--cpu-shares", str(CONTAINER_CPU_SHARES), *fresh],
                                        capture_output=True).returncode == 0:
                self._weighted.update(fresh)

    def stop(self) -> None:
        """Cancel what has not started and stop what runs (pytest -x, Ctrl-C):
        a scenario's next run begins by destroying what this one left."""
        self._stopping.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        for process in self._processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)


# Where conftest.py keeps the session's runs for test_molecule.py.
MOLECULE_RUNS = pytest.StashKey[ScenarioRuns]()
