"""Lookup plugin deepops.cluster.run_unchanged: whether nothing in this run has changed any host yet."""

from __future__ import annotations

DOCUMENTATION = r"""
name: run_unchanged
short_description: Whether no task of this run has changed anything yet, on any host
description:
  - Returns C(true) where the callback deepops.cluster.run_changes tracks the run and no task result so
    far reported a change (handlers and ignored failures included), on any host; C(false) otherwise,
    and always where that callback is not enabled.
  - A read made earlier in the run then still describes the host, so a later task may use it instead
    of reading again (the slurm role's GPU facts after the NVIDIA preflight's read). Check mode
    counts a change it would make as a change.
  - Evaluated in the worker of the task that asks, which knows the results of every task before it.
options: {}
"""

EXAMPLES = r"""
- name: Gather GPU facts, unless this run's earlier read still stands
  deepops.cluster.nvidia_gpu_facts:
  when: not (ansible_facts['deepops_gpus'] is defined and lookup('deepops.cluster.run_unchanged'))
"""

RETURN = r"""
_raw:
  description: One boolean.
  type: list
  elements: bool
"""

from typing import Any

from ansible.errors import AnsibleError
from ansible.plugins.lookup import LookupBase
from ansible_collections.deepops.cluster.plugins.plugin_utils import run_changes


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: dict[str, Any] | None = None, **kwargs: Any) -> list[bool]:
        if terms:
            raise AnsibleError(f"deepops.cluster.run_unchanged takes no terms, got {terms!r}")
        return [run_changes.unchanged_so_far()]
