"""Action plugin deepops.cluster.warn: a warning for the user, from a role.

``ansible.builtin.debug`` prints a message only in ansible-playbook's own
output, which deepops keeps in the run's artifacts: a role's warning said
that way never reached a deepops user. This returns the message as the
task's warning, which ansible-playbook prints as ``[WARNING]`` and deepops
shows under the run's summary and in ``--json`` (each host's ``warnings``).
Runs on the controller; no module is sent anywhere.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.deepops.cluster.plugins.plugin_utils.controller_action import ControllerAction


class ActionModule(ControllerAction):
    ARGS = ("msg",)

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        message = self._task.args.get("msg")
        if self.unknown_arguments() or not isinstance(message, str) or not message.strip():
            result.update(failed=True, msg=f"warn takes msg, a non-empty string; got {sorted(self._task.args)}")
            return result
        message = " ".join(message.split())
        result.update(changed=False, msg=message, warnings=[message])
        return result
