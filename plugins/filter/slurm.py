"""Jinja filters that turn gathered facts into slurm.conf and gres.conf lines.

``slurm_node_facts``  {host: ansible_facts} -> {host: compact node record}
``slurm_node_lines``  records -> ``NodeName=gpu[01-16] CPUs=... Gres=gpu:h100:8`` lines
                      (MIG devices by profile: ``Gres=gpu:h100:4,gpu:1g.10gb:7``)
``slurm_gres_lines``  records -> ``NodeName=gpu[01-16] Name=gpu Type=h100 File=/dev/nvidia[0-7]``,
                      and one ``Name=gpu Type=1g.10gb MultipleFiles=...`` line per MIG device
``slurm_default_partitions``  records (+ MIG partitions or not) -> one partition per GPU model
                      (and per MIG profile) plus ``all``
``slurm_accounting_tres``  records -> ``gres/gpu,gres/gpu:1g.10gb,gres/gpu:h100``
``slurm_partition_lines``  partition dicts -> ``PartitionName=...`` lines
``slurm_conf_lines``  {key: value} -> ``Key=value`` lines (lists joined with commas)
``slurm_nodes_to_resume``  ``sinfo`` + hosts + reasons -> nodes to resume
``slurm_node_states``  ``sinfo -N -o '%N|%T|%E'`` -> {node: [state, reason]}
``slurm_nodes_not_up``  ``sinfo -N -o '%N|%t|%E'`` + nodes -> {node: why it is not up}

The logic lives in ``plugins/module_utils/slurm_conf.py`` (pure Python, unit tested).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.deepops.cluster.plugins.module_utils import slurm_conf

_FILTERS = (
    "slurm_node_facts",
    "slurm_node_lines",
    "slurm_gres_lines",
    "slurm_default_partitions",
    "slurm_accounting_tres",
    "slurm_partition_lines",
    "slurm_conf_lines",
    "slurm_nodes_to_resume",
    "slurm_node_states",
    "slurm_nodes_not_up",
)


def _as_filter(function: Callable[..., Any]) -> Callable[..., Any]:
    """Report bad input as a filter error naming the filter, not a traceback."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except ValueError as error:  # SlurmConfError, HostlistError
            raise AnsibleFilterError(f"{function.__name__}: {error}") from error

    return wrapper


class FilterModule:
    """slurm.conf and gres.conf rendering helpers."""

    def filters(self) -> dict[str, Any]:
        """Map filter names to functions."""
        return {name: _as_filter(getattr(slurm_conf, name)) for name in _FILTERS}
