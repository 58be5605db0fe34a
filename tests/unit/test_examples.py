"""examples/slurm: the batch scripts are sound shell and carry the options
every example must have; the MIG example asks for a profile that exists.
tests/integration/test_examples.py submits them with sbatch --test-only."""

from __future__ import annotations

import os
import py_compile
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.deepops.cluster.plugins.module_utils import mig_profiles

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "slurm"
SCRIPTS = sorted(EXAMPLES.glob("*.sbatch"))
SHELL_FILES = [*SCRIPTS, *sorted(EXAMPLES.glob("*.sh"))]
# --gres=gpu:TYPE:N or --gpus[-per-...]=TYPE:N
GPU_TYPE = re.compile(r"^#SBATCH\s+--(?:gres=gpu|gpus(?:-per-\w+)?)[=:]([^:\s]+):\d+\s*$", re.M)


def _shellcheck() -> str | None:
    """shellcheck from the virtual environment or the system, if either has it."""
    return shutil.which("shellcheck", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


def _directives(text: str) -> list[str]:
    """The #SBATCH lines sbatch reads: those before the first command."""
    found = []
    for line in text.splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("#SBATCH"):
            found.append(stripped)
        elif stripped and not stripped.startswith("#"):
            break
    return found


def test_there_are_examples():
    names = {path.name for path in SCRIPTS}
    assert {"ddp-single-node.sbatch", "ddp-multi-node.sbatch", "mig-instance.sbatch", "sweep-array.sbatch"} <= names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_script_has_the_required_lines(script):
    text = script.read_text()
    assert text.startswith("#!/bin/bash\n"), "a batch script needs its shebang on the first line"
    assert re.search(r"^set -euo pipefail$", text, re.M), "set -euo pipefail"
    directives = _directives(text)
    assert any(re.match(r"#SBATCH --time=\S+$", line) for line in directives), "a #SBATCH --time before the first command"
    assert any(re.match(r"#SBATCH --output=\S*%x\S*$", line) for line in directives), "#SBATCH --output with %x"
    # every script runs train.py through srun, and says it at the end
    assert "srun " in text and "$TRAIN_SCRIPT" in text


@pytest.mark.parametrize("path", SHELL_FILES, ids=lambda path: path.name)
def test_shell_is_sound(path):
    """bash -n always; shellcheck too where it is installed (it is not a
    dependency, so without it bash -n is the whole check)."""
    result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    shellcheck = _shellcheck()
    if shellcheck is not None:
        # --external-sources follows `source nccl-env.sh` (its `# shellcheck source=` line)
        result = subprocess.run(
            [shellcheck, "--external-sources", "--source-path=SCRIPTDIR", str(path)], capture_output=True, text=True
        )
        assert result.returncode == 0, result.stdout + result.stderr


def test_every_gpu_type_asked_is_a_mig_profile_or_a_model():
    known_profiles = {name for model in mig_profiles.MODELS.values() for name in model.profile_names}
    mig_scripts = []
    for script in SCRIPTS:
        for gpu_type in GPU_TYPE.findall(script.read_text()):
            if mig_profiles.PROFILE_NAME.fullmatch(gpu_type):
                assert gpu_type in known_profiles, f"{script.name}: {gpu_type} is no model's MIG profile"
                mig_scripts.append(script.name)
    assert mig_scripts == ["mig-instance.sbatch"]


def test_multi_node_script_derives_the_rendezvous_from_slurm():
    text = (EXAMPLES / "ddp-multi-node.sbatch").read_text()
    assert "#SBATCH --nodes=2" in _directives(text)  # what the virtual cluster has
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1' in text
    assert "SLURM_JOB_ID % " in text  # the port from the job id
    assert re.search(r"source \"\$EXAMPLES_DIR/nccl-env.sh\"", text)
    for option in ('--nnodes="$SLURM_NNODES"', "--rdzv-backend=c10d", '--rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT"'):
        assert option in text


def test_nccl_env_keeps_values_from_the_environment(tmp_path):
    """Sourced with nothing set it gives the defaults; a value set before wins;
    an unknown fabric fails."""
    env_file = EXAMPLES / "nccl-env.sh"
    show = f'set -euo pipefail; source "{env_file}" 2>/dev/null; env | grep "^NCCL_" | sort'
    clean = {"PATH": "/usr/bin:/bin"}
    defaults = subprocess.run(["bash", "-c", show], env=clean, capture_output=True, text=True, check=True).stdout
    assert "NCCL_DEBUG=WARN\n" in defaults and "NCCL_IB_DISABLE" not in defaults
    roce = subprocess.run(
        ["bash", "-c", show], capture_output=True, text=True, check=True,
        env={**clean, "TRAINING_FABRIC": "roce", "NCCL_DEBUG": "INFO", "NCCL_IB_GID_INDEX": "3",
             "NCCL_SOCKET_IFNAME": "=ens1f0"},
    ).stdout.splitlines()
    assert {"NCCL_DEBUG=INFO", "NCCL_IB_GID_INDEX=3", "NCCL_SOCKET_IFNAME==ens1f0"} <= set(roce)
    tcp = subprocess.run(["bash", "-c", show], env={**clean, "TRAINING_FABRIC": "tcp"}, capture_output=True, text=True)
    assert "NCCL_IB_DISABLE=1" in tcp.stdout.splitlines()
    bad = subprocess.run(["bash", "-c", show], env={**clean, "TRAINING_FABRIC": "nvlink"}, capture_output=True, text=True)
    assert bad.returncode != 0


def test_array_script_maps_every_index_to_a_distinct_combination(tmp_path):
    """Run the sweep script with srun stubbed: each index of --array gets its
    own learning rate and batch size, and one past the grid is refused."""
    script = EXAMPLES / "sweep-array.sbatch"
    array = re.search(r"^#SBATCH --array=(\d+)-(\d+)(?:%\d+)?$", script.read_text(), re.M)
    first, last = int(array.group(1)), int(array.group(2))
    stub = tmp_path / "srun"
    stub.write_text('#!/bin/bash\necho "$*"\n')
    stub.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "SLURM_SUBMIT_DIR": str(EXAMPLES), "SLURM_JOB_NAME": "sweep",
           "SLURM_JOB_ID": "7", "SLURM_ARRAY_JOB_ID": "5", "SLURM_CPUS_PER_TASK": "2"}

    def run(index: int) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(script)], env={**env, "SLURM_ARRAY_TASK_ID": str(index)},
                              capture_output=True, text=True)

    combinations = set()
    for index in range(first, last + 1):
        result = run(index)
        assert result.returncode == 0, result.stderr
        command = result.stdout.splitlines()[-1]
        lr = re.search(r"--lr (\S+)", command).group(1)
        batch_size = re.search(r"--batch-size (\S+)", command).group(1)
        combinations.add((lr, batch_size))
    assert len(combinations) == last - first + 1
    assert run(last + 1).returncode != 0


def test_train_py_compiles(tmp_path):
    py_compile.compile(str(EXAMPLES / "train.py"), cfile=str(tmp_path / "train.pyc"), doraise=True)
