"""The slurm role's drain step for deepops node remove and upgrade (tasks/drain.yml): which nodes it
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
    "known": "_slurm_drain_known", "to_drain": "_slurm_drain_to_drain", "attempts": "_slurm_drain_attempts",
    "ids": "_slurm_drain_job_ids", "still": "_slurm_drain_still_running", "active": "_slurm_drain_active_jobs",
    "requeued": "_slurm_drain_requeued_ids", "not_requeued": "_slurm_drain_not_requeued", "kept": "_slurm_drain_kept",
}


def _evaluate(tmp, keep_other_reasons: bool) -> dict:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    play = [{
        "name": "Evaluate the drain step's values",
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "vars": {"_slurm_drain_reason": defaults["slurm_remove_reason"], "_slurm_drain_force": defaults["slurm_remove_force"],
                 "_slurm_drain_timeout": 12, "_slurm_drain_keep_other_reasons": keep_other_reasons},
        "tasks": [
            {"name": "Load the role's values", "ansible.builtin.include_vars": str(ROLE / "vars" / "main.yml")},
            {"name": "Recorded results", "ansible.builtin.set_fact": {
                "_slurm_drain_nodes": ["gpu03", "gpu04", "gpu06", "gpu07", "gpu08"],  # gpu05: gone from Slurm already
                "__slurm_drain_sinfo": {"stdout_lines": [
                    "gpu01|idle|none",
                    "gpu03|draining|deepops node remove",  # drained by an earlier try: not again
                    "gpu03|draining|deepops node remove",  # one line per partition
                    "gpu04|mixed|none",
                    "gpu05|drained|fan broken",  # not in _slurm_drain_nodes: never looked at
                    "gpu06|drained|fan broken",  # drained by an admin
                    "gpu07|down|Not responding",
                ]},
                "__slurm_drain_jobs": {"stdout_lines": ["12|RUNNING", "13|COMPLETING", "15|RUNNING", ""]},
                "__slurm_drain_waited": {"rc": 0, "stdout_lines": ["12|RUNNING", "15|RUNNING"]},
                "__slurm_drain_requeued": {"results": [
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


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """For deepops node remove: every node is drained with its reason."""
    return _evaluate(tmp_path_factory.mktemp("drain"), keep_other_reasons=False)


@pytest.fixture(scope="module")
def evaluated_keeping(tmp_path_factory):
    """For deepops upgrade: a node drained or down for another reason keeps it."""
    return _evaluate(tmp_path_factory.mktemp("drain-keep"), keep_other_reasons=True)


def test_only_nodes_slurm_knows_are_drained_and_not_twice(evaluated):
    assert evaluated["known"] == ["gpu03", "gpu04", "gpu06", "gpu07"]  # gpu08: gone from Slurm already
    assert evaluated["to_drain"] == ["gpu04", "gpu06", "gpu07"]
    assert evaluated["kept"] == []


def test_nodes_drained_for_another_reason_keep_it_where_asked(evaluated_keeping):
    assert evaluated_keeping["to_drain"] == ["gpu04"]
    assert evaluated_keeping["kept"] == ["gpu06", "gpu07"]


def test_the_timeout_is_whole_polls_after_the_first_read(evaluated):
    assert int(evaluated["attempts"]) == 3  # 12 s at 5 s a poll


def test_jobs_waited_for_still_running_requeued_and_cancelled(evaluated):
    assert evaluated["ids"] == ["12", "13", "15"]
    assert evaluated["still"] == ["12", "15"]
    assert evaluated["active"] == ["12", "15"]  # a completing job is neither requeued nor cancelled
    assert evaluated["requeued"] == ["12"] and evaluated["not_requeued"] == ["15"]
