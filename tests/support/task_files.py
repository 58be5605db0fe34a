"""Tasks of Ansible task files and playbooks, read as YAML for tests that check their shape."""

from __future__ import annotations


def tasks_in(data) -> list[dict]:
    """Every task of a task file or playbook, those inside blocks included."""
    found = []
    for item in data if isinstance(data, list) else []:
        if not isinstance(item, dict):
            continue
        if "hosts" in item:  # a play
            for section in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                found += tasks_in(item.get(section))
            continue
        found.append(item)
        for section in ("block", "rescue", "always"):
            found += tasks_in(item.get(section))
    return found
