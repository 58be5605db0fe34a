"""Apply a ``mig_layout`` to a node's GPUs: read the MIG state, change only what differs.

The logic of the ``nvidia_mig`` module, with no Ansible imports, so that unit
tests drive it directly (against the virtual cluster's stand-in
``nvidia-smi``) and it ships to hosts as module_utils; it must run on the
hosts' Python (3.8 and later). Every ``nvidia-smi`` call goes through a
``run(argv) -> (rc, stdout, stderr)`` callable.

State read
    ``nvidia-smi -q -x`` (GPUs, product names, MIG mode current and pending),
    ``nvidia-smi mig -lgi`` and ``-lci`` (GPU and compute instances) when some
    GPU is in MIG mode, ``nvidia-smi mig -i N -lgip`` (the driver's profile
    ids) before creating instances on GPU N.

What a GPU is compared on
    Its MIG mode, and its GPU instances as a multiset of profile names, each
    with exactly one compute instance spanning it. Placements and instance ids
    are not compared: two GPUs holding the same profiles serve Slurm the same
    way.

What is changed, per GPU the layout manages (the others are never touched)
    ``disabled``: instances destroyed, then ``-mig 0``. A list: ``-mig 1`` when
    MIG is off; then, when the instances differ, every compute and GPU
    instance of that GPU is destroyed and the whole list created again, largest
    ``placement_size`` first, with ``-cgi <ids> -C``. A GPU whose instances
    already match is not touched.

    A mode change the driver leaves pending (the GPU is in use, or needs a
    reset) is reported in ``reset_required``, not retried: only a GPU reset or
    a reboot completes it. That GPU gets no instances in this run (none can be
    created while MIG is not the current mode); the next run after the reboot
    creates them.

Failures
    A layout that does not fit the GPUs found (an index beyond the GPU count,
    a profile of another model, a list that cannot be placed) raises
    ``LayoutError`` before any command that changes something runs, on any GPU.
    A changing command that fails raises ``MigApplyError`` naming the command,
    its output, and what was already done.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence, Tuple

from ansible_collections.deepops.cluster.plugins.module_utils.mig_profiles import (
    ALL,
    UNMANAGED,
    LayoutError,
    MigModel,
    expand_layout,
    model_for,
    shape_problems,
)
from ansible_collections.deepops.cluster.plugins.module_utils.nvidia_smi import NvidiaSmiParseError, parse_xml

__all__ = [
    "ComputeInstance",
    "Gpu",
    "GpuInstance",
    "MigApplyError",
    "Result",
    "Runner",
    "apply_layout",
    "creation_order",
    "parse_compute_instances",
    "parse_gpu_instances",
    "parse_profile_ids",
    "read_gpus",
    "wanted_layouts",
]

Runner = Callable[[Sequence[str]], Tuple[int, str, str]]

ENABLED = "Enabled"
DISABLED_MODE = "Disabled"

# nvidia-smi's "not found" answers of the listing commands: nothing to list, not an error.
_NOTHING_LISTED = ("No GPU instances found", "No compute instances found", "No MIG-enabled devices found")

# Rows of the tables nvidia-smi mig prints (R470 and later; the "MIG " before
# the name is optional, as older drivers print the bare profile name):
#   -lgi   |   0  MIG 1g.5gb            19        9          2:1     |
#   -lci   |   0      9       MIG 1g.5gb           0         0          0:1     |
#   -lgip  |   0  MIG 1g.5gb          19     4/7        4.75       No     14     0     0   |
_LGI_ROW = re.compile(r"^\|\s*(\d+)\s+(?:MIG\s+)?(\S+)\s+(\d+)\s+(\d+)\s+(\d+):(\d+)\s*\|\s*$")
_LCI_ROW = re.compile(r"^\|\s*(\d+)\s+(\d+)\s+(?:MIG\s+)?(\S+)\s+(\d+)\s+(\d+)\s+(\d+):(\d+)\s*\|\s*$")
_LGIP_ROW = re.compile(r"^\|\s*(\d+)\s+(?:MIG\s+)?(\S+)\s+(\d+)\s+\d+/\d+\s")


class MigApplyError(Exception):
    """nvidia-smi failed or answered unexpectedly; ``actions`` lists the changing commands already run."""

    def __init__(self, message: str, actions: Sequence[str] = ()):
        super().__init__(message)
        self.actions = list(actions)


@dataclass
class ComputeInstance:
    gpu_instance_id: int
    name: str  # "1g.5gb" for one spanning its GPU instance, "1c.3g.20gb" for a part of one
    profile_id: int
    instance_id: int
    start: int
    size: int  # compute slices


@dataclass
class GpuInstance:
    gpu: int
    profile: str  # "1g.5gb", without the "MIG " nvidia-smi prints
    profile_id: int
    instance_id: int
    start: int
    size: int  # placement slots
    compute_instances: List[ComputeInstance] = field(default_factory=list)


@dataclass
class Gpu:
    index: int
    product_name: Optional[str]
    model: Optional[MigModel]  # None: no MIG table in deepops (or no MIG at all)
    current_mode: str  # Enabled, Disabled, or N/A on a GPU without MIG
    pending_mode: str
    gpu_instances: List[GpuInstance] = field(default_factory=list)

    def profiles(self) -> List[str]:
        return sorted_profiles(self.model, [gi.profile for gi in self.gpu_instances])

    def one_spanning_ci_each(self) -> bool:
        """Every GPU instance holds exactly one compute instance, and it spans the GPU instance."""
        for gi in self.gpu_instances:
            profile = self.model.profile(gi.profile) if self.model else None
            if profile is None or len(gi.compute_instances) != 1:
                return False
            if gi.compute_instances[0].size != profile.compute_slices:
                return False
        return True


@dataclass
class Result:
    changed: bool = False
    actions: List[str] = field(default_factory=list)
    reset_required: List[int] = field(default_factory=list)
    gpus: List[dict] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "changed": self.changed,
            "actions": list(self.actions),
            "reset_required": list(self.reset_required),
            "gpus": [dict(gpu) for gpu in self.gpus],
        }


# --------------------------------------------------------------------------
# reading nvidia-smi


def _detail(out: str, err: str) -> str:
    return " ".join(((err or "").strip() or (out or "").strip() or "no output").split())


def parse_gpu_instances(text: str) -> List[GpuInstance]:
    """The rows of ``nvidia-smi mig -lgi``."""
    found = []
    for line in (text or "").splitlines():
        match = _LGI_ROW.match(line.strip())
        if match:
            gpu, name, profile_id, instance_id, start, size = match.groups()
            found.append(GpuInstance(int(gpu), name, int(profile_id), int(instance_id), int(start), int(size)))
    return found


def parse_compute_instances(text: str) -> List[Tuple[int, ComputeInstance]]:
    """(GPU index, compute instance) for the rows of ``nvidia-smi mig -lci``."""
    found = []
    for line in (text or "").splitlines():
        match = _LCI_ROW.match(line.strip())
        if match:
            gpu, gi, name, profile_id, instance_id, start, size = match.groups()
            found.append((int(gpu), ComputeInstance(int(gi), name, int(profile_id), int(instance_id), int(start), int(size))))
    return found


def parse_profile_ids(text: str) -> dict:
    """Profile name -> id from ``nvidia-smi mig -lgip`` (one GPU's table)."""
    ids = {}
    for line in (text or "").splitlines():
        match = _LGIP_ROW.match(line.strip())
        if match:
            ids.setdefault(match.group(2), int(match.group(3)))
    return ids


def _listing(run: Runner, argv: Sequence[str]) -> str:
    """Output of a read-only ``nvidia-smi mig -l...``; empty when it finds nothing to list."""
    rc, out, err = run(list(argv))
    if rc == 0:
        return out
    if any(phrase in (out or "") + (err or "") for phrase in _NOTHING_LISTED):
        return ""
    raise MigApplyError(f"'{shlex.join(argv)}' failed (rc={rc}): {_detail(out, err)}")


def read_gpus(run: Runner, nvidia_smi: str) -> List[Gpu]:
    """Every GPU with its MIG mode and, for GPUs in MIG mode, its GPU and compute instances."""
    rc, out, err = run([nvidia_smi, "-q", "-x"])
    if rc != 0:
        raise MigApplyError(f"'{nvidia_smi} -q -x' failed (rc={rc}): {_detail(out, err)}")
    try:
        parsed = parse_xml(out)
    except NvidiaSmiParseError as error:
        raise MigApplyError(f"cannot read the output of '{nvidia_smi} -q -x': {error}") from None
    gpus = [
        Gpu(
            index=gpu["index"],
            product_name=gpu["product_name"],
            model=model_for(product_name=gpu["product_name"]),
            current_mode=gpu["mig_mode"]["current"],
            pending_mode=gpu["mig_mode"]["pending"],
        )
        for gpu in parsed["gpus"]
    ]
    if any(gpu.current_mode == ENABLED for gpu in gpus):
        _read_instances(run, nvidia_smi, gpus)
    return gpus


def _read_instances(run: Runner, nvidia_smi: str, gpus: Sequence[Gpu], index: Optional[int] = None) -> None:
    selector = [] if index is None else ["-i", str(index)]
    chosen = [gpu for gpu in gpus if index is None or gpu.index == index]
    by_index = {gpu.index: gpu for gpu in chosen}
    for gpu in chosen:
        gpu.gpu_instances = []
    for gi in parse_gpu_instances(_listing(run, [nvidia_smi, "mig", *selector, "-lgi"])):
        if gi.gpu in by_index:
            by_index[gi.gpu].gpu_instances.append(gi)
    for gpu_index, ci in parse_compute_instances(_listing(run, [nvidia_smi, "mig", *selector, "-lci"])):
        gpu = by_index.get(gpu_index)
        owner = next((gi for gi in gpu.gpu_instances if gi.instance_id == ci.gpu_instance_id), None) if gpu else None
        if owner is not None:
            owner.compute_instances.append(ci)
    for gpu in chosen:
        gpu.gpu_instances.sort(key=lambda gi: (gi.start, gi.instance_id))


# --------------------------------------------------------------------------
# the wanted state


def _index_key(key: object) -> object:
    """A well-formed layout key as an int index or ``all`` (shape_problems has passed)."""
    if isinstance(key, int):
        return key
    text = str(key).strip()
    return ALL if text == ALL else int(text)


def wanted_layouts(gpus: Sequence[Gpu], layout: object) -> dict:
    """GPU index -> profiles wanted on it (None: MIG off), for the GPUs LAYOUT manages.

    GPUs of one model (the usual node) are checked together by
    ``mig_profiles.expand_layout``, so its messages come unchanged. On a node
    mixing models each GPU is checked against its own model. Raises
    LayoutError with every problem found.
    """
    problems = shape_problems(layout)
    if problems:
        raise LayoutError(problems)
    if layout is None or layout == UNMANAGED:
        return {}
    count = len(gpus)
    entries = {_index_key(key): value for key, value in layout.items()} if isinstance(layout, Mapping) else {ALL: layout}
    if count == 0:
        # No GPUs: "all" is vacuous, an index names a GPU that is not there.
        missing = [f"GPU {key}: no such GPU, the node has no GPUs" for key in sorted(k for k in entries if k != ALL)]
        if missing:
            raise LayoutError(missing)
        return {}
    models = {gpu.model.key if gpu.model else None: gpu.model for gpu in gpus}
    if len(models) == 1:
        return expand_layout(next(iter(models.values())), layout, count)
    wanted, problems = {}, []
    last = f"0-{count - 1}"
    for key in sorted(k for k in entries if k != ALL):
        if key >= count:
            problems.append(f"GPU {key}: no such GPU, the node has {count} ({last})")
    for gpu in gpus:
        value = entries.get(gpu.index, entries.get(ALL, UNMANAGED))
        try:
            wanted.update(expand_layout(gpu.model, {gpu.index: value}, count))
        except LayoutError as error:
            problems.extend(error.problems)
    if problems:
        raise LayoutError(problems)
    return dict(sorted(wanted.items()))


def _mode_problems(gpus: Sequence[Gpu], wanted: dict) -> List[str]:
    """GPUs a list of profiles is asked of that report no MIG mode at all."""
    return [
        f"GPU {gpu.index}: {', '.join(wanted[gpu.index])} needs MIG, and nvidia-smi reports no MIG mode for this "
        f"{gpu.product_name or 'GPU'} (MIG mode {gpu.current_mode})"
        for gpu in gpus
        if wanted.get(gpu.index) is not None and gpu.current_mode not in (ENABLED, DISABLED_MODE)
    ]


def sorted_profiles(model: Optional[MigModel], names: Sequence[str]) -> List[str]:
    """Names largest placement first, then by name: one canonical order to compare and show."""
    def size(name: str) -> int:
        profile = model.profile(name) if model else None
        return profile.placement_size if profile else 0

    return sorted(names, key=lambda name: (-size(name), name))


def creation_order(model: MigModel, names: Sequence[str]) -> List[str]:
    """The profiles in non-increasing placement size (stable otherwise).

    Without explicit placements the driver picks each instance's start itself
    (see the stand-in nvidia-smi's docstring: the MIG user guide's
    ``-cgi 19,19,14,9`` fails where ``9,19,14,19`` fits). Created largest
    first, every list ``mig_profiles.place`` accepts fits.
    """
    return sorted(names, key=lambda name: -model.profile(name).placement_size)


# --------------------------------------------------------------------------
# applying


class _Applier:
    def __init__(self, run: Runner, nvidia_smi: str, check_mode: bool):
        self.run = run
        self.nvidia_smi = nvidia_smi
        self.check_mode = check_mode
        self.result = Result()

    def change(self, argv: Sequence[str]) -> str:
        """Run (or, in check mode, only record) one command that changes the GPUs."""
        command = shlex.join(argv)
        self.result.actions.append(command)
        self.result.changed = True
        if self.check_mode:
            return ""
        rc, out, err = self.run(list(argv))
        if rc != 0:
            raise MigApplyError(f"'{command}' failed (rc={rc}): {_detail(out, err)}", self.result.actions)
        return out

    def reread_mode(self, gpu: Gpu) -> None:
        for fresh in read_gpus(self.run, self.nvidia_smi):
            if fresh.index == gpu.index:
                gpu.current_mode, gpu.pending_mode = fresh.current_mode, fresh.pending_mode
                return
        raise MigApplyError(f"GPU {gpu.index} is no longer listed by '{self.nvidia_smi} -q -x'", self.result.actions)

    def destroy_instances(self, gpu: Gpu) -> None:
        smi, index = self.nvidia_smi, str(gpu.index)
        if any(gi.compute_instances for gi in gpu.gpu_instances):
            self.change([smi, "mig", "-i", index, "-dci"])
        if gpu.gpu_instances:
            self.change([smi, "mig", "-i", index, "-dgi"])
        gpu.gpu_instances = []

    def set_mode(self, gpu: Gpu, mode: str) -> bool:
        """Ask for MODE; True when it is the current mode afterwards (in check mode: assumed)."""
        self.change([self.nvidia_smi, "-i", str(gpu.index), "-mig", "1" if mode == ENABLED else "0"])
        if self.check_mode:
            gpu.current_mode = gpu.pending_mode = mode
            return True
        self.reread_mode(gpu)
        return gpu.current_mode == mode

    def profile_ids(self, gpu: Gpu, names: Sequence[str]) -> List[str]:
        """The driver's ids for NAMES (``-lgip``); the table's in check mode, where MIG may not be on yet."""
        table = {profile.name: profile.profile_id for profile in gpu.model.profiles}
        if not self.check_mode:
            listed = parse_profile_ids(_listing(self.run, [self.nvidia_smi, "mig", "-i", str(gpu.index), "-lgip"]))
            unknown = [name for name in dict.fromkeys(names) if name not in listed]
            if unknown:
                raise MigApplyError(
                    f"GPU {gpu.index}: the driver lists no profile {', '.join(unknown)} "
                    f"('{self.nvidia_smi} mig -i {gpu.index} -lgip' lists {', '.join(sorted(listed)) or 'none'})",
                    self.result.actions,
                )
            table = listed
        return [str(table[name]) for name in names]

    def create_instances(self, gpu: Gpu, wanted: Sequence[str]) -> None:
        if not wanted:
            return
        ordered = creation_order(gpu.model, wanted)
        self.change([self.nvidia_smi, "mig", "-i", str(gpu.index), "-cgi", ",".join(self.profile_ids(gpu, ordered)), "-C"])
        if self.check_mode:
            return
        _read_instances(self.run, self.nvidia_smi, [gpu], gpu.index)
        if gpu.profiles() != sorted_profiles(gpu.model, wanted) or not gpu.one_spanning_ci_each():
            raise MigApplyError(
                f"GPU {gpu.index}: created {', '.join(ordered)}, but nvidia-smi now lists "
                f"{', '.join(gpu.profiles()) or 'no GPU instances'}",
                self.result.actions,
            )

    def converge(self, gpu: Gpu, wanted: Optional[List[str]]) -> Tuple[bool, bool]:
        """Bring GPU to WANTED (None: MIG off); (changed, reset required)."""
        before = len(self.result.actions)
        mode = DISABLED_MODE if wanted is None else ENABLED
        if gpu.current_mode not in (ENABLED, DISABLED_MODE):
            return False, False  # no MIG on this GPU: only "disabled" reaches here, and it already is
        if gpu.current_mode != mode and gpu.pending_mode == mode:
            # Asked before (an earlier run, or by hand): the GPU was in use. Only a
            # GPU reset or a reboot completes it; asking again changes nothing.
            return False, True
        if gpu.pending_mode != mode or gpu.current_mode != mode:
            if mode == DISABLED_MODE:
                self.destroy_instances(gpu)  # the driver refuses to leave MIG mode with instances
            if not self.set_mode(gpu, mode):
                return len(self.result.actions) > before, True
        if wanted is not None and (gpu.profiles() != sorted_profiles(gpu.model, wanted) or not gpu.one_spanning_ci_each()):
            # All of them, not only the ones that are not wanted: the driver
            # places each new instance itself, so keeping some can leave no
            # room of the right shape for the others (a 3g.40gb kept at slots
            # 0-3 with a 4g.40gb wanted, which only fits at 0). Recreating the
            # whole list largest first always fits.
            self.destroy_instances(gpu)
            self.create_instances(gpu, wanted)
        return len(self.result.actions) > before, False


def apply_layout(run: Runner, nvidia_smi: Optional[str], layout: object, check_mode: bool = False) -> Result:
    """Converge the node's GPUs to LAYOUT; ``nvidia_smi`` None means not installed (no GPUs).

    Raises LayoutError (nothing changed) or MigApplyError.
    """
    gpus = read_gpus(run, nvidia_smi) if nvidia_smi else []
    wanted = wanted_layouts(gpus, layout)
    problems = _mode_problems(gpus, wanted)
    if problems:
        raise LayoutError(problems)
    applier = _Applier(run, nvidia_smi or "nvidia-smi", check_mode)
    result = applier.result
    if not gpus and layout not in (None, UNMANAGED) and not shape_problems(layout):
        result.warnings.append(
            "mig_layout is set, and this host has no GPUs" + ("" if nvidia_smi else " (nvidia-smi not found)")
        )
    for gpu in gpus:
        record = {
            "index": gpu.index,
            "product_name": gpu.product_name,
            "model": gpu.model.label if gpu.model else None,
            "mig_mode": {"current": gpu.current_mode, "pending": gpu.pending_mode},
            "current": gpu.profiles(),
            "managed": gpu.index in wanted,
            "wanted_mig_mode": None,
            "wanted": None,
            "changed": False,
            "reset_required": False,
        }
        if gpu.index in wanted:
            profiles = wanted[gpu.index]
            record["wanted_mig_mode"] = DISABLED_MODE if profiles is None else ENABLED
            record["wanted"] = [] if profiles is None else sorted_profiles(gpu.model, profiles)
            record["changed"], record["reset_required"] = applier.converge(gpu, profiles)
            if record["reset_required"]:
                result.reset_required.append(gpu.index)
        result.gpus.append(record)
    return result
