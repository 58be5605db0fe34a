#!/usr/bin/python
"""Ansible module: GPU facts from nvidia-smi (read-only)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvidia_gpu_facts
short_description: Gather NVIDIA GPU facts from nvidia-smi
description:
  - Runs C(nvidia-smi -q -x) and C(nvidia-smi topo -m) and returns the result as the
    C(deepops_gpus) fact - models, Slurm GRES types, PCI bus IDs, memory, MIG mode and
    MIG devices, power limits, NUMA node and CPU affinity, NVLink and NVSwitch.
  - Works with any Slurm build (no NVML plugin needed); the facts drive C(gres.conf).
  - For each MIG device it gives the profile and the device files a job needs - the parent
    GPU's C(/dev/nvidia<minor>) and the GPU- and compute-instance capability devices
    C(/dev/nvidia-caps/nvidia-cap<minor>), whose minors it reads from the driver's MIG minors
    file. Without that file the device files are null and C(mig_problems) says why.
  - A host without nvidia-smi is not an error, it reports C(present=false) and no GPUs.
  - Output that is not nvidia-smi XML fails the task with a message, never a traceback.
  - Read-only, so it runs the same in check mode.
version_added: "1.0.0"
author:
  - deepops developers (@deepops)
options:
  nvidia_smi_path:
    description:
      - Path of the nvidia-smi binary. Found on C(PATH) when not given.
      - When the file does not exist the host is reported as having no GPUs.
    type: path
  topology:
    description:
      - Also run C(nvidia-smi topo -m) for NUMA node, CPU affinity and NVLink.
      - A failing C(topo -m) only warns; those values are then null.
    type: bool
    default: true
  mig_minors_path:
    description:
      - The driver's MIG minors file (lines such as C(gpu0/gi1/access 12)), read only when a GPU
        has MIG devices. N in C(gpuN) is the GPU's minor number, the N of C(/dev/nvidiaN).
      - A file that does not exist leaves the MIG devices' C(device_files) null.
    type: path
    default: /proc/driver/nvidia-caps/mig-minors
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    platforms: posix
notes:
  - C(-q -x) names no MIG profiles. For a model in deepops' MIG profile table
    (module_utils/mig_profiles.py) C(profile) is the table's profile with the device's SM count,
    memory and media engines; for other Ampere and Hopper GPUs it is inferred from SM count and
    memory; otherwise it is null.
  - Topo rows map to GPUs by index, which is the order of C(-q -x) (PCI bus order).
"""

EXAMPLES = r"""
- name: GPU | Gather GPU facts
  deepops.cluster.nvidia_gpu_facts:

- name: GPU | Gather GPU facts from a non-standard nvidia-smi, without topology
  deepops.cluster.nvidia_gpu_facts:
    nvidia_smi_path: /opt/nvidia/bin/nvidia-smi
    topology: false

- name: GPU | Gather GPU facts, with the MIG minors file where a simulated driver keeps it
  deepops.cluster.nvidia_gpu_facts:
    mig_minors_path: /run/deepops/simulated-gpus/mig-minors

- name: GPU | Show the Slurm GRES of this node (MIG devices by profile)
  ansible.builtin.debug:
    msg: "{{ ansible_facts['deepops_gpus']['gres_by_type'] }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts added to the host.
  returned: always
  type: dict
  contains:
    deepops_gpus:
      description: The host's GPUs.
      returned: always
      type: dict
      contains:
        present:
          description: Whether nvidia-smi exists on the host.
          type: bool
          sample: true
        driver_version:
          description: Driver version, null without nvidia-smi.
          type: str
          sample: "580.105.08"
        cuda_version:
          description: Highest CUDA version the driver supports.
          type: str
          sample: "13.0"
        count:
          description: Number of C(<gpu>) elements, the GPUs actually reported.
          type: int
          sample: 8
        gpu_count:
          description: Same as C(count).
          type: int
          sample: 8
        attached_gpus:
          description: nvidia-smi's C(attached_gpus); may differ from C(count) in trimmed output.
          type: int
          sample: 8
        types:
          description: Sorted distinct Slurm GRES types.
          type: list
          elements: str
          sample: ["h100"]
        by_type:
          description: GPU count per GRES type.
          type: dict
          sample: {"h100": 8}
        gres_by_type:
          description:
            - Slurm GRES per type - a GPU in MIG mode counts its MIG devices by profile (and
              nothing when it has none), any other GPU counts as its own type.
          type: dict
          sample: {"h100": 4, "1g.10gb": 7}
        mig_enabled:
          description: Whether any GPU has MIG currently enabled.
          type: bool
          sample: false
        mig_device_count:
          description: MIG devices on the GPUs in MIG mode.
          type: int
          sample: 7
        mig_device_files_known:
          description: Whether every MIG device's C(device_files) is known (true without MIG devices).
          type: bool
          sample: true
        mig_minors_path:
          description: The MIG minors file read, null when no GPU has MIG devices.
          type: str
          sample: /proc/driver/nvidia-caps/mig-minors
        mig_problems:
          description:
            - Why some MIG devices cannot be given to Slurm - a device no profile fits, or
              device files unknown (no minors file, or no line in it). Empty when all is known.
          type: list
          elements: str
          sample: []
        nvlink:
          description: Whether C(topo -m) shows NVLink (NV#) between any two GPUs.
          type: bool
          sample: true
        nvswitch:
          description:
            - NVSwitch system (needs Fabric Manager). True when a GPU reports a completed
              fabric, or 8+ GPUs are all pairwise linked by the same NV#.
          type: bool
          sample: true
        topology:
          description: What C(topo -m) gave.
          type: dict
          sample: {"available": true, "format": "numa", "gpu_rows": 8, "nics": ["mlx5_0"]}
        gpus:
          description:
            - One entry per GPU in C(-q -x) order, with C(index), C(minor_number),
              C(product_name), C(type), C(architecture), C(uuid), C(serial),
              C(pci_bus_id) (C(00000000:53:00.0) form), C(device) (C(/dev/nvidia<minor>)),
              C(memory_total_mib), C(numa_node), C(cpu_affinity) (e.g. C(0-55,112-167)),
              C(cpu_list), C(cpu_count), C(mig_mode) (C(current)/C(pending), each
              Enabled, Disabled or N/A), C(mig_devices) (C(index), C(gpu_instance_id),
              C(compute_instance_id), C(memory_mib), C(multiprocessor_count), C(profile),
              C(device_files) - the parent C(/dev/nvidia<minor>), then the GPU-instance and the
              compute-instance C(/dev/nvidia-caps/nvidia-cap<minor>), or null when unknown),
              C(power_limits_w) (C(current)/C(default)/C(min)/C(max), floats or null),
              C(fabric_state) and C(links) (gres.conf C(Links=) values, -1 for self).
          type: list
          elements: dict
"""

