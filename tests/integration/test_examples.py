"""examples/slurm on the virtual cluster: Slurm accepts every example batch
script as written. ``sbatch --test-only`` asks the scheduler where and when
the job would start without submitting it, so the scripts' options (GPUs,
CPUs, memory, nodes, array, time) are checked against the deployed cluster's
real configuration. Jobs are submitted by an ordinary user where the cluster
has one that Slurm accepts jobs from, else by root.

Every ``examples/slurm/*.sbatch`` is tested, so a new example is tested by
being added, except those that ask for a MIG profile: they need a MIG layout
applied, and test_mig.py calls ``check_mig_example(cluster)`` once it is.
"""

from __future__ import annotations

import base64
import io
import re
import shlex
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from ansible_collections.deepops.cluster.plugins.module_utils.hostlist import hostlist_expand
from ansible_collections.deepops.cluster.plugins.module_utils.mig_profiles import PROFILE_NAME

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "slurm"
CONTROLLER = "ctl01"
# A GPU type asked for in a directive: --gres=gpu:TYPE:N or --gpus[-per-...]=TYPE:N
GPU_TYPE_DIRECTIVE = re.compile(r"^(#SBATCH\s+--(?:gres=gpu|gpus(?:-per-\w+)?)[=:])([^:\s]+)(:\d+\s*)$", re.M)
# What sbatch --test-only prints (to stderr) for a job that could run.
WILL_RUN = re.compile(r"Job \d+ to start at \S+ using \d+ processors on nodes (\S+) in partition (\S+)")


def mig_profiles_asked(text: str) -> list[str]:
    """The MIG profiles a batch script asks for in its directives."""
    return [match[1] for match in GPU_TYPE_DIRECTIVE.findall(text) if PROFILE_NAME.fullmatch(match[1])]


SCRIPTS = sorted(EXAMPLES.glob("*.sbatch"))
MIG_SCRIPTS = [path for path in SCRIPTS if mig_profiles_asked(path.read_text())]
PLAIN_SCRIPTS = [path for path in SCRIPTS if path not in MIG_SCRIPTS]


@pytest.fixture(scope="module")
def deployed(cluster):
    cluster.ensure_deployed()
    return cluster


def _ctl(cluster, command: str, check: bool = True) -> subprocess.CompletedProcess:
    return cluster.ssh(CONTROLLER, command, check=check)


def _copy_examples(cluster, replaced: dict[str, str] | None = None) -> str:
    """examples/slurm (with REPLACED {name: text}) in a new directory on the
    controller that every user can read; returns the directory."""
    files = {path.name: path.read_text() for path in EXAMPLES.iterdir() if path.is_file()}
    files.update(replaced or {})
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:gz") as tar:
        for name, text in sorted(files.items()):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    payload = base64.b64encode(archive.getvalue()).decode()
    out = _ctl(
        cluster,
        'dir=$(mktemp -d /tmp/deepops-examples.XXXXXX) && chmod 755 "$dir" && '
        f'echo {payload} | base64 -d | tar -xz --no-same-owner -C "$dir" && echo "$dir"',
    ).stdout.split()
    return out[-1]


def _remove(cluster, directory: str) -> None:
    _ctl(cluster, f"rm -rf {shlex.quote(directory)}", check=False)


def _submitter(cluster) -> str | None:
    """An ordinary user (uid 1000 or above) with a Slurm association, or None: root."""
    users = _ctl(cluster, "sacctmgr --noheader --parsable2 show association format=user").stdout.split()
    for user in sorted(set(users) - {"root"}):
        uid = _ctl(cluster, f"id -u {shlex.quote(user)}", check=False).stdout.strip()
        if uid.isdigit() and int(uid) >= 1000:
            return user
    return None


def _test_only(cluster, directory: str, script: str, user: str | None) -> subprocess.CompletedProcess:
    """sbatch --test-only SCRIPT, from DIRECTORY, as USER (None: root)."""
    sbatch = f"sbatch --test-only {shlex.quote(script)}"
    if user is not None:
        sbatch = f"runuser -u {shlex.quote(user)} -- {sbatch}"
    return _ctl(cluster, f"cd {shlex.quote(directory)} && {sbatch}", check=False)


def _nodes_asked(text: str) -> int:
    found = re.search(r"^#SBATCH\s+(?:--nodes=|-N\s*)(\d+)\s*$", text, re.M)
    return int(found.group(1)) if found else 1


