"""The virtual cluster's Ansible inventory and SSH known_hosts file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

HEADER = (
    "# Written by 'deepops virtual up' for the virtual cluster on this machine's Docker engine.\n"
    "# Regenerated when ports change; edits are lost. Remove with 'deepops virtual down'.\n"
    "# shared_mounts: /home and /sw are Docker volumes mounted in every node, the virtual\n"
    "# cluster's stand-in for NFS (no NFS in this kernel), declared as the site's own mounts.\n"
)


@dataclass(frozen=True)
class Endpoint:
    """How Ansible reaches one virtual node."""

    name: str
    role: str  # "controller", "compute" or "login"
    port: int
    host_key: str  # "ssh-ed25519 AAAA..." (no comment)


# The ordinary user every virtual cluster declares (cluster_users), for trying
# and testing jobs as someone other than root; ssh in as alice with the cluster's key.
USER = {"name": "alice", "uid": 2001, "gid": 2001}


@dataclass(frozen=True)
class SharedVolume:
    """One shared file system of the virtual cluster."""

    name: str  # the volume is <cluster name>-<name>
    path: str  # mounted here in every node
    modulefiles: str = ""  # Lmod module directory under path


# The virtual cluster's STAND-IN for shared storage. The test machines' kernel
# has no NFS (neither nfsd nor the client: no module support, not built in),
# so a real NFS server cannot run in the containers, nor could they mount one.
# Instead one Docker volume per path is mounted at that path in every node
# container ('virtual up'), and the inventory declares them as the site's own
# mounts (managed: false): the deploy does not mount them, and checks on every
# node that they are mounted before Slurm starts, as it does for a site's
# Lustre or GPFS. /home holds the users' homes, /sw the shared software tree
# (module files in /sw/modulefiles), as the roles' defaults on metal.
SHARED_VOLUMES = (SharedVolume("home", "/home"), SharedVolume("sw", "/sw", "modulefiles"))


def shared_mounts() -> list[dict]:
    """shared_mounts for the stand-in volumes: site-managed, so deploy only checks them."""
    return [{"path": volume.path, "managed": False, **({"modulefiles": volume.modulefiles} if volume.modulefiles else {})}
            for volume in SHARED_VOLUMES]


def render_inventory(endpoints: Sequence[Endpoint], *, key_path: Path, known_hosts_path: Path, apt_proxy: str,
                     user_public_key: str = "") -> str:
    ssh_args = f"-o UserKnownHostsFile={known_hosts_path} -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes"
    hosts = {
        endpoint.name: {
            "ansible_host": "127.0.0.1",
            "ansible_port": endpoint.port,
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(key_path),
            "ansible_ssh_common_args": ssh_args,
        }
        for endpoint in endpoints
    }

    def members(role: str) -> dict:
        # Fresh dicts per group: shared ones would come out as YAML anchors and aliases.
        return {"hosts": {endpoint.name: {} for endpoint in endpoints if endpoint.role == role}}

    def primary() -> dict:
        # The first controller (a backup, ctl02, is only a controller); none in a one-node inventory.
        first = next((endpoint.name for endpoint in endpoints if endpoint.role == "controller"), None)
        return {"hosts": {first: {}} if first else {}}

    document = {
        "all": {
            "vars": {
                "common_apt_proxy": apt_proxy,
                "deepops_virtual": True,
                # Simulated GPUs: no driver or kernel module can load in a container,
                # so the NVIDIA stack is off, as on a site whose drivers are
                # preinstalled; the stand-in nvidia-smi cannot set power limits.
                "nvidia_driver_enabled": False,
                "nvidia_fabricmanager_enabled": False,
                "cuda_enabled": False,
                "nvidia_dcgm_enabled": False,
                "gpu_settings_enabled": False,
                # No toolkit to build nccl-tests with: 'virtual up' puts a
                # stand-in all_reduce_perf where the role installs the real one.
                "nccl_tests_enabled": False,
                # Containers get no cgroup delegation: Slurm tracks processes
                # without cgroups there (real hosts keep the role's defaults).
                "slurm_proctrack_type": "proctrack/linuxproc",
                "slurm_task_plugin": "task/none",
                # The simulated GPUs' dcgm-exporter is a stand-in 'virtual up'
                # puts in place: nothing to install from NVIDIA's repository.
                "dcgm_exporter_packages": [],
                # Grafana's apt repository is not reachable from the test bed.
                "grafana_enabled": False,
                # The stand-in nvidia-smi's MIG minors file: /proc cannot be
                # written in a container (real hosts keep the driver's
                # /proc/driver/nvidia-caps/mig-minors).
                "nvidia_mig_minors_path": "/run/deepops/simulated-gpus/mig-minors",
                # The GPU health check reads XIDs from the simulated GPUs'
                # kernel log ('deepops virtual fault' writes it): containers
                # cannot write or read the kernel's. A short interval keeps
                # fault tests quick.
                "slurm_health_check_kernel_log": "/run/deepops/simulated-gpus/kmsg",
                "slurm_health_check_interval": 10,
                # A requeued job may start again only once the credentials of its
                # first run expire (cred_expire, 120 s by default): shorter here,
                # where a fault test requeues on purpose and nothing is far away.
                "slurm_config": {"AuthInfo": "cred_expire=30"},
                # Per-job /tmp is off here: with the stand-in volumes mounted, Slurm
                # 22.05's job_container/tmpfs failed about every other job start on a
                # node ("_create_ns: ns base mount failed: Invalid argument"), and the
                # job was requeued and held. Real hosts keep the role's default (on).
                "slurm_job_container_enabled": False,
                # The stand-in shared storage (SHARED_VOLUMES): Docker volumes, not NFS.
                "shared_mounts": shared_mounts(),
                "cluster_users": [{**USER, **({"ssh_keys": [user_public_key.strip()]} if user_public_key.strip() else {})}],
            },
            "hosts": hosts,
            "children": {
                "slurm_controller": members("controller"),
                # A login node of its own with 'virtual up --login', else the controller.
                "slurm_login": members("login") if any(endpoint.role == "login" for endpoint in endpoints) else primary(),
                "monitoring": primary(),
                "slurm_compute": members("compute"),
            },
        }
    }
    return HEADER + yaml.safe_dump(document, sort_keys=False, default_flow_style=False)


def render_known_hosts(endpoints: Sequence[Endpoint]) -> str:
    """One line per node: ``[127.0.0.1]:PORT ssh-ed25519 AAAA...`` (the form ssh looks up for non-22 ports)."""
    return "".join(f"[127.0.0.1]:{endpoint.port} {endpoint.host_key}\n" for endpoint in endpoints)
