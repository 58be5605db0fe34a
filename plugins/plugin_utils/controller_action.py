"""The base of the collection's action plugins whose whole work is done on the controller.

Such a plugin starts no module and opens no connection (inventory_check,
monitoring_credentials, local_secret): Ansible then runs it in its worker on
the controller for every host, in check mode as in a real run (the plugin
says what check mode means for it).
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase

__all__ = ["ControllerAction"]


class ControllerAction(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    # The arguments the task may give; any other is an error the plugin reports.
    ARGS: tuple[str, ...] = ()

    def unknown_arguments(self) -> list[str]:
        return sorted(set(self._task.args) - set(self.ARGS))
