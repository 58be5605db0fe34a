"""deepops.cluster.unit_running_enabled: the skip of "enabled, started" tasks
reads the registered `systemctl show` (a command of the deploy's host_reads)
and errs towards running the task. deepops.cluster.started_from_stopped: a
restart handler skips where its role's start task has just started the unit,
which is right only where nothing notifies the handler after that task."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.deepops.cluster.plugins.filter.systemd_units import started_from_stopped, unit_running_enabled
from task_files import tasks_in

REPO = Path(__file__).resolve().parents[2]


def shown(rc: int = 0, **units: tuple[str, str, str]) -> dict:
    """The registered host_reads whose systemctl show lists units given as (active, sub, unit file state)."""
    blocks = [
        f"Id={name}\nActiveState={active}\nSubState={sub}\nUnitFileState={file_state}"
        for name, (active, sub, file_state) in units.items()
    ]
    return {"changed": False, "commands": {"systemd_units": {"rc": rc, "stdout": "\n\n".join(blocks)}}, "files": {}}


RUNNING = ("active", "running", "enabled")


@pytest.mark.parametrize("unit", ["slurmd", "slurmd.service"])
def test_enabled_and_running_unit_needs_nothing(unit):
    assert unit_running_enabled(shown(**{"munge.service": RUNNING, "slurmd.service": RUNNING}), unit) is True


@pytest.mark.parametrize(
    "state",
    [
        ("inactive", "dead", "enabled"),
        ("failed", "failed", "enabled"),
        ("active", "exited", "enabled"),
        ("activating", "start", "enabled"),
        ("active", "running", "disabled"),
        ("active", "running", "static"),
        ("active", "running", "masked"),
    ],
)
def test_any_other_state_runs_the_task(state):
    assert unit_running_enabled(shown(**{"slurmd.service": state}), "slurmd") is False


def test_unknown_unit_failed_read_or_no_read_runs_the_task():
    assert unit_running_enabled(shown(**{"munge.service": RUNNING}), "slurmd") is False
    assert unit_running_enabled(shown(rc=1, **{"slurmd.service": RUNNING}), "slurmd") is False
    assert unit_running_enabled({}, "slurmd") is False
    assert unit_running_enabled({"skipped": True}, "slurmd") is False


@pytest.mark.parametrize(("registered", "unit"), [("nope", "slurmd"), ({}, ""), ({}, None)])
def test_bad_input_is_a_filter_error(registered, unit):
    with pytest.raises(AnsibleFilterError):
        unit_running_enabled(registered, unit)


def test_the_deploy_reads_what_the_filter_parses():
    """One argv item with every property (a bare comma list in a YAML flow
    sequence would split it into several arguments)."""
    from ansible_collections.deepops.cluster.plugins.filter.systemd_units import PROPERTIES

    play = yaml.safe_load((REPO / "playbooks/components/common.yml").read_text())[0]
    [read] = [task for task in play["pre_tasks"] if task.get("register") == "deepops_host_reads"]
    # The command list joins other roles' reads (a template); the units' read is the task's own variable.
    units = read["vars"]["_common_systemd_units_read"]
    assert "[_common_systemd_units_read," in read["deepops.cluster.host_reads"]["commands"]
    assert units["name"] == "systemd_units"
    assert units["argv"] == ["systemctl", "show", "--property=" + ",".join(PROPERTIES), "*.service"]
    assert read["tags"] == ["always"]


def started(active_before: str, changed: bool = True, state: str = "started") -> dict:
    """A registered systemd_service result: its status is the unit's state before the module acted."""
    return {"changed": changed, "state": state, "enabled": True, "status": {"ActiveState": active_before}}


@pytest.mark.parametrize("active_before", ["inactive", "failed", "deactivating"])
def test_a_unit_the_task_started_needs_no_restart(active_before):
    assert started_from_stopped(started(active_before)) is True


