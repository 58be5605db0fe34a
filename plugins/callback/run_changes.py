"""Callback plugin deepops.cluster.run_changes: records in the controller's process whether the run has changed anything yet.

See plugins/plugin_utils/run_changes.py: the workers Ansible forks for later
tasks inherit the record, and managed_files reads it.
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: run_changes
type: aggregate
short_description: Records whether any task of the run has changed a host yet, for the collection's action plugins
description:
  - Keeps, in the controller's process, whether any task result of the run so far reported a change
    (handlers and ignored failures included). The worker processes Ansible forks for later tasks inherit
    it.
  - M(deepops.cluster.managed_files) compares its entries with the state the deploy read on each host at
    its start (M(deepops.cluster.host_reads) option C(file_states)) and skips its module run where they are in
    place, but only while this record says nothing has changed; without this callback it never skips.
  - Reports nothing and changes no output.
requirements:
  - enabled in the C(callbacks_enabled) setting of ansible.cfg, as the repository's ansible.cfg does
"""

from typing import Any

from ansible.plugins.callback import CallbackBase
from ansible_collections.deepops.cluster.plugins.plugin_utils import run_changes


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "deepops.cluster.run_changes"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook: Any) -> None:
        run_changes.start()

    def v2_runner_on_ok(self, result: Any) -> None:
        run_changes.note(result.is_changed())

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        run_changes.note(result.is_changed())

    def v2_runner_on_async_ok(self, result: Any) -> None:
        run_changes.note(result.is_changed())
