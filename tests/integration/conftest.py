"""Fixtures that drive a real virtual cluster through the deepops CLI.

The tests run the installed ``deepops`` exactly as a user would, with their
own state directory so they never touch a user's cluster state.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from molecule_runs import MOLECULE_RUNS, START_ORDER, ScenarioRuns

REPO = Path(__file__).resolve().parents[2]
DEEPOPS = Path(sys.executable).parent / "deepops"


# Modules that must run first: they need hosts no deploy has touched yet. The
# others deploy (idempotently) as they need to, in name order, and the
# molecule module, which only waits for runs that started with the suite, last.
FRESH_CLUSTER_MODULES = ("test_foundation.py",)
MOLECULE_MODULE = "test_molecule.py"


def pytest_collection_modifyitems(items):
    # stable: name order otherwise
    items.sort(key=lambda item: (item.path.name not in FRESH_CLUSTER_MODULES, item.path.name == MOLECULE_MODULE))
    for item in items:
        item.add_marker(pytest.mark.integration)


def pytest_collection_finish(session):
    """Start the selected molecule runs in the background (tests/support/molecule_runs.py)."""
    selected = {item.callspec.params["run"] for item in session.items if item.path.name == MOLECULE_MODULE}
    if not selected or session.config.option.collectonly or not _docker_works():
        return  # test_molecule.py skips (a failure in CI) without an engine
    from deepops_py.virtual import image

    # Built before anything starts: two clusters or scenarios must not build
    # one image at once. The apt cache images include the node images.
    for release in image.SUITES:
        image.ensure_aptcache_image(image.AptCacheImage(image.NodeImage(release)))
    session.config.stash[MOLECULE_RUNS] = ScenarioRuns([name for name in START_ORDER if name in selected])


def pytest_sessionfinish(session):
    runs = session.config.stash.get(MOLECULE_RUNS, None)
    if runs is not None:
        runs.stop()


def pytest_terminal_summary(terminalreporter, config):
    """When each molecule run started and how long it took: its part of the CI time."""
    runs = config.stash.get(MOLECULE_RUNS, None)
    if runs is None or not runs.times:
        return
    terminalreporter.section("molecule runs (beside the tests, from the suite's start)")
    for name, (start, end) in sorted(runs.times.items(), key=lambda item: item[1]):
        terminalreporter.write_line(f"{name}: started at {start / 60:.1f} min, ended at {end / 60:.1f} min "
                                    f"({(end - start) / 60:.1f} min)")


def _docker_works() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


def _changed_nothing(stdout: str) -> bool:
    """Whether a run's --json summary says it changed nothing on any host."""
    try:
        hosts = json.loads(stdout)["hosts"]
    except (ValueError, KeyError, TypeError):
        return False
    return bool(hosts) and all(row.get("changed") == 0 for row in hosts.values())


@dataclass
class CliResult:
    rc: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)


# deepops commands that leave the cluster's configuration as a deploy made it
# (they read, or run and cancel their own jobs; a simulated GPU fault is the
# hardware's state, which no deploy manages, and its test clears it). Any other
# command, a deploy that failed, a deploy with options (tags, -e) that changed
# a host, and a command started with popen leave the cluster possibly unconverged.
KEEPS_CONVERGED = (("plan",), ("status",), ("runs",), ("check",), ("validate",), ("mig", "show"),
                   ("virtual", "status"), ("virtual", "fault"))
PLAIN_DEPLOYS = (("deploy",), ("deploy", "--json"))


def _text(output: bytes | str | None) -> str:
    """A timed-out run's captured output: bytes even where the run asked for text."""
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""


