"""MIG GPU-instance profiles per GPU model, and the ``mig_layout`` vocabulary.

One table, shared by the inventory check (``deepops check``), the MIG apply
module and the virtual cluster's stand-in ``nvidia-smi``. Pure Python with no
Ansible imports, so that it can ship to hosts as module_utils; it must run on
the hosts' Python (3.8 and later).

Where the numbers come from
    The geometry of every model (profile names, compute and memory fractions,
    how many instances fit, engines) is NVIDIA's Multi-Instance GPU User Guide,
    section "Supported MIG Profiles": each model names its table in
    ``MigModel.source`` (the H20, which has none there, takes the H100 96GB
    table, as NVIDIA mig-parted does). That section draws the valid placements only as
    diagrams; the placements, the GPU-instance profile ids, the SM counts and
    the memory sizes here are what ``nvidia-smi mig -lgip`` and ``-lgipp``
    print on the model (the guide's own listing for the A100 40GB, public
    captures for the others). Anything not read from a source is listed, with
    how it was derived, in ``MigModel.derived``.

Models left out, and the least certain ones
    A model that is not in ``MODELS`` cannot take a layout: the check says
    so. Among those the guide lists are the H100 PCIe, the H100 on GH200,
    GB200 and the RTX PRO Blackwell boards. B200 and H20 are in the table
    with more derived values than the others: no ``-lgipp`` listing was
    found for either; of the B200's ``-lgip``, the 3g, 4g and 7g rows were
    found only in part; of the H20's, only the 1g rows, so its other SM
    counts and sizes are estimates. Their ``derived`` says which and how.

Layout vocabulary (``mig_layout``)
    ``unmanaged`` (or null)   leave MIG as it is on every GPU (the default)
    ``disabled``              MIG mode off on every GPU
    ``all-<profile>``         every GPU cut into as many ``<profile>`` as fit
    ``all-balanced``          every GPU cut into the model's balanced preset
    a mapping                 GPU index (0, 1, ...) or ``all`` -> a list of
                              GPU-instance profile names, or one of the words
                              above for that GPU; an index overrides ``all``,
                              and GPUs the mapping does not name are left as
                              they are.

Each GPU instance gets one compute instance spanning it (the default; a
compute-instance layout is not part of the vocabulary).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ansible_collections.deepops.cluster.plugins.module_utils.nvidia_smi import normalize_gpu_type

__all__ = [
    "ALL",
    "BALANCED",
    "DISABLED",
    "GpuInstanceProfile",
    "LayoutError",
    "MODELS",
    "MigModel",
    "PROFILE_NAME",
    "UNMANAGED",
    "expand_layout",
    "fit_count",
    "layout_problems",
    "model_for",
    "models_for",
    "offline_problems",
    "place",
    "shape_problems",
]

UNMANAGED = "unmanaged"
DISABLED = "disabled"
BALANCED = "all-balanced"
ALL = "all"
_ALL_PREFIX = "all-"

# What nvidia-smi calls a GPU-instance profile: 1g.10gb, 1g.10gb+me,
# 1g.24gb+me.all, 1g.24gb-me, 2g.48gb+gfx.
PROFILE_NAME = re.compile(r"[1-9][0-9]*g\.[0-9]+gb(?:[+-][a-z]+(?:\.[a-z]+)*)*")

_GUIDE = "NVIDIA Multi-Instance GPU User Guide, Supported MIG Profiles"


@dataclass(frozen=True)
class GpuInstanceProfile:
    """One GPU-instance profile of one model, as ``nvidia-smi mig -lgip``/``-lgipp`` list it.

    Engine counts (copy engines, decoders, encoders, JPEG, OFA) are the
    ``-lgip`` columns CE, DEC, ENC, JPEG, OFA.
    """

    name: str
    profile_id: int
    compute_slices: int
    memory_slices: int
    memory_mib: int
    max_instances: int
    multiprocessors: int
    placements: tuple[int, ...]
    placement_size: int
    copy_engines: int
    decoders: int
    encoders: int
    jpeg: int
    ofa: int


@dataclass(frozen=True)
class MigModel:
    """A GPU model that supports MIG: its profiles and where they come from."""

    key: str
    label: str  # how messages name it: "A100 80GB"
    gpu_type: str  # the Slurm GPU type deepops derives for it (nvidia_smi.normalize_gpu_type)
    product_names: tuple[str, ...]  # nvidia-smi product names of this model
    compute_slices: int  # 7, or 4 on the A30
    memory_slices: int  # 8, or 4 on the A30
    profiles: tuple[GpuInstanceProfile, ...]
    balanced: tuple[str, ...]  # the all-balanced preset
    source: str
    derived: tuple[str, ...] = ()  # values not read from a source, each with how it was derived

    def profile(self, name: str) -> GpuInstanceProfile | None:
        """The profile called ``name`` (``1g.10gb``; a leading ``MIG `` is accepted), or None."""
        wanted = name[4:] if isinstance(name, str) and name.startswith("MIG ") else name
        for profile in self.profiles:
            if profile.name == wanted:
                return profile
        return None

    def profile_by_id(self, profile_id: int) -> GpuInstanceProfile | None:
        for profile in self.profiles:
            if profile.profile_id == profile_id:
                return profile
        return None

    @property
    def profile_names(self) -> tuple[str, ...]:
        return tuple(profile.name for profile in self.profiles)


class LayoutError(ValueError):
    """A layout that cannot be applied; ``problems`` lists every reason, each naming GPU and profile."""

    def __init__(self, problems: Sequence[str]):
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems))


# --------------------------------------------------------------------------
# the table


def _mib(gib: float) -> int:
    """MiB from the GiB that ``-lgip`` prints (two decimals, so 5.81 stands for 5.8125).

    The driver sizes instances in multiples of 64 MiB (the ``-q`` XML of the
    captures reports e.g. 19968 MiB where ``-lgip`` prints 19.50), so the
    nearest multiple of 64 MiB is the exact value.
    """
    return int(round(gib * 1024 / 64)) * 64


def _p(name, profile_id, compute, memory, gib, max_instances, sms, placements, ce, dec, jpeg, ofa, enc=0):
    """A profile row; placement size is the profile's memory slices (true on every model here)."""
    return GpuInstanceProfile(
        name=name, profile_id=profile_id, compute_slices=compute, memory_slices=memory,
        memory_mib=_mib(gib), max_instances=max_instances, multiprocessors=sms,
        placements=tuple(placements), placement_size=memory,
        copy_engines=ce, decoders=dec, encoders=enc, jpeg=jpeg, ofa=ofa,
    )