@pytest.mark.parametrize(
    "registered",
    [
        # Running before (started by its package, or only enabled by the task): restart as before.
        started("active"),
        started("activating"),
        started("active", changed=False),
        # Skipped (running and enabled at the start of the deploy), not run (--tags), or no status.
        {"changed": False, "skipped": True},
        {},
        {"changed": True, "state": "started"},
        started("inactive", state="stopped"),
    ],
)
def test_anything_else_restarts(registered):
    assert started_from_stopped(registered) is False


def test_a_result_that_is_no_mapping_is_a_filter_error():
    with pytest.raises(AnsibleFilterError):
        started_from_stopped("started")


def _tasks_in_order(path: Path, tasks: list | None = None):
    """(path, task) for each task of a task file, blocks opened and the role's own
    task files that it imports or includes followed, in the order they run."""
    for task in (yaml.safe_load(path.read_text()) or []) if tasks is None else tasks:
        yield path, task
        for key in ("block", "rescue", "always"):
            if key in task:
                yield from _tasks_in_order(path, task[key])
        for key in ("ansible.builtin.import_tasks", "ansible.builtin.include_tasks"):
            target = task.get(key)
            target = target.get("file") if isinstance(target, dict) else target
            if isinstance(target, str) and "{{" not in target:
                yield from _tasks_in_order(path.parent / target)


def _guarded_restarts():
    """(role, handler, the start task's registered name) for every handler that skips after a start."""
    for path in sorted((REPO / "roles").glob("*/handlers/main.yml")):
        for handler in yaml.safe_load(path.read_text()) or []:
            found = re.search(r"(__\w+) \| default\(\{\}\) \| deepops\.cluster\.started_from_stopped", str(handler.get("when", "")))
            if found:
                yield pytest.param(path.parts[-3], handler, found.group(1), id=handler["name"])


@pytest.mark.parametrize(("role", "handler", "registered"), list(_guarded_restarts()))
def test_nothing_notifies_a_guarded_restart_after_its_start_task(role, handler, registered):
    """Every notification of the handler (its listen topics, anywhere in the
    roles and playbooks) comes before the task that registers the start: a
    daemon started there already runs what those tasks wrote."""
    topics = [handler["name"]] + ([handler["listen"]] if isinstance(handler.get("listen"), str) else handler.get("listen", []))
    [start_file] = [
        path for path in (REPO / "roles" / role / "tasks").glob("*.yml")
        if re.search(rf"register: {registered}$", path.read_text(), re.MULTILINE)
    ]
    ordered = list(_tasks_in_order(start_file))
    [start] = [index for index, (_path, task) in enumerate(ordered) if task.get("register") == registered]
    # The task that starts the unit is a systemd_service "started" task.
    assert ordered[start][1]["ansible.builtin.systemd_service"]["state"] == "started"
    everywhere = [
        task for path in [*REPO.glob("roles/*/tasks/**/*.yml"), *REPO.glob("playbooks/**/*.yml")]
        for task in tasks_in(yaml.safe_load(path.read_text()))
    ]
    for topic in topics:
        before = [task for _path, task in ordered[:start] if _notifies(task, topic)]
        assert before == [task for task in everywhere if _notifies(task, topic)], (
            f"{topic}: notified after {ordered[start][1]['name']} or outside {start_file.name}"
        )


def _notifies(task: dict, topic: str) -> bool:
    """The task notifies the topic, or passes it to a file it includes (a variable such as _slurm_jwt_key_handler)."""
    notify = task.get("notify", [])
    variables = task.get("vars") if isinstance(task.get("vars"), dict) else {}
    return topic in ([notify] if isinstance(notify, str) else notify) or topic in variables.values()


def test_the_restarts_that_skip_after_a_start():
    names = {param.id for param in _guarded_restarts()}
    assert names == {
        "Slurm | Restart slurmdbd", "Slurm | Restart slurmctld", "Slurm | Restart slurmd",
        "Slurm | Restart slurmrestd", "DCGM exporter | Restart the exporter", "Slurm exporter | Restart the exporter",
    }