# Ansible modules import after their documentation strings.
import os

from ansible.module_utils.basic import AnsibleModule

# mig_profiles is imported by nvidia_smi when it names MIG profiles; importing
# it here as well makes sure Ansible ships it with the module.
from ansible_collections.deepops.cluster.plugins.module_utils import mig_profiles  # noqa: F401  # pylint: disable=unused-import
from ansible_collections.deepops.cluster.plugins.module_utils.nvidia_smi import (
    MIG_MINORS_PATH,
    NvidiaSmiParseError,
    absent_facts,
    build_facts,
    parse_mig_minors,
    parse_topo,
    parse_xml,
)


def _find_nvidia_smi(module: AnsibleModule) -> str | None:
    path = module.params["nvidia_smi_path"] or module.get_bin_path("nvidia-smi")
    return path if path and os.path.exists(path) else None


def _read_topology(module: AnsibleModule, nvidia_smi: str) -> dict | None:
    """Read ``topo -m``; optional, as without it only NUMA/affinity/NVLink are unknown."""
    rc, out, err = module.run_command([nvidia_smi, "topo", "-m"])
    if rc != 0:
        detail = (err or out).strip()
        module.warn(
            f"'{nvidia_smi} topo -m' failed (rc={rc}): {detail}; NUMA and NVLink facts are null"
        )
        return None
    try:
        return parse_topo(out)
    except NvidiaSmiParseError as exc:
        module.warn(f"ignoring unreadable '{nvidia_smi} topo -m' output: {exc}")
        return None


def _read_mig_minors(module: AnsibleModule, parsed: dict) -> tuple[dict | None, str | None]:
    """The MIG minors file, parsed, when a GPU has MIG devices: (minors or None, the path read)."""
    if not any(gpu["mig_devices"] for gpu in parsed["gpus"]):
        return None, None
    path = module.params["mig_minors_path"]
    try:
        with open(path, encoding="utf-8") as handle:
            return parse_mig_minors(handle.read()), path
    except FileNotFoundError:
        return None, path
    except OSError as exc:
        module.warn(f"cannot read the MIG minors file {path}: {exc}")
        return None, path


def _parse_xml_or_fail(module: AnsibleModule, nvidia_smi: str, text: str) -> dict:
    try:
        return parse_xml(text)
    except NvidiaSmiParseError as exc:
        error = str(exc)
    # Failing outside the except block keeps Ansible from attaching a traceback.
    module.fail_json(msg=f"cannot read the output of '{nvidia_smi} -q -x': {error}")
    raise AssertionError("unreachable: fail_json exits")


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "nvidia_smi_path": {"type": "path"},
            "topology": {"type": "bool", "default": True},
            "mig_minors_path": {"type": "path", "default": MIG_MINORS_PATH},
        },
        supports_check_mode=True,
    )
    nvidia_smi = _find_nvidia_smi(module)
    if nvidia_smi is None:
        module.exit_json(changed=False, ansible_facts={"deepops_gpus": absent_facts()})

    rc, out, err = module.run_command([nvidia_smi, "-q", "-x"])
    if rc != 0:
        module.fail_json(
            msg=f"'{nvidia_smi} -q -x' failed (rc={rc}): {(err or out).strip()}", rc=rc
        )
    parsed = _parse_xml_or_fail(module, nvidia_smi, out)
    topology = _read_topology(module, nvidia_smi) if module.params["topology"] else None
    minors, minors_path = _read_mig_minors(module, parsed)
    facts = build_facts(parsed, topology, minors, minors_path)
    if topology is not None and facts["topology"]["gpu_rows"] != facts["count"]:
        module.warn(
            f"topo -m lists {facts['topology']['gpu_rows']} GPUs, -q -x lists {facts['count']}"
        )
    attached = facts["attached_gpus"]
    if attached is not None and attached != facts["count"]:
        module.warn(f"nvidia-smi reports attached_gpus={attached} but lists {facts['count']} GPUs")
    module.exit_json(changed=False, ansible_facts={"deepops_gpus": facts})


if __name__ == "__main__":
    main()
