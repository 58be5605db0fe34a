"""deepops.cluster.warn: a role's warning reaches the user as the task's warning (ansible-playbook's
[WARNING], deepops' summary and --json), where ansible.builtin.debug's message did not."""

from __future__ import annotations

from pathlib import Path

import yaml
from local_playbook import run_local_playbook

REPO = Path(__file__).resolve().parents[2]


def test_the_message_is_the_tasks_warning_on_one_line_and_bad_arguments_fail(tmp_path):
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{
        "hosts": "localhost", "connection": "local", "gather_facts": False,
        "tasks": [
            {"name": "warn", "deepops.cluster.warn": {"msg": "gpu02: not reachable;\n  kept  as it was\n"}},
            {"name": "no message", "deepops.cluster.warn": {"msg": " "}, "ignore_errors": True},
            {"name": "unknown argument", "deepops.cluster.warn": {"msg": "x", "level": "high"}, "ignore_errors": True},
        ],
    }]))
    results = {task["task"]["name"]: task["hosts"]["localhost"] for task in run_local_playbook(playbook)}
    warned = results["warn"]
    assert warned["warnings"] == ["gpu02: not reachable; kept as it was"] and warned["changed"] is False
    assert warned["msg"] == "gpu02: not reachable; kept as it was" and not warned.get("failed")
    for name in ("no message", "unknown argument"):
        assert results[name]["failed"] is True and "warn takes msg" in results[name]["msg"], results[name]


def test_every_roles_warning_task_warns_the_user():
    """A task named '... | Warn about ...' uses deepops.cluster.warn, not a debug message."""
    offenders = []
    for path in sorted((REPO / "roles").glob("*/tasks/*.yml")):
        for task in yaml.safe_load(path.read_text()) or []:
            if " | Warn about " in task.get("name", "") and "deepops.cluster.warn" not in task:
                offenders.append(f"{path.relative_to(REPO)}: {task['name']}")
    assert offenders == []