# -lgipp on every 8-memory-slice model captured here (A100 40GB in the guide,
# A100 80GB, H100 80GB, H100 NVL): the same starts for the same profile shape.
_ONE = range(7)  # {0,1,2,3,4,5,6}:1
_TWO_1G = (0, 2, 4, 6)  # the 1g profile with two memory slices: {0,2,4,6}:2
_TWO = (0, 2, 4)  # {0,2,4}:2
_HALF = (0, 4)  # {0,4}:4
_FIRST = (0,)  # {0}:4 and {0}:8

_A100_40GB = MigModel(
    key="a100-40gb",
    label="A100 40GB",
    gpu_type="a100",
    product_names=("NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB"),
    compute_slices=7,
    memory_slices=8,
    # name, id, compute slices, memory slices, GiB, max, SMs, placements, CE, DEC, JPEG, OFA
    profiles=(
        _p("1g.5gb", 19, 1, 1, 4.75, 7, 14, _ONE, 1, 0, 0, 0),
        _p("1g.5gb+me", 20, 1, 1, 4.75, 1, 14, _ONE, 1, 1, 1, 1),
        _p("1g.10gb", 15, 1, 2, 9.62, 4, 14, _TWO_1G, 1, 1, 0, 0),  # R525 and later, says the guide
        _p("2g.10gb", 14, 2, 2, 9.62, 3, 28, _TWO, 2, 1, 0, 0),
        _p("3g.20gb", 9, 3, 4, 19.50, 2, 42, _HALF, 3, 2, 0, 0),
        _p("4g.20gb", 5, 4, 4, 19.50, 1, 56, _FIRST, 4, 2, 0, 0),
        _p("7g.40gb", 0, 7, 8, 39.25, 1, 98, _FIRST, 7, 5, 1, 1),
    ),
    balanced=("3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"),
    source=(
        f"{_GUIDE}: 'A100 MIG Profiles', the table of the A100-SXM4-40GB product (Table 6 in the R580 guide); "
        "ids, SMs, memory and placements from the guide's own 'nvidia-smi mig -lgip' and '-lgipp' listing "
        "(Getting Started with MIG, List GPU Instance Profiles). all-balanced: NVIDIA mig-parted's default "
        "configuration (deployments/systemd/config-default.yaml)"
    ),
)

_A100_80GB = MigModel(
    key="a100-80gb",
    label="A100 80GB",
    gpu_type="a100",
    product_names=("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe"),
    compute_slices=7,
    memory_slices=8,
    profiles=(
        _p("1g.10gb", 19, 1, 1, 9.50, 7, 14, _ONE, 1, 0, 0, 0),
        _p("1g.10gb+me", 20, 1, 1, 9.50, 1, 14, _ONE, 1, 1, 1, 1),
        _p("1g.20gb", 15, 1, 2, 19.50, 4, 14, _TWO_1G, 1, 1, 0, 0),
        _p("2g.20gb", 14, 2, 2, 19.50, 3, 28, _TWO, 2, 1, 0, 0),
        _p("3g.40gb", 9, 3, 4, 39.25, 2, 42, _HALF, 3, 2, 0, 0),
        _p("4g.40gb", 5, 4, 4, 39.25, 1, 56, _FIRST, 4, 2, 0, 0),
        _p("7g.80gb", 0, 7, 8, 79.00, 1, 98, _FIRST, 7, 5, 1, 1),
    ),
    balanced=("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"),
    source=(
        f"{_GUIDE}: 'A100 MIG Profiles' (Table 6 in the R580 guide), whose note gives the A100-SXM4-80GB "
        "profile names; ids, SMs, memory (GiB as printed with R525+ drivers; the 7g size differs by a "
        "quarter GiB between drivers) and engines from public 'nvidia-smi mig -lgip' captures of an "
        "A100-SXM4-80GB, matching tests' fixture a100-sxm4-80gb-mig-4x1g20gb-driver535.xml (1g.20gb: 14 SMs, "
        "19968 MiB). all-balanced: NVIDIA mig-parted's default configuration"
    ),
    derived=(
        "placements: the guide's A100 40GB -lgipp listing; the guide gives the 80GB product the same "
        "profiles with twice the memory, and H100/H100 NVL captures show the same starts for the same shapes",
    ),
)