def _computes(cluster) -> list[str]:
    nodes = cluster.deepops("virtual", "status", "--json", check=True).json()["nodes"]
    return sorted(node["name"] for node in nodes if node["role"] == "compute")


def _mig_gres(cluster) -> dict[str, set[str]]:
    """{MIG profile: nodes with such GRES}, from Slurm's node records."""
    found: dict[str, set[str]] = {}
    for line in _ctl(cluster, "scontrol show node --oneliner").stdout.splitlines():
        node, gres = re.search(r"NodeName=(\S+)", line), re.search(r"\bGres=(\S+)", line)
        if not node or not gres:
            continue
        for item in gres.group(1).split(","):
            parts = item.split("(")[0].split(":")
            if len(parts) == 3 and PROFILE_NAME.fullmatch(parts[1]):
                found.setdefault(parts[1], set()).add(node.group(1))
    return found


@pytest.fixture(scope="module")
def examples_dir(deployed):
    directory = _copy_examples(deployed)
    yield directory
    _remove(deployed, directory)


@pytest.fixture(scope="module")
def submitter(deployed):
    return _submitter(deployed)


def test_the_examples_split_into_plain_and_mig():
    assert PLAIN_SCRIPTS and MIG_SCRIPTS, (PLAIN_SCRIPTS, MIG_SCRIPTS)


@pytest.mark.parametrize("script", PLAIN_SCRIPTS, ids=lambda path: path.name)
def test_slurm_would_run_the_example(deployed, examples_dir, submitter, script):
    result = _test_only(deployed, examples_dir, script.name, submitter)
    assert result.returncode == 0 and "to start at" in result.stderr, (submitter, result.stdout, result.stderr)
    nodes = hostlist_expand(WILL_RUN.search(result.stderr).group(1))
    # on as many nodes as the script asks for, all of them compute nodes
    assert len(nodes) == _nodes_asked(script.read_text()), result.stderr
    assert set(nodes) <= set(_computes(deployed)), result.stderr


def test_slurm_refuses_an_example_the_cluster_cannot_hold(deployed, examples_dir, submitter):
    """The check above can fail: one node more than the cluster has is refused."""
    script = EXAMPLES / "ddp-multi-node.sbatch"
    too_many = len(_computes(deployed)) + 1
    text = re.sub(r"^#SBATCH --nodes=\d+$", f"#SBATCH --nodes={too_many}", script.read_text(), flags=re.M)
    directory = _copy_examples(deployed, {script.name: text})
    try:
        result = _test_only(deployed, directory, script.name, submitter)
    finally:
        _remove(deployed, directory)
    assert result.returncode != 0 and "to start at" not in result.stderr, result.stderr


def check_mig_example(cluster) -> None:
    """Every example that asks for a MIG profile would run, on a node with
    such MIG devices. For test_mig.py to call with its MIG layout applied.

    The profile is the one thing the example says to change: one the
    cluster's GPUs do not offer (the example's 1g.10gb is an 80GB GPU's; the
    virtual cluster's A100s are 40GB) is replaced in the script by one that
    some node has, and nothing else is. A profile no node has is refused, so
    this check can fail.
    """
    offered = _mig_gres(cluster)
    assert offered, "no node has MIG GRES: call check_mig_example with a MIG layout applied"
    assert MIG_SCRIPTS, "no example asks for a MIG profile"
    user = _submitter(cluster)
    for script in MIG_SCRIPTS:
        text = script.read_text()
        asked = mig_profiles_asked(text)
        runnable = text if set(asked) <= set(offered) else _with_profile(text, sorted(offered)[0])
        missing = f"missing-{script.name}"
        directory = _copy_examples(cluster, {script.name: runnable, missing: _with_profile(text, "7g.999gb")})
        try:
            result = _test_only(cluster, directory, script.name, user)
            refused = _test_only(cluster, directory, missing, user)
        finally:
            _remove(cluster, directory)
        assert result.returncode == 0 and "to start at" in result.stderr, (script.name, user, result.stderr)
        nodes = set(hostlist_expand(WILL_RUN.search(result.stderr).group(1)))
        assert nodes and all(nodes <= offered[name] for name in mig_profiles_asked(runnable)), (result.stderr, offered)
        assert refused.returncode != 0 and "to start at" not in refused.stderr, refused.stderr


def _with_profile(text: str, profile: str) -> str:
    """TEXT with every MIG profile its directives ask for replaced by PROFILE."""
    return GPU_TYPE_DIRECTIVE.sub(lambda m: m[1] + (profile if PROFILE_NAME.fullmatch(m[2]) else m[2]) + m[3], text)
