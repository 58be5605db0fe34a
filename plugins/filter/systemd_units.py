"""Jinja filter over the state of the loaded systemd services, read once per
host at the start of a deploy (playbooks/components/common.yml registers
``deepops_host_reads``, a deepops.cluster.host_reads result whose command
``systemd_units`` is ``systemctl show --property=... '*.service'``).

- ``deepops_host_reads | default({}) | deepops.cluster.unit_running_enabled('slurmd')``
  -> true when the unit was enabled and running then, so an "enabled,
  started" task has nothing to do and can skip its module call (about a
  second a host on a small machine). Without the read (a role run on its own,
  ``{}``) it is false and the task runs as before.

Handlers restart what a run changes (with a daemon reload where a unit file
changed), so a state read at the start of the run stays right for this use.

- ``__slurm_slurmctld_started | default({}) | deepops.cluster.started_from_stopped``
  -> true when that "enabled, started" task (its registered
  ansible.builtin.systemd_service result) started the unit from stopped. The
  daemon then read the configuration the run wrote before it, so the restart
  handler that configuration notified would only stop and start it again:
  for slurmctld about 2.5 s of a fresh deploy. Its handler skips then. Only
  right where every task that notifies the handler comes before the start
  task (tests/unit/test_systemd_units.py checks each such pair); a daemon
  the package's own scripts started (munge, node_exporter) was running
  before the task, and is restarted as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

# What the read in playbooks/components/common.yml must ask systemctl for.
PROPERTIES = ("Id", "ActiveState", "SubState", "UnitFileState")


def parse_systemctl_show(text: str) -> dict[str, dict[str, str]]:
    """`systemctl show --property=Id,...` output (blank-line separated blocks) by unit Id."""
    units: dict[str, dict[str, str]] = {}
    for block in text.split("\n\n"):
        properties = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        if properties.get("Id"):
            units[properties["Id"]] = properties
    return units


def unit_running_enabled(registered: Any, unit: Any) -> bool:
    if not isinstance(registered, Mapping):
        raise AnsibleFilterError("unit_running_enabled expects the registered result of the deploy's host_reads")
    if not isinstance(unit, str) or not unit:
        raise AnsibleFilterError(f"unit_running_enabled expects a unit name, got {unit!r}")
    read = (registered.get("commands") or {}).get("systemd_units")
    if not isinstance(read, Mapping):
        return False
    stdout = read.get("stdout")
    if read.get("rc", 0) != 0 or not isinstance(stdout, str):
        return False
    name = unit if "." in unit else f"{unit}.service"
    state = parse_systemctl_show(stdout).get(name, {})
    return (state.get("ActiveState"), state.get("SubState"), state.get("UnitFileState")) == ("active", "running", "enabled")


def started_from_stopped(registered: Any) -> bool:
    if not isinstance(registered, Mapping):
        raise AnsibleFilterError("started_from_stopped expects the registered result of a systemd_service task")
    status = registered.get("status")
    if registered.get("skipped") or not registered.get("changed") or not isinstance(status, Mapping):
        return False
    # The module's status is the unit's state read before it acted; it starts
    # a unit that is neither active nor activating (ansible.builtin.systemd_service).
    return registered.get("state") == "started" and status.get("ActiveState") not in ("active", "activating")


class FilterModule:
    """deepops systemd unit filter."""

    def filters(self) -> dict[str, Any]:
        return {"unit_running_enabled": unit_running_enabled, "started_from_stopped": started_from_stopped}