_A30 = MigModel(
    key="a30-24gb",
    label="A30 24GB",
    gpu_type="a30",
    product_names=("NVIDIA A30",),
    compute_slices=4,
    memory_slices=4,
    profiles=(
        # The guide's table says 0 NVDECs for 1g.6gb; -lgip prints DEC 1 (kept, as -lgip is what this mirrors).
        _p("1g.6gb", 14, 1, 1, 5.81, 4, 14, range(4), 1, 1, 0, 0),
        _p("1g.6gb+me", 21, 1, 1, 5.81, 1, 14, range(4), 1, 1, 1, 1),  # R470 and later
        _p("2g.12gb", 5, 2, 2, 11.69, 2, 28, (0, 2), 2, 2, 0, 0),
        _p("2g.12gb+me", 6, 2, 2, 11.69, 1, 28, (0, 2), 2, 2, 1, 1),  # R525 and later
        _p("4g.24gb", 0, 4, 4, 23.44, 1, 56, _FIRST, 4, 4, 1, 1),
    ),
    balanced=("2g.12gb", "1g.6gb", "1g.6gb"),
    source=(
        f"{_GUIDE}: 'A30 MIG Profiles', the table of the A30-24GB product (Table 5 in the R580 guide); "
        "ids, SMs, memory, engines and placements ({0,1,2,3}:1, {0,2}:2, {0}:4) from public "
        "'nvidia-smi mig -lgip'/'-lgipp' captures of an A30 (4g.24gb prints 23.44 or 23.50 GiB by driver). "
        "all-balanced: NVIDIA mig-parted's default configuration"
    ),
)

_H100_80GB = MigModel(
    key="h100-80gb",
    label="H100 80GB",
    gpu_type="h100",
    # H100 PCIe (80GB) has the same profile table in the guide, but fewer SMs
    # (114) and no -lgip capture was found for it, so its per-instance SM
    # counts are unknown: it is not listed here.
    product_names=("NVIDIA H100 80GB HBM3",),
    compute_slices=7,
    memory_slices=8,
    profiles=(
        _p("1g.10gb", 19, 1, 1, 9.75, 7, 16, _ONE, 1, 1, 1, 0),
        _p("1g.10gb+me", 20, 1, 1, 9.75, 1, 16, _ONE, 1, 1, 1, 1),
        _p("1g.20gb", 15, 1, 2, 19.62, 4, 26, _TWO_1G, 1, 1, 1, 0),
        _p("2g.20gb", 14, 2, 2, 19.62, 3, 32, _TWO, 2, 2, 2, 0),
        _p("3g.40gb", 9, 3, 4, 39.50, 2, 60, _HALF, 3, 3, 3, 0),
        _p("4g.40gb", 5, 4, 4, 39.50, 1, 64, _FIRST, 4, 4, 4, 0),
        _p("7g.80gb", 0, 7, 8, 79.25, 1, 132, _FIRST, 8, 7, 7, 1),
    ),
    balanced=("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"),
    source=(
        f"{_GUIDE}: 'H100 MIG Profiles', the table of the H100 80GB product, PCIe and SXM5 (Table 7 in the "
        "R580 guide); ids, SMs, memory, engines and placements from public 'nvidia-smi mig -lgip'/'-lgipp' "
        "captures of an H100 SXM5 80GB (NVIDIA H100 80GB HBM3). all-balanced: NVIDIA mig-parted's default "
        "configuration"
    ),
)

_H100_94GB = MigModel(
    key="h100-94gb",
    label="H100 94GB",
    gpu_type="h100",
    # The guide's 94GB table covers PCIe (H100 NVL) and SXM5 94GB; only the
    # NVL was captured, and the SXM5 94GB product name was not found.
    product_names=("NVIDIA H100 NVL",),
    compute_slices=7,
    memory_slices=8,
    profiles=(
        _p("1g.12gb", 19, 1, 1, 10.75, 7, 16, _ONE, 1, 1, 1, 0),
        _p("1g.12gb+me", 20, 1, 1, 10.75, 1, 16, _ONE, 1, 1, 1, 1),
        _p("1g.24gb", 15, 1, 2, 21.62, 4, 26, _TWO_1G, 1, 1, 1, 0),
        _p("2g.24gb", 14, 2, 2, 21.62, 3, 32, _TWO, 2, 2, 2, 0),
        _p("3g.47gb", 9, 3, 4, 46.38, 2, 60, _HALF, 3, 3, 3, 0),
        _p("4g.47gb", 5, 4, 4, 46.38, 1, 64, _FIRST, 4, 4, 4, 0),
        _p("7g.94gb", 0, 7, 8, 93.12, 1, 132, _FIRST, 8, 7, 7, 1),
    ),
    balanced=("3g.47gb", "2g.24gb", "1g.12gb", "1g.12gb"),
    source=(
        f"{_GUIDE}: 'H100 MIG Profiles', the table of the H100 94GB product, PCIe and SXM5; ids, SMs, "
        "memory, engines and placements from a public 'nvidia-smi mig -lgip'/'-lgipp' capture of an "
        "NVIDIA H100 NVL (driver 560.35.03; its MIG devices report 11008, 22144 and 47488 MiB). "
        "all-balanced: NVIDIA mig-parted's default configuration"
    ),
)

