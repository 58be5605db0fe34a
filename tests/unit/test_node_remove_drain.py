"""The slurm role's drain step for deepops node remove (tasks/remove_drain.yml): which nodes it
drains, which jobs it waits for, requeues or cancels, and how long it polls, from the role's own
vars/main.yml, evaluated by Ansible on localhost with recorded sinfo/squeue/scontrol results.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from deepops_py import runner
from deepops_py.progress import SilentProgress

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "slurm"
VARS = {
    "known": "_slurm_remove_known", "to_drain": "_slurm_remove_to_drain", "attempts": "_slurm_remove_attempts",
    "ids": "_slurm_remove_job_ids", "still": "_slurm_remove_still_running", "active": "_slurm_remove_active_jobs",
    "requeued": "_slurm_remove_requeued_ids", "not_requeued": "_slurm_remove_not_requeued",
}


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("drain")
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    play = [{
        "name": "Evaluate the drain step's values",
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "vars": {name: defaults[name] for name in ("slurm_remove_reason", "slurm_remove_force")} | {
            "slurm_remove_timeout": 12},
        "tasks": [
            {"name": "Load the role's values", "ansible.builtin.include_vars": str(ROLE / "vars" / "main.yml")},
            {"name": "Recorded results", "ansible.builtin.set_fact": {
                "_slurm_removed_nodes": ["gpu03", "gpu04", "gpu05"],  # gpu05: gone from Slurm already
                "__slurm_remove_sinfo": {"stdout_lines": [
                    "gpu01|idle|none",
                    "gpu03|draining|deepops node remove",  # drained by an earlier try: not again
                    "gpu03|draining|deepops node remove",  # one line per partition
                    "gpu04|mixed|none",
                ]},
                "__slurm_remove_jobs": {"stdout_lines": ["12|RUNNING", "13|COMPLETING", "15|RUNNING", ""]},
                "__slurm_remove_waited": {"rc": 0, "stdout_lines": ["12|RUNNING", "15|RUNNING"]},
                "__slurm_remove_requeued": {"results": [
                    {"item": "12", "rc": 0}, {"item": "15", "rc": 1}, {"item": "16", "skipped": True}]},
            }},
            {"name": "Record the values", "ansible.builtin.set_stats": {
                "data": {name: "{{ %s }}" % var for name, var in VARS.items()}}},
        ],
    }]
    playbook = tmp / "drain.yml"
    playbook.write_text(yaml.safe_dump(play, sort_keys=False))
    inventory = tmp / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    request = runner.RunRequest(command="test", playbook=str(playbook), inventory=inventory, content_dir=REPO)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEEPOPS_STATE_DIR", str(tmp / "state"))
        result = runner.run_playbook(request, progress=SilentProgress())
    assert result.ok, result.error or result.hosts
    return result.data


def test_only_nodes_slurm_knows_are_drained_and_not_twice(evaluated):
    assert evaluated["known"] == ["gpu03", "gpu04"]
    assert evaluated["to_drain"] == ["gpu04"]


def test_the_timeout_is_whole_polls_after_the_first_read(evaluated):
    assert int(evaluated["attempts"]) == 3  # 12 s at 5 s a poll


def test_jobs_waited_for_still_running_requeued_and_cancelled(evaluated):
    assert evaluated["ids"] == ["12", "13", "15"]
    assert evaluated["still"] == ["12", "15"]
    assert evaluated["active"] == ["12", "15"]  # a completing job is neither requeued nor cancelled
    assert evaluated["requeued"] == ["12"] and evaluated["not_requeued"] == ["15"]
