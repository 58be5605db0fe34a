"""Render the slurm role's templates in-process, the way the role does.

Shared by the rendering unit tests and bench/deploy.py, so both measure and
check the same thing: the role's templates, its defaults and the collection's
filter plugins, without Ansible's task machinery around them.
"""

from __future__ import annotations

from pathlib import Path

import jinja2
import yaml
from ansible_collections.deepops.cluster.plugins.filter import hostlist
from ansible_collections.deepops.cluster.plugins.filter import slurm as slurm_filters
from ansible_collections.deepops.cluster.plugins.module_utils import nvidia_smi  # noqa: F401 - re-exported for the tests
from ansible_collections.deepops.cluster.plugins.module_utils import slurm_conf as slurm

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "slurm"


def render(template: str, facts_by_host: dict, node_features: dict | None = None, **overrides) -> str:
    """Render one of the role's templates the way the role does, with its vars
    (NODE_FEATURES: each host's slurm_node_features)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROLE / "templates")), keep_trailing_newline=True,
                             trim_blocks=True)
    for plugin in (slurm_filters, hostlist):  # by their fully qualified names, as the templates call them
        env.filters.update({f"deepops.cluster.{name}": function for name, function in plugin.FilterModule().filters().items()})
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    variables = {**defaults, **overrides}
    records = slurm.slurm_node_facts(facts_by_host, variables["slurm_realmemory_reserve_mb"], node_features)
    partitions = variables["slurm_partitions"] or slurm.slurm_default_partitions(
        records, variables["slurm_mig_partitions"])
    settings = {"ClusterName": variables["slurm_cluster_name"], "SlurmctldParameters": "enable_configless",
                "AccountingStorageTRES": slurm.slurm_accounting_tres(records), **variables["slurm_config"]}
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