_H200_141GB = MigModel(
    key="h200-141gb",
    label="H200 141GB",
    gpu_type="h200",
    product_names=("NVIDIA H200",),
    compute_slices=7,
    memory_slices=8,
    profiles=(
        _p("1g.18gb", 19, 1, 1, 16.00, 7, 16, _ONE, 1, 1, 1, 0),
        _p("1g.18gb+me", 20, 1, 1, 16.00, 1, 16, _ONE, 1, 1, 1, 1),
        _p("1g.35gb", 15, 1, 2, 32.50, 4, 26, _TWO_1G, 1, 1, 1, 0),
        _p("2g.35gb", 14, 2, 2, 32.50, 3, 32, _TWO, 2, 2, 2, 0),
        _p("3g.71gb", 9, 3, 4, 69.75, 2, 60, _HALF, 3, 3, 3, 0),
        _p("4g.71gb", 5, 4, 4, 69.75, 1, 64, _FIRST, 4, 4, 4, 0),
        _p("7g.141gb", 0, 7, 8, 140.00, 1, 132, _FIRST, 8, 7, 7, 1),
    ),
    balanced=("3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb"),
    source=(
        f"{_GUIDE}: 'H200 MIG Profiles', the table of the H200 141GB product (Table 8 in the R580 guide), "
        "for names, fractions, instance counts and engines; a public 'nvidia-smi mig -lgip' capture of an "
        "H200 for 1g.18gb, 1g.18gb+me, 2g.35gb and 7g.141gb (ids, SMs, GiB); SM counts of 3g.71gb (60) and "
        "4g.71gb (64) and the 3g.71gb size (71424 MiB, Nsight Compute's totalMemory, driver 595) from "
        "public runs on those MIG devices. all-balanced: NVIDIA mig-parted's default configuration"
    ),
    derived=(
        "profile ids 15 (1g.35gb), 9 (3g.71gb), 5 (4g.71gb): every captured 8-memory-slice model "
        "(A100 40/80GB, H100 80GB, H100 NVL, H100 96GB) numbers these profile shapes so",
        "1g.35gb SMs 26: the H100 80GB and 94GB 1g two-slice profile; the H200's GH100 shows the "
        "H100's count for every other profile (16, 32, 60, 64, 132)",
        "1g.35gb memory 32.50 GiB: the 2g.35gb size; the two take the same two memory slices, and "
        "report the same size on every captured model",
        "4g.71gb memory: the 3g.71gb size (same four memory slices, equal on every captured model)",
        "placements: the starts -lgipp lists on every captured 8-memory-slice model; the guide gives "
        "the H200 profiles the H100's memory fractions",
    ),
)

_B200_180GB = MigModel(
    key="b200-180gb",
    label="B200 180GB",
    gpu_type="b200",
    # As nvidia-smi prints it on HGX/DGX B200 (NVIDIA/gpu-operator#2155; the
    # nccl-tests log behind tests' B200 topology fixture). GB200 is another
    # type (gb200) with other profiles (1g.24gb, 1g.47gb, ...): not this table.
    product_names=("NVIDIA B200",),
    compute_slices=7,
    memory_slices=8,
    # name, id, compute slices, memory slices, GiB, max, SMs, placements, CE, DEC, JPEG, OFA
    profiles=(
        _p("1g.23gb", 19, 1, 1, 20.50, 7, 18, _ONE, 2, 1, 1, 0),
        _p("1g.23gb+me", 20, 1, 1, 20.50, 1, 18, _ONE, 2, 1, 1, 1),
        _p("1g.45gb", 15, 1, 2, 44.25, 4, 30, _TWO_1G, 2, 1, 1, 0),
        # The guide's table says 3 copy engines for 2g.45gb; -lgip prints CE 4 (kept, as for the A30).
        _p("2g.45gb", 14, 2, 2, 44.25, 3, 36, _TWO, 4, 2, 2, 0),
        _p("3g.90gb", 9, 3, 4, 89.00, 2, 70, _HALF, 6, 3, 3, 0),
        _p("4g.90gb", 5, 4, 4, 89.00, 1, 72, _FIRST, 8, 4, 4, 0),
        _p("7g.180gb", 0, 7, 8, 178.50, 1, 148, _FIRST, 16, 7, 7, 1),
    ),
    balanced=("3g.90gb", "2g.45gb", "1g.23gb", "1g.23gb"),
    source=(
        f"{_GUIDE}: 'B200 MIG Profiles', the table of the B200 180 GB product (Table 9 in the R580 guide), "
        "for names, fractions, instance counts, the +me and 7g optical-flow engine and the copy engines of "
        "3g.90gb (6), 4g.90gb (8) and 7g.180gb (16); the 'nvidia-smi mig -lgip' captures of a B200 in "
        "NVIDIA/mig-parted#166 and #187 (also NVIDIA/gpu-operator#1242 and #1351) for ids, SMs, memory and "
        "engines of 1g.23gb, 1g.23gb+me, 1g.45gb and 2g.45gb (1g.23gb prints 22.00 GiB with the first driver, "
        "20.50 with the later one kept here); the MIG devices of NVIDIA/gpu-operator#2155 (20992 MiB, 18 SMs; "
        "45312 MiB, 36 SMs, CE 4, DEC 2, JPEG 2) agree; SMs (70, 72, 148) and GiB (89.00, 178.50) of 3g.90gb, "
        "4g.90gb and 7g.180gb from a public TensorRT cookbook note's '-lgip' table of a B200 180 GB "
        "(its repository not identified). all-balanced: NVIDIA mig-parted's default configuration "
        "(deployments/systemd/config-default.yaml, device 0x290110DE)"
    ),
    derived=(
        "profile ids 9 (3g.90gb), 5 (4g.90gb), 0 (7g.180gb): the rows of the captures that show them were "
        "not readable; every captured 8-memory-slice model (A100 40/80GB, H100 80GB, H100 NVL, H100 96GB, "
        "H200, and the B200's own first four rows) numbers these profile shapes so",
        "decoders and JPEG of 3g.90gb (3, 3), 4g.90gb (4, 4) and 7g.180gb (7, 7): one of each per compute "
        "slice, as -lgip prints for the B200's 1g and 2g rows and for every H100-family profile (the guide's "
        "B200 table says 1 NVDEC and 1 JPEG for every profile, also where -lgip prints 2)",
        "placements: no -lgipp listing of a B200 was found; the starts -lgipp lists on every captured "
        "8-memory-slice model, which the B200's fractions (eighths of memory, sevenths of SMs) share",
    ),
)

