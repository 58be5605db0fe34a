#!/usr/bin/python
"""Ansible module: apply a MIG layout to a node's GPUs, changing only what differs."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvidia_mig
short_description: Apply a MIG layout to the GPUs of a node, idempotently
description:
  - Reads the GPUs and their MIG mode from C(nvidia-smi -q -x), and the GPU and compute
    instances from C(nvidia-smi mig -lgi) and C(-lci); works out, per GPU, the profiles
    O(layout) asks for (the C(mig_layout) vocabulary of the C(mig) role), and changes only
    the GPUs that differ.
  - The GPU model of each GPU comes from its product name, and must be in deepops' MIG table
    (C(plugins/module_utils/mig_profiles.py)) for a layout that enables MIG.
  - A layout that does not fit the GPUs found (an index beyond the GPU count, a profile the
    model does not have, a list that cannot be placed on one GPU) fails the task before any
    GPU is changed. Every problem is listed, naming GPU and profile.
  - V(disabled) destroys the GPU's instances and turns MIG mode off. A list of profiles turns
    MIG mode on where it is off; then, when the GPU's instances are not exactly the listed
    profiles (each with one compute instance spanning it), every instance of that GPU is
    destroyed and the whole list created again, largest first, with
    C(nvidia-smi mig -cgi <ids> -C). A GPU whose instances already match is not touched,
    and GPUs the layout does not manage are never touched.
  - A MIG mode change that the driver leaves pending (the GPU is in use) is reported in
    RV(reset_required) and not retried; that GPU's instances are created by the first run
    after a GPU reset or a reboot. This is not a failure.
  - Check mode runs only the reading commands and returns what would be run in RV(actions).
version_added: "0.1.0"
author:
  - deepops developers (@deepops)
options:
  layout:
    description:
      - The MIG layout of the node, as the C(mig) role's C(mig_layout) takes it.
      - V(unmanaged) (or null) changes nothing. V(disabled) turns MIG off on every GPU.
        V(all-<profile>) (for example V(all-1g.10gb)) cuts every GPU into as many instances
        of that profile as fit, V(all-balanced) into the model's balanced preset.
      - A mapping from a GPU index (0, 1, ...) or V(all) to a list of GPU-instance profile
        names, or to one of the words above for that GPU. An index overrides V(all); GPUs the
        mapping does not name are left as they are.
    type: raw
    required: true
  nvidia_smi_path:
    description:
      - Path of the nvidia-smi binary. Found on C(PATH) when not given.
      - When there is no nvidia-smi the host has no GPUs, and only a layout that names a GPU
        index fails.
    type: path
    aliases: [nvidia_smi]
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
notes:
  - Each GPU instance gets one compute instance spanning it; other compute-instance layouts
    are not supported, and a GPU that has one is recreated when the layout manages it.
  - Instances are compared as a multiset of profile names, not by placement or id.
  - Destroying instances that a process uses fails (the driver refuses); the C(mig) role
    drains the node in Slurm and waits for its jobs first.
  - In check mode a mode change is assumed to take effect, so the instances it would create
    are listed too; profile ids come from deepops' table there, and from
    C(nvidia-smi mig -lgip) when applying.
seealso:
  - module: deepops.cluster.nvidia_gpu_facts
"""

EXAMPLES = r"""
- name: MIG | A mixed layout on every GPU
  deepops.cluster.nvidia_mig:
    layout:
      all: [3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb]

- name: MIG | Seven 1g.10gb on GPU 0, MIG off on GPU 1, the others left alone
  deepops.cluster.nvidia_mig:
    layout:
      0: all-1g.10gb
      1: disabled

- name: MIG | What would change (nothing is run)
  deepops.cluster.nvidia_mig:
    layout: "{{ mig_layout }}"
  check_mode: true
  register: mig_plan
"""

RETURN = r"""
changed:
  description: Whether a command that changes the GPUs ran (in check mode, would run).
  returned: always
  type: bool
  sample: true
actions:
  description: The changing nvidia-smi commands run (in check mode, that would run), in order.
  returned: always
  type: list
  elements: str
  sample:
    - /usr/bin/nvidia-smi -i 0 -mig 1
    - /usr/bin/nvidia-smi mig -i 0 -cgi 9,14,19,19 -C
reset_required:
  description:
    - Indexes of the GPUs whose MIG mode change is pending until a GPU reset or a reboot.
      Their instances are not created in this run.
  returned: always
  type: list
  elements: int
  sample: [1]
gpus:
  description: One entry per GPU, in C(nvidia-smi) index order.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: The nvidia-smi index of the GPU.
      type: int
      sample: 0
    product_name:
      description: The product name nvidia-smi reports.
      type: str
      sample: NVIDIA A100-SXM4-80GB
    model:
      description: The model in deepops' MIG table, null when it has none.
      type: str
      sample: A100 80GB
    mig_mode:
      description: MIG mode as found, C(current) and C(pending), each Enabled, Disabled or N/A.
      type: dict
      sample: {"current": "Disabled", "pending": "Disabled"}
    current:
      description: Profiles of the GPU instances as found, largest first.
      type: list
      elements: str
      sample: []
    managed:
      description: Whether the layout manages this GPU.
      type: bool
      sample: true
    wanted_mig_mode:
      description: Enabled or Disabled; null for a GPU the layout does not manage.
      type: str
      sample: Enabled
    wanted:
      description: Profiles the layout asks for, largest first; null for a GPU the layout does not manage.
      type: list
      elements: str
      sample: ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    changed:
      description: Whether this GPU was (would be) changed.
      type: bool
      sample: true
    reset_required:
      description: Whether this GPU's MIG mode change waits for a GPU reset or a reboot.
      type: bool
      sample: false
"""

# Ansible modules import after their documentation strings.
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.deepops.cluster.plugins.module_utils.mig_apply import MigApplyError, apply_layout
from ansible_collections.deepops.cluster.plugins.module_utils.mig_profiles import LayoutError


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "layout": {"type": "raw", "required": True},
            "nvidia_smi_path": {"type": "path", "aliases": ["nvidia_smi"]},
        },
        supports_check_mode=True,
    )
    path = module.params["nvidia_smi_path"] or module.get_bin_path("nvidia-smi")
    nvidia_smi = path if path and os.path.exists(path) else None

    def run(argv):
        rc, out, err = module.run_command(list(argv))
        return rc, out, err

    result, failure = None, None
    try:
        result = apply_layout(run, nvidia_smi, module.params["layout"], check_mode=module.check_mode)
    except LayoutError as error:
        failure = {"msg": f"mig_layout does not fit this node's GPUs, nothing changed: {error}", "problems": list(error.problems)}
    except MigApplyError as error:
        failure = {"msg": str(error), "actions": error.actions, "changed": bool(error.actions)}
    if failure is not None:
        # Failing outside the except blocks keeps Ansible from attaching a traceback.
        module.fail_json(**failure)
    for warning in result.warnings:
        module.warn(warning)
    module.exit_json(**result.as_dict())


if __name__ == "__main__":
    main()
