"""Filters of the validate role (``deepops.cluster.validate_*``): thin wrappers.

Every parser and verdict lives in ``plugins/module_utils/validation.py`` and,
for the GPU checks, ``gpu_acceptance.py`` (pure Python, unit tested); these
only turn their input errors into Ansible's.

- ``validate_skip | deepops.cluster.validate_selected_checks`` -> the checks to run, in order
- ``sinfo_stdout | deepops.cluster.validate_survey(computes, node_facts, preemption_node, node_munge)`` -> the cluster
- ``cluster | deepops.cluster.validate_nodes_results`` -> the nodes check's results
- ``registered | deepops.cluster.validate_hostname_result(cluster)``
- ``registered | deepops.cluster.validate_mpi_result(cluster, plugin)``
- ``registered.results | deepops.cluster.validate_mig_results(cluster)``
- ``loop_results | deepops.cluster.validate_gpus_results(cluster)``
- ``nodes | deepops.cluster.validate_job_specs(gpus)`` -> files/jobs.sh's NODES=GPUS arguments
- ``jobs_stdout | deepops.cluster.validate_dcgm_results(cluster, level)``
- ``jobs_stdout | deepops.cluster.validate_burnin_results(cluster, node_facts, tflops_fraction, mem_bw_fraction)``
- ``runs | deepops.cluster.validate_nccl_next_jobs(cluster, node_facts, thresholds)`` -> the next round's jobs
- ``runs | deepops.cluster.validate_nccl_results(cluster, node_facts, thresholds)``
- ``results | deepops.cluster.validate_drain_list`` -> [{node, reason}] for --drain-failed
- ``sinfo_version_stdout | deepops.cluster.validate_versions(node_facts)`` -> the report's versions
- ``registered | deepops.cluster.validate_sacct_result(cluster, sacct_wait)``
- ``config_stdout | deepops.cluster.validate_preemption_settings(qos_stdout, qos_low, bound)``
- ``registered | deepops.cluster.validate_preemption_result(cluster, settings, qos_low, qos_high, job_timeout)``
- ``ansible_failed_result | deepops.cluster.validate_error_result(task_name, host)``
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.deepops.cluster.plugins.module_utils import gpu_acceptance, gpu_performance, validation


def _wrap(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except (validation.ValidationInputError, gpu_performance.GpuPerformanceInputError, KeyError, TypeError) as error:
            raise AnsibleFilterError(f"{name}: {error}") from error

    return wrapper


_FILTERS = {
    "validate_selected_checks": validation.selected_checks,
    "validate_survey": validation.survey,
    "validate_nodes_results": validation.nodes_results,
    "validate_hostname_result": validation.hostname_result,
    "validate_mpi_result": validation.mpi_result,
    "validate_mig_results": validation.mig_results,
    "validate_gpus_results": validation.gpus_results,
    "validate_job_specs": gpu_acceptance.job_specs,
    "validate_dcgm_results": gpu_acceptance.dcgm_results,
    "validate_burnin_results": gpu_acceptance.burnin_results,
    "validate_nccl_next_jobs": gpu_acceptance.nccl_next_jobs,
    "validate_nccl_results": gpu_acceptance.nccl_results,
    "validate_drain_list": gpu_acceptance.drain_list,
    "validate_versions": gpu_acceptance.versions,
    "validate_sacct_result": validation.sacct_result,
    "validate_preemption_settings": validation.preemption_settings,
    "validate_preemption_result": validation.preemption_result,
    "validate_error_result": validation.error_result,
}


class FilterModule:
    """The validate role's parsers and verdicts."""

    def filters(self) -> dict[str, Callable[..., Any]]:
        """Map filter names to functions."""
        return {name: _wrap(name, function) for name, function in _FILTERS.items()}