_H20_96GB = MigModel(
    key="h20-96gb",
    label="H20 96GB",
    gpu_type="h20",
    # nvidia-smi -L of H20 nodes prints "NVIDIA H20". An H20 with 141 GB
    # (H20-3e) would have other profile sizes; its product name was not
    # found, so it is not listed (model_for's type fallback maps h20 here).
    product_names=("NVIDIA H20",),
    compute_slices=7,
    memory_slices=8,
    # name, id, compute slices, memory slices, GiB, max, SMs, placements, CE, DEC, JPEG, OFA
    profiles=(
        _p("1g.12gb", 19, 1, 1, 11.75, 7, 8, _ONE, 1, 1, 1, 0),
        _p("1g.12gb+me", 20, 1, 1, 11.75, 1, 8, _ONE, 1, 1, 1, 1),
        _p("1g.24gb", 15, 1, 2, 23.50, 4, 13, _TWO_1G, 1, 1, 1, 0),
        _p("2g.24gb", 14, 2, 2, 23.50, 3, 16, _TWO, 2, 2, 2, 0),
        _p("3g.48gb", 9, 3, 4, 47.00, 2, 30, _HALF, 3, 3, 3, 0),
        _p("4g.48gb", 5, 4, 4, 47.00, 1, 32, _FIRST, 4, 4, 4, 0),
        _p("7g.96gb", 0, 7, 8, 94.00, 1, 66, _FIRST, 8, 7, 7, 1),
    ),
    balanced=("3g.48gb", "2g.24gb", "1g.12gb", "1g.12gb"),
    source=(
        f"{_GUIDE}: the guide's 'Supported GPUs' lists the H20 (GH100, 96GB, 7 instances) but 'Supported "
        "MIG Profiles' has no H20 table; NVIDIA mig-parted's default configuration "
        "(deployments/systemd/config-default.yaml) gives the H20 (device 0x232910DE) the H100 96GB "
        "(H100 on GH200) profiles, whose table there is taken for names, fractions and instance counts; "
        "a public 'nvidia-smi mig -lgip' of an NVIDIA H20 (driver 535.247.01; a blog post on MIG dated "
        "2025-06-17, its repository not identified) for 1g.12gb and 1g.12gb+me: ids 19 and 20, 7 and 1 "
        "instances, 11.75 GiB, 8 SMs, DEC 1, ENC 0; its MIG devices report 12032 MiB and 8 SMs. "
        "all-balanced: NVIDIA mig-parted's default configuration (the H100-96GB/H20 entry)"
    ),
    derived=(
        "profile ids 15, 14, 9, 5, 0: every captured 8-memory-slice model numbers these profile shapes so "
        "(the H100 96GB capture on GH200 among them, with these same names)",
        "copy engines, JPEG and optical-flow engines (and decoders beyond 1g): the guide's H100 96GB table, "
        "whose profiles mig-parted gives the H20; -lgip of the H20's 1g rows lost those columns",
        "memory of 1g.24gb and 2g.24gb (23.50 GiB), 3g.48gb and 4g.48gb (47.00), 7g.96gb (94.00): 2, 4 and "
        "8 times the captured one-slice 11.75 GiB. On every captured model a profile of n memory slices "
        "has at least n times the one-slice size, and the whole-GPU profile less than the GPU's memory "
        "(an H20's is 97871 MiB, 95.58 GiB, in the nvidia-smi of NVIDIA/nvtrust#128): these lower bounds "
        "fit under it, and a real H20 may print somewhat larger sizes",
        "SMs of 1g.24gb (13), 2g.24gb (16), 3g.48gb (30), 4g.48gb (32) and 7g.96gb (66): half the H100's "
        "(26, 32, 60, 64, 132), as the captured 1g has 8 SMs to the H100's 16; no H20 capture of them was "
        "found (the H20 has 78 SMs in all). The gpu facts name a MIG device by its SM count, so an H20 "
        "device whose count differs from these gets no profile name",
        "placements: no -lgipp listing of an H20 was found; the starts -lgipp lists on every captured "
        "8-memory-slice model",
    ),
)

