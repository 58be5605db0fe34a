"""Render the slurm role's templates in-process, the way the role does.

Shared by the rendering unit tests and bench/deploy.py, so both measure and
check the same thing: the role's templates, its defaults and the project's
filter plugins, without Ansible's task machinery around them.
"""

from __future__ import annotations

from pathlib import Path

import jinja2
import yaml
from by_path import load_module

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "slurm"


slurm = load_module("deepops_filter_slurm", REPO / "plugins" / "filter" / "slurm.py")
hostlist = load_module("deepops_filter_hostlist", REPO / "plugins" / "filter" / "hostlist.py")
nvidia_smi = load_module("deepops_nvidia_smi", REPO / "plugins" / "module_utils" / "nvidia_smi.py")


def render(template: str, facts_by_host: dict, **overrides) -> str:
    """Render one of the role's templates the way the role does, with its vars."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROLE / "templates")), keep_trailing_newline=True,
                             trim_blocks=True)
    env.filters.update(slurm.FilterModule().filters())
    env.filters.update(hostlist.FilterModule().filters())
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    variables = {**defaults, **overrides}
    records = slurm.slurm_node_facts(facts_by_host, variables["slurm_realmemory_reserve_mb"])
    partitions = variables["slurm_partitions"] or slurm.slurm_default_partitions(records)
    settings = {"ClusterName": variables["slurm_cluster_name"], "SlurmctldParameters": "enable_configless",
                "AccountingStorageTRES": "gres/gpu", **variables["slurm_config"]}
    context = {
        **variables,
        "ansible_managed": "Ansible managed",
        "_slurm_controllers": ["ctl01"],
        "_slurm_conf": settings,
        "_slurm_node_lines": slurm.slurm_node_lines(records),
        "_slurm_gres_lines": slurm.slurm_gres_lines(records),
        "_slurm_partition_lines": slurm.slurm_partition_lines(partitions),
        "_slurm_cgroup_conf": {"CgroupPlugin": "autodetect"},
    }
    return env.get_template(template).render(context)
