"""The lookup deepops.cluster.run_unchanged: true until any task of the run
changes anything, on any host; never true without the callback that tracks it.
The slurm role reuses the NVIDIA preflight's GPU facts only while it holds."""

from __future__ import annotations

from pathlib import Path

import jinja2
import yaml
from local_playbook import run_local_playbook

REPO = Path(__file__).resolve().parents[2]
ASK = {"ansible.builtin.debug": {"msg": "{{ lookup('deepops.cluster.run_unchanged') }}"}}


def _play(tmp_path: Path, tasks: list[dict]) -> Path:
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "connection": "local", "gather_facts": False,
                                         "tasks": tasks}]))
    return playbook


def test_true_until_a_task_changes_something(tmp_path):
    tasks = [{"name": "first", **ASK},
             {"name": "unchanged", "ansible.builtin.command": "true", "changed_when": False},
             {"name": "still", **ASK},
             {"name": "changes", "ansible.builtin.command": "true", "changed_when": True},
             {"name": "after", **ASK}]
    first, _unchanged, still, _changes, after = run_local_playbook(_play(tmp_path, tasks))
    assert [task["hosts"]["localhost"]["msg"] for task in (first, still, after)] == [True, True, False]


def test_never_true_without_the_callback(tmp_path):
    [first] = run_local_playbook(_play(tmp_path, [{"name": "first", **ASK}]),
                                 env={"ANSIBLE_CALLBACKS_ENABLED": "deepops.cluster.preload"})
    assert first["hosts"]["localhost"]["msg"] is False


def _gather(path: str) -> dict:
    tasks = yaml.safe_load((REPO / path).read_text())
    [gather] = [task for task in tasks if "deepops.cluster.nvidia_gpu_facts" in task]
    return gather


def test_the_slurm_preflight_reads_the_gpus_again_unless_the_run_read_them_fully_and_changed_nothing():
    driver = _gather("roles/nvidia_driver/tasks/preflight.yml")["deepops.cluster.nvidia_gpu_facts"]
    slurm = _gather("roles/slurm/tasks/preflight.yml")
    # The driver's read is the one slurm can reuse: topology read, the same MIG minors file.
    assert driver.get("topology", True) is True
    assert driver["mig_minors_path"] == slurm["deepops.cluster.nvidia_gpu_facts"]["mig_minors_path"]
    expression = yaml.safe_load((REPO / "roles/slurm/vars/main.yml").read_text())["_slurm_gpu_facts_current"]
    env = jinja2.Environment()
    unchanged = {"value": True}
    env.globals["lookup"] = lambda name: unchanged["value"] if name == "deepops.cluster.run_unchanged" else None
    full = {"topology": {"available": True}, "mig_minors_path": None}

    def current(facts: dict | None, **variables) -> bool:
        context = {"ansible_facts": {} if facts is None else {"deepops_gpus": facts}, **variables}
        return env.from_string(expression).render(context).strip() == "True"

    assert current(full)
    assert current({**full, "mig_minors_path": "/run/m"}, nvidia_mig_minors_path="/run/m")
    assert not current({**full, "mig_minors_path": "/proc/m"}, nvidia_mig_minors_path="/run/m")
    assert not current({**full, "topology": {"available": False}})  # a later read without topology
    assert not current(None)  # no read in this run (deploy --tags slurm)
    unchanged["value"] = False
    assert not current(full)
    assert slurm["when"] == ["inventory_hostname in _slurm_computes", "not _slurm_gpu_facts_current"]