MODELS: dict[str, MigModel] = {
    model.key: model
    for model in (_A100_40GB, _A100_80GB, _A30, _H100_80GB, _H100_94GB, _H200_141GB, _B200_180GB, _H20_96GB)
}


# --------------------------------------------------------------------------
# finding the model


def _normalise_product(name: str) -> str:
    text = " ".join(name.split()).lower()
    return text[len("nvidia "):] if text.startswith("nvidia ") else text


_BY_PRODUCT = {_normalise_product(name): model for model in MODELS.values() for name in model.product_names}


def models_for(gpu_type: str | None) -> tuple[MigModel, ...]:
    """Every model a Slurm GPU type (``a100``) or a model key (``a100-80gb``) may be, in table order."""
    if not gpu_type or not isinstance(gpu_type, str):
        return ()
    wanted = gpu_type.strip().lower()
    if wanted in MODELS:
        return (MODELS[wanted],)
    return tuple(model for model in MODELS.values() if model.gpu_type == wanted)


def model_for(product_name: str | None = None, gpu_type: str | None = None) -> MigModel | None:
    """The model of a GPU, from its nvidia-smi product name or a Slurm GPU type; None when unknown.

    A product name is matched exactly (case and a leading "NVIDIA" aside),
    then through the GPU type deepops derives from it. A GPU type is the one
    ``nvidia_smi.normalize_gpu_type`` forms (what ``slurm_gpu_type`` holds)
    or a model key; ``a100`` and ``h100`` name two models each (40/80GB,
    80/94GB), so they give None here: ``models_for`` lists the candidates.
    None also means no MIG: the GPU supports none, or deepops has no table.
    """
    if product_name:
        model = _BY_PRODUCT.get(_normalise_product(product_name))
        if model is not None:
            return model
        candidates = models_for(normalize_gpu_type(product_name))
        return candidates[0] if len(candidates) == 1 else None
    candidates = models_for(gpu_type)
    return candidates[0] if len(candidates) == 1 else None


# --------------------------------------------------------------------------
# placing profiles on one GPU


def place(model: MigModel, profile_names: Sequence[str]) -> list[tuple[str, int]] | None:
    """One valid placement for all of PROFILE_NAMES on one GPU of MODEL, or None.

    Returns ``(name, start slot)`` in the order given (any creation order
    works when each instance is created at its start, as NVML's
    nvmlDeviceCreateGpuInstanceWithPlacement does). None when a name is
    not a profile of the model or the list cannot be placed: more than a
    profile's ``max_instances``, more compute or memory slices than the GPU
    has, two profiles that each need the GPU's one optical-flow engine
    (``+me``), or no choice of starts from each profile's placements that
    keeps the instances apart. Unlike ``nvidia-smi mig -cgi`` without
    placements, the order of the list never matters.
    """
    profiles = []
    for name in profile_names:
        profile = model.profile(name)
        if profile is None:
            return None
        profiles.append(profile)
    if _count_problem(model, profiles) is not None:
        return None
    # Largest first, then the most constrained: fewer dead ends to back out of.
    order = sorted(range(len(profiles)), key=lambda i: (-profiles[i].placement_size, len(profiles[i].placements), profiles[i].name, i))
    starts: list[int | None] = [None] * len(profiles)

    def search(position: int, used: int) -> bool:
        if position == len(order):
            return True
        index = order[position]
        profile = profiles[index]
        previous = order[position - 1] if position else None
        for start in profile.placements:
            # Identical profiles are interchangeable: take their starts in increasing order only.
            if previous is not None and profiles[previous].name == profile.name and start < (starts[previous] or 0):
                continue
            slots = ((1 << profile.placement_size) - 1) << start
            if used & slots:
                continue
            starts[index] = start
            if search(position + 1, used | slots):
                return True
        starts[index] = None
        return False

    if not search(0, 0):
        return None
    return [(profile.name, int(start or 0)) for profile, start in zip(profiles, starts)]


def _count_problem(model: MigModel, profiles: Sequence[GpuInstanceProfile]) -> str | None:
    """Why the profiles cannot share one GPU by count alone (None when counts allow it)."""
    names = [profile.name for profile in profiles]
    for profile in model.profiles:
        count = names.count(profile.name)
        if count > profile.max_instances:
            return f"{count} x {profile.name}, but at most {profile.max_instances} fit on one {model.label}"
    compute = sum(profile.compute_slices for profile in profiles)
    if compute > model.compute_slices:
        return f"{_listing(names)} need {compute} compute slices, and the {model.label} has {model.compute_slices}"
    memory = sum(profile.memory_slices for profile in profiles)
    if memory > model.memory_slices:
        return f"{_listing(names)} need {memory} memory slices, and the {model.label} has {model.memory_slices}"
    # The whole-GPU profile holds every engine the GPU has; the optical-flow
    # engine is one (OFA 1), and only the +me profiles take it.
    full_ofa = max(profile.ofa for profile in model.profiles)
    takers = [profile.name for profile in profiles if profile.ofa]
    if sum(profile.ofa for profile in profiles) > full_ofa:
        return f"{_listing(takers)} each need the {model.label}'s one optical-flow engine (the +me profiles); only one can have it"
    return None


