"""deepops.cluster.unit_running_enabled: the skip of "enabled, started" tasks
reads the registered `systemctl show` (a command of the deploy's host_reads)
and errs towards running the task."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.deepops.cluster.plugins.filter.systemd_units import unit_running_enabled


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
    from pathlib import Path

    import yaml
    from ansible_collections.deepops.cluster.plugins.filter.systemd_units import PROPERTIES

    play = yaml.safe_load((Path(__file__).resolve().parents[2] / "playbooks/components/common.yml").read_text())[0]
    [read] = [task for task in play["pre_tasks"] if task.get("register") == "deepops_host_reads"]
    # The command list joins other roles' reads (a template); the units' read is the task's own variable.
    units = read["vars"]["_common_systemd_units_read"]
    assert "[_common_systemd_units_read," in read["deepops.cluster.host_reads"]["commands"]
    assert units["name"] == "systemd_units"
    assert units["argv"] == ["systemctl", "show", "--property=" + ",".join(PROPERTIES), "*.service"]
    assert read["tags"] == ["always"]