class Cluster:
    """The virtual cluster under test, reached the way Ansible reaches it.

    It tracks whether the last deploy converged it and nothing since could have
    changed that, so that a module needing a deployed cluster deploys only when
    it must (``ensure_deployed``): a no-op deploy takes a minute here, and most
    modules follow one that ended converged. Tests that change a host through
    ssh (faults, drift) undo it themselves, as they always had to.
    """

    def __init__(self, state_dir: Path):
        self.state_dir = state_dir
        # Its own state and cluster name (one per checkout): a user's virtual
        # cluster, or another checkout's test run, on the same engine is left alone.
        name = "it-" + hashlib.sha256(str(REPO).encode()).hexdigest()[:8]
        self.env = {**os.environ, "DEEPOPS_STATE_DIR": str(state_dir), "DEEPOPS_VIRTUAL_NAME": name,
                    "PYTHONUNBUFFERED": "1"}
        self.env.pop("DEEPOPS_INVENTORY", None)
        self.converged = False

    def deepops(self, *args: str, timeout: int = 1800, check: bool = False) -> CliResult:
        was_converged = self.converged
        if not any(args[:len(prefix)] == prefix for prefix in KEEPS_CONVERGED):
            self.converged = False  # also when the command times out
        try:
            proc = subprocess.run(
                [str(DEEPOPS), *args], cwd=REPO, env=self.env, capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired as expired:
            # Say where it hung: the progress lines (plays, task starts) end with the task that never ended.
            raise AssertionError(
                f"deepops {' '.join(args)} ran past {timeout} s; the end of what it printed:\n"
                f"{_text(expired.stderr)[-6000:]}"
            ) from None
        if args in PLAIN_DEPLOYS and proc.returncode == 0:
            self.converged = True
        elif was_converged and args[0] == "deploy" and proc.returncode == 0 and _changed_nothing(proc.stdout):
            self.converged = True  # a run with options (tags, -e) that changed no host leaves them as they were
        elif args[0] == "upgrade" and "--yes" in args and proc.returncode == 0:
            self.converged = True  # every step ran every component on its hosts, as a deploy does
        # Echo what the user would have seen, for the test log.
        sys.stderr.write(f"\n$ deepops {' '.join(args)}  (rc={proc.returncode})\n{proc.stderr[-6000:]}\n")
        result = CliResult(proc.returncode, proc.stdout, proc.stderr)
        if check and proc.returncode != 0:
            raise AssertionError(f"deepops {' '.join(args)} failed rc={proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return result

    def ensure_deployed(self, timeout: int = 3600) -> None:
        """Deploy unless the last deploy converged the cluster and nothing since could have changed it."""
        if not self.converged:
            self.deepops("deploy", timeout=timeout, check=True)

    def popen(self, *args: str) -> subprocess.Popen:
        self.converged = False
        return subprocess.Popen(
            [str(DEEPOPS), *args], cwd=REPO, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    @property
    def inventory_path(self) -> Path:
        return self.state_dir / "virtual" / "inventory.yml"

    def hostvars(self) -> dict[str, dict]:
        data = yaml.safe_load(self.inventory_path.read_text())
        found: dict[str, dict] = {}

        def walk(group: dict, inherited: dict) -> None:
            merged = {**inherited, **(group.get("vars") or {})}
            for name, hvars in (group.get("hosts") or {}).items():
                found[name] = {**merged, **found.get(name, {}), **(hvars or {})}
            for child in (group.get("children") or {}).values():
                walk(child or {}, merged)

        walk(data["all"], {})
        return found

    @property
    def hosts(self) -> list[str]:
        return sorted(self.hostvars())

    def group(self, name: str) -> list[str]:
        """The hosts the inventory puts in group NAME (its own hosts, not its children's)."""
        data = yaml.safe_load(self.inventory_path.read_text())
        return sorted(((data["all"].get("children") or {}).get(name) or {}).get("hosts") or {})

    @property
    def computes(self) -> list[str]:
        return self.group("slurm_compute")

    def ssh(self, host: str, command: str, check: bool = True, *, user: str | None = None,
            login_shell: bool = False, timeout: int = 120) -> subprocess.CompletedProcess:
        """COMMAND on HOST over SSH with the cluster's key: as Ansible logs in, or as USER (cluster_users
        log in with that key too); in a login shell (profile scripts read, as a user's session) if asked."""
        hv = self.hostvars()[host]
        user = user or hv.get("ansible_user", "root")
        argv = [
            "ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
            "-i", hv["ansible_ssh_private_key_file"], "-p", str(hv["ansible_port"]),
            *shlex.split(hv.get("ansible_ssh_common_args", "")),
            f"{user}@{hv['ansible_host']}", f"bash -lc {shlex.quote(command)}" if login_shell else command,
        ]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"ssh {user}@{host} {command!r} failed rc={proc.returncode}: {proc.stdout}{proc.stderr}")
        return proc

    def container(self, host: str) -> str:
        nodes = self.deepops("virtual", "status", "--json", check=True).json()["nodes"]
        return next(node["container"] for node in nodes if node["name"] == host)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory) -> Cluster:
    if not _docker_works():
        pytest.skip("no Docker engine: integration tests need one (scripts/start-docker.sh)")
    state_dir = REPO / ".deepops" / "integration"
    state_dir.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(state_dir)
    cluster.deepops("virtual", "down")  # start from nothing left by an earlier, interrupted session
    cluster.deepops("virtual", "up", "--login", timeout=1800, check=True)  # login01: test_login.py
    yield cluster
    if os.environ.get("DEEPOPS_KEEP_CLUSTER") != "1":
        cluster.deepops("virtual", "down")