def fit_count(model: MigModel, name: str) -> int:
    """How many instances of profile NAME fit on one GPU on their own (0 for an unknown name)."""
    profile = model.profile(name)
    if profile is None:
        return 0
    for count in range(profile.max_instances, 0, -1):
        if place(model, [name] * count) is not None:
            return count
    return 0


def _listing(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "nothing"


# --------------------------------------------------------------------------
# layouts


def _gpu_key(key: object) -> int | str | None:
    """A layout key as a GPU index or ``all``; None when it is neither."""
    if isinstance(key, bool):
        return None
    if isinstance(key, int):
        return key if key >= 0 else None
    if isinstance(key, str):
        text = key.strip()
        if text == ALL:
            return ALL
        if text.isdigit():
            return int(text)
    return None


def _label(key: int | str) -> str:
    return "all GPUs" if key == ALL else f"GPU {key}"


def _named_problem(value: str, where: str, per_gpu: bool) -> str | None:
    if value in (UNMANAGED, DISABLED, BALANCED):
        return None
    if value.startswith(_ALL_PREFIX) and PROFILE_NAME.fullmatch(value[len(_ALL_PREFIX):]):
        return None
    words = f"{UNMANAGED}, {DISABLED}, {BALANCED} or all-<profile> such as all-1g.10gb"
    if not per_gpu:
        return f"{value!r} is not a MIG layout: expected {words}, or a mapping of GPU index or all to a list of profiles"
    return f"{where}: {value!r} is not a MIG layout: expected a list of profiles such as [3g.40gb, 1g.10gb], or {words}"


def shape_problems(layout: object) -> list[str]:
    """What is wrong with LAYOUT's form, whatever the GPU (empty when well formed)."""
    if layout is None:
        return []
    if isinstance(layout, str):
        problem = _named_problem(layout, "", per_gpu=False)
        return [problem] if problem else []
    if not isinstance(layout, Mapping):
        return [
            f"expected a named layout ({UNMANAGED}, {DISABLED}, {BALANCED}, all-<profile>) or a mapping of GPU "
            f"index or all to a list of profiles, found {type(layout).__name__}"
        ]
    problems = []
    seen: dict[int | str, object] = {}
    for key, value in layout.items():
        gpu = _gpu_key(key)
        if gpu is None:
            problems.append(f"{key!r} is not a GPU index (0, 1, ...) or all")
            continue
        if gpu in seen:
            problems.append(f"{_label(gpu)} is given twice ({seen[gpu]!r} and {key!r})")
            continue
        seen[gpu] = key
        problems.extend(_entry_shape_problems(_label(gpu), value))
    return problems


def _entry_shape_problems(where: str, value: object) -> list[str]:
    if isinstance(value, str):
        problem = _named_problem(value, where, per_gpu=True)
        return [problem] if problem else []
    if not isinstance(value, list):
        return [f"{where}: expected a list of profiles or {DISABLED}, found {type(value).__name__}"]
    problems = []
    for item in value:
        if not isinstance(item, str):
            problems.append(f"{where}: {item!r} is not a MIG profile name such as 1g.10gb")
        elif not PROFILE_NAME.fullmatch(item):
            problems.append(f"{where}: {item!r} is not a MIG profile name such as 1g.10gb or 1g.10gb+me")
    return problems


def _entries(layout: object) -> list[tuple[int | str, object]]:
    """(GPU index or all, value) of a well-formed layout, ``all`` first."""
    if layout is None:
        return []
    if isinstance(layout, str):
        return [(ALL, layout)]
    entries = [(_gpu_key(key), value) for key, value in layout.items()]  # a Mapping: shape_problems passed
    return sorted(
        ((key, value) for key, value in entries if key is not None),
        key=lambda entry: (0, 0) if entry[0] == ALL else (1, entry[0]),
    )


def _needs_mig(value: object) -> bool:
    return isinstance(value, list) or (isinstance(value, str) and value.startswith(_ALL_PREFIX))


def _unknown_profile(model: MigModel, where: str, name: str) -> str:
    """The message for a profile MODEL lacks, suggesting the same slices when NAME is another model's profile."""
    for other in MODELS.values():
        theirs = other.profile(name)
        same = theirs and [
            mine.name for mine in model.profiles
            if (mine.compute_slices, mine.memory_slices, mine.ofa) == (theirs.compute_slices, theirs.memory_slices, theirs.ofa)
        ]
        if same:
            hint = f"did you mean {same[0]} (the same slices; {name} is the {other.label}'s name)?"
            return f"{where}: {name!r} is not a MIG profile of the {model.label} — {hint}"
    match = difflib.get_close_matches(name, model.profile_names, n=1, cutoff=0.6)
    hint = f" — did you mean {match[0]}?" if match else f" (its profiles: {', '.join(model.profile_names)})"
    return f"{where}: {name!r} is not a MIG profile of the {model.label}{hint}"


def _resolve(model: MigModel, where: str, value: object) -> tuple[list[str] | None, list[str]]:
    """(profiles, or None for MIG off; problems) for one entry's value on MODEL."""
    if value is None or value == DISABLED:
        return None, []
    if value == BALANCED:
        return list(model.balanced), []
    if isinstance(value, str):  # all-<profile>
        name = value[len(_ALL_PREFIX):]
        if model.profile(name) is None:
            return [], [_unknown_profile(model, where, name)]
        return [name] * fit_count(model, name), []
    names = [str(item) for item in value]
    problems = [_unknown_profile(model, where, name) for name in dict.fromkeys(names) if model.profile(name) is None]
    if problems:
        return names, problems
    why = _count_problem(model, [profile for profile in map(model.profile, names) if profile is not None])
    if why is None and place(model, names) is None:
        why = (
            f"{_listing(names)} cannot be placed together: no choice of their start slots "
            f"({'; '.join(_placements_text(model, name) for name in dict.fromkeys(names))}) keeps them apart"
        )
    return names, [f"{where}: {why}"] if why else []


def _placements_text(model: MigModel, name: str) -> str:
    profile = model.profile(name)
    if profile is None:
        return name
    return f"{name} at {{{','.join(str(start) for start in profile.placements)}}}:{profile.placement_size}"


def layout_problems(model: MigModel, layout: object, gpu_count: int | None = None) -> list[str]:
    """Every reason LAYOUT cannot be applied to a node of MODEL GPUs (empty when it can).

    Each message names the GPU (``GPU 0``, or ``all GPUs`` for the ``all``
    entry and for a named layout) and the profile. With ``gpu_count`` unknown
    (the inventory alone), GPU indexes are not range-checked.
    """
    problems = shape_problems(layout)
    if problems:
        return problems
    for key, value in _entries(layout):
        where = _label(key)
        if isinstance(key, int) and gpu_count is not None and key >= gpu_count:
            last = f"0-{gpu_count - 1}" if gpu_count > 1 else "0"
            problems.append(f"{where}: no such GPU, the node has {gpu_count} ({last})")
            continue
        if value == UNMANAGED:
            continue
        problems.extend(_resolve(model, where, value)[1])
    return problems


def expand_layout(model: MigModel | None, layout: object, gpu_count: int) -> dict[int, list[str] | None]:
    """GPU index -> profiles to create on it (None: MIG mode off), for the GPUs LAYOUT manages.

    GPUs the layout leaves alone (``unmanaged``, or not named by a mapping
    without ``all``) are absent. Every GPU instance gets one compute instance
    spanning it. ``model`` None means a GPU without MIG (``model_for`` found
    none): only ``unmanaged`` and ``disabled`` fit it. Raises LayoutError
    listing every problem, each naming GPU and profile.
    """
    problems = shape_problems(layout)
    if not problems and model is None:
        problems = [
            f"{_label(key)}: {_describe(value)} needs MIG, and this GPU has no MIG table in deepops "
            f"(tables: {', '.join(m.label for m in MODELS.values())})"
            for key, value in _entries(layout) if _needs_mig(value)
        ]
    elif not problems and model is not None:
        problems = layout_problems(model, layout, gpu_count)
    if problems:
        raise LayoutError(problems)
    result: dict[int, list[str] | None] = {}
    for key, value in _entries(layout):
        indexes = range(gpu_count) if key == ALL else [key]
        for index in indexes:
            if value == UNMANAGED:
                result.pop(int(index), None)
                continue
            profiles = None if model is None else _resolve(model, _label(key), value)[0]
            result[int(index)] = None if profiles is None else list(profiles)
    return dict(sorted(result.items()))


def _describe(value: object) -> str:
    return ", ".join(str(item) for item in value) if isinstance(value, list) else str(value)


def offline_problems(layout: object, gpu_type: str | None) -> list[str]:
    """What the inventory alone shows is wrong with a host's LAYOUT, given its ``slurm_gpu_type``.

    The GPU count is not known here, nor, for ``a100``/``h100``, which of two
    models the GPUs are: a layout passes when it fits at least one model the
    type may be (every model, when the type is empty), and is otherwise
    reported against the model it comes closest to. A type with no MIG table
    rejects any layout that enables MIG.
    """
    problems = shape_problems(layout)
    if problems or not any(_needs_mig(value) for _key, value in _entries(layout)):
        return problems
    candidates = models_for(gpu_type) if gpu_type else tuple(MODELS.values())
    if not candidates:
        tables = ", ".join(sorted({model.gpu_type for model in MODELS.values()}))
        return [
            f"{_label(key)}: {_describe(value)} needs MIG, but slurm_gpu_type {gpu_type!r} has no MIG table in "
            f"deepops (MIG tables: {tables}); use {UNMANAGED} or {DISABLED} for these hosts"
            for key, value in _entries(layout) if _needs_mig(value)
        ]
    found = [(candidate, layout_problems(candidate, layout)) for candidate in candidates]
    if any(not reasons for _candidate, reasons in found):
        return []
    names = _profile_names(layout)
    # The closest model: the one that knows most of the profiles named, then the fewest problems.
    model, problems = max(found, key=lambda item: (sum(item[0].profile(name) is not None for name in names), -len(item[1])))
    if len(candidates) == 1:
        return problems
    if gpu_type:
        context = f"slurm_gpu_type {gpu_type}: fits neither the {' nor the '.join(candidate.label for candidate in candidates)}"
    else:
        context = "no slurm_gpu_type: fits none of deepops' MIG tables"
    return [f"{problem} ({context}; shown for the {model.label})" for problem in problems]


def _profile_names(layout: object) -> list[str]:
    names = []
    for _key, value in _entries(layout):
        if isinstance(value, list):
            names.extend(str(item) for item in value)
        elif isinstance(value, str) and value.startswith(_ALL_PREFIX) and value != BALANCED:
            names.append(value[len(_ALL_PREFIX):])
    return names
