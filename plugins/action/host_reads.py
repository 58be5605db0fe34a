"""Action plugin for deepops.cluster.host_reads: reads the run's first read made already are not made again.

The first read of a deploy on a host (option include_remembered) also makes
the reads later host_reads tasks asked that host for in earlier runs; a later
task whose every read it made is answered from it, with no module run, while
nothing in the run has changed since (plugins/plugin_utils/read_requests.py).
Any other task runs the module as it always did, and its reads are remembered
for the next run's first read.
"""

from __future__ import annotations

from typing import Any

from ansible.playbook.handler import Handler
from ansible.plugins.action import ActionBase
from ansible_collections.deepops.cluster.plugins.plugin_utils import read_requests, run_changes

MODULE = "deepops.cluster.host_reads"


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars if task_vars is not None else {}
        result = super().run(tmp, task_vars)
        del tmp  # no effect since ansible-core 2.5
        args = dict(self._task.args)
        first_read = bool(args.pop("include_remembered", False))
        inventory_file, host = task_vars.get("inventory_file"), str(task_vars.get("inventory_hostname"))
        # Reads of another host (delegated) and reads whose results are secret stay out of it,
        # and a handler's: it runs after a change, when no read is answered.
        shared = not self._task.delegate_to and not self._task.no_log and not isinstance(self._task, Handler)
        if first_read and shared:
            args = read_requests.with_remembered(args, list(read_requests.known(inventory_file, host)))
        elif shared and run_changes.unchanged_so_far():
            answered = self._answer(args, task_vars)
            if answered is not None:
                read_requests.remember(inventory_file, host, read_requests.requests_of(args))
                result.update(answered, changed=False, answered_by_first_read=True)
                return result
        try:
            result.update(self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        if result.get("failed") or not shared:
            return result
        if first_read:
            result[read_requests.RESULT_KEY] = read_requests.first_read_answers(args, result)
        else:
            read_requests.remember(inventory_file, host, read_requests.requests_of(args))
        return result

    @staticmethod
    def _answer(args: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any] | None:
        answers = (task_vars.get(read_requests.FIRST_READ) or {}).get(read_requests.RESULT_KEY)
        if not isinstance(answers, dict) or not answers:
            return None
        return read_requests.answer(args, answers)
