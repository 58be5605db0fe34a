"""Lookup plugin deepops.cluster.managed_paths: the paths managed_files wrote on this host in earlier runs."""

from __future__ import annotations

DOCUMENTATION = r"""
name: managed_paths
short_description: The paths managed_files wrote on the current host in earlier runs from this controller
description:
  - Without terms, returns the paths M(deepops.cluster.managed_files) remembered for the task's host
    (C(inventory_hostname) in C(inventory_file)) in earlier runs, kept on the controller in
    C(deepops/managed-paths) under C($XDG_CACHE_HOME) or C(~/.cache). The deploy reads their state on
    the host once, at its start (M(deepops.cluster.host_reads) option C(file_states)), so that
    managed_files can skip its module run where every entry is in place.
  - With the term C(key), returns the run's key for the digests of that read (made per run in the
    controller's memory by the callback deepops.cluster.run_changes).
  - Both are empty where that callback is not enabled, so that nothing is read and nothing is skipped.
    The list only says what to read, never what a file holds.
  - Use with C(query), which returns the list as it is.
options:
  _terms:
    description: Nothing for the paths, or C(key) for the run's digest key.
    required: false
"""

EXAMPLES = r"""
- name: Read the state of the files managed_files wrote here before
  deepops.cluster.host_reads:
    file_states: "{{ query('deepops.cluster.managed_paths') }}"
    file_states_key: "{{ lookup('deepops.cluster.managed_paths', 'key') }}"
  register: deepops_host_reads
"""

RETURN = r"""
_raw:
  description: Absolute paths, or the key alone.
  type: list
  elements: str
"""

from typing import Any

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase
from ansible_collections.deepops.cluster.plugins.plugin_utils import managed_state, run_changes


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: dict[str, Any] | None = None, **kwargs: Any) -> list[str]:
        key = run_changes.run_key()
        if terms == ["key"]:
            return [key]
        if terms:
            raise AnsibleError(f"deepops.cluster.managed_paths takes no term or 'key', got {terms!r}")
        if not key:
            return []
        variables = variables or {}
        return managed_state.known(variables.get("inventory_file"), str(variables.get("inventory_hostname", "")))
