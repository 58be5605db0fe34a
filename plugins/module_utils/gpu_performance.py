"""What a healthy GPU node reaches: the pass marks of ``deepops validate`` nccl and burnin.

Two tables, each row with its source:

- ``NCCL_THRESHOLDS``: the least ``all_reduce_perf`` bus bandwidth (GB/s, at
  the largest message size, over all GPUs of one node) for a GPU model and the
  node's GPU interconnect (``nvswitch``, ``nvlink``, ``pcie``). A model and
  interconnect without a row has no threshold: the check says so ("not
  applicable") instead of passing.
- ``PEAKS``: per GPU model variant, the datasheet's dense FP16/BF16 tensor
  TFLOPS and memory bandwidth (GB/s), which burn-in figures are measured
  against (defaults: at least 80 % and 85 % of them).

Models are keyed as ``nvidia_smi.normalize_gpu_type`` names them (``h100``,
``a100``, ``l40s``), so Slurm's GRES types, the GPU facts and these tables
agree; ``peak_key`` adds the variant (form factor, memory size) the peaks
differ by. An inventory can override thresholds per group (see
``validate_overrides``).

Standard library only, and no Ansible import.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from ansible_collections.deepops.cluster.plugins.module_utils.nvidia_smi import normalize_gpu_type

__all__ = [
    "BURNIN_MEM_BW_FRACTION",
    "BURNIN_TFLOPS_FRACTION",
    "INTERCONNECTS",
    "INTERNODE",
    "NCCL_THRESHOLDS",
    "PEAKS",
    "GpuPerformanceInputError",
    "gpu_peaks",
    "interconnect_from_facts",
    "model_key",
    "nccl_threshold",
    "peak_key",
    "validate_overrides",
]

INTERCONNECTS = ("nvswitch", "nvlink", "pcie")
# Overrides may also set the cross-node mark: the table has none, as it
# depends on the network, not on the GPU.
INTERNODE = "internode"

# Default burn-in pass marks, as fractions of the datasheet peak.
BURNIN_TFLOPS_FRACTION = 0.80
BURNIN_MEM_BW_FRACTION = 0.85


class GpuPerformanceInputError(ValueError):
    """A threshold override the checks cannot use; the message says which and why."""


# --------------------------------------------------------------------------
# NCCL all_reduce_perf bus bandwidth, GB/s at the largest size, one node
#
# Sources (figures are measured busbw, not link rates; NVIDIA/nccl-tests
# doc/PERFORMANCE.md defines busbw as the per-link figure comparable to the
# hardware's bandwidth):
#   [nccl-212] NVIDIA/nccl-tests issue #212, NVIDIA's reply (sjeaugey, 2024-05-06):
#              8x H100 NVSwitch reaches ~480 GB/s busbw with NVLink SHARP (NVLS),
#              ~370 GB/s with the ring algorithm.
#   [sb-a100]  microsoft/superbenchmark tests/data/nccl_allreduce.log (fixture
#              nccl-all-reduce-a100-x8-superbench.txt): 8x A100-SXM4-40GB,
#              235 GB/s busbw at 8 GiB.
#   [nccl-287] NVIDIA/nccl-tests issue #287 (fixture nccl-all-reduce-rtx5090-x4-
#              pcie-nccl-tests-issue287.txt): 4 GPUs on PCIe Gen5 x16, 27.3 GB/s.
#   [dsheet]   NVIDIA datasheets: PCIe Gen4 x16 64 GB/s, Gen5 x16 128 GB/s (both
#              directions; A100 PCIe, L40S, H100 PCIe/NVL); NVLink 4 900 GB/s (H100,
#              H200), NVLink 5 1.8 TB/s (HGX/DGX B200) per GPU.
# Marks sit 20-25 % under the measured figure, so a healthy node passes on
# either NCCL algorithm and a node with a degraded link does not.
NCCL_THRESHOLDS: dict[tuple[str, str], float] = {
    ("a100", "nvswitch"): 185.0,  # [sb-a100] 235 x 0.8
    ("h100", "nvswitch"): 360.0,  # [nccl-212] ring 370 passes, NVLS 480 passes; 0.75 x 480
    ("h200", "nvswitch"): 360.0,  # [dsheet] same NVLink 4 / NVSwitch fabric as H100: [nccl-212]
    # No measured 8x B200 figure was found: H100's mark doubled ([dsheet]: NVLink 5 is twice
    # NVLink 4 per GPU), then cut by a sixth for caution.
    ("b200", "nvswitch"): 600.0,  # [dsheet] [nccl-212], derived
    # NVLink-bridged pairs: a ring over more than 2 GPUs also crosses PCIe between the
    # pairs, so the PCIe mark applies. PCIe: Gen5 measured 27.3 GB/s -> mark 20; Gen4
    # runs at half the rate -> ~13.6 expected, mark 10.
    ("a100", "nvlink"): 10.0,  # [dsheet] [nccl-287] Gen4 between the pairs
    ("h100", "nvlink"): 20.0,  # [dsheet] [nccl-287] Gen5 between the pairs
    ("a100", "pcie"): 10.0,  # [dsheet] [nccl-287] Gen4
    ("l40s", "pcie"): 10.0,  # [dsheet] [nccl-287] Gen4
    ("h100", "pcie"): 20.0,  # [dsheet] [nccl-287] Gen5
    ("h200", "pcie"): 20.0,  # [dsheet] [nccl-287] Gen5: H200 NVL is a PCIe card
}

# --------------------------------------------------------------------------
# Datasheet peaks per GPU: dense (no sparsity) FP16/BF16 tensor TFLOPS, memory GB/s
#
#   [a100] NVIDIA A100 Tensor Core GPU datasheet (nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf):
#          BF16/FP16 tensor 312 TFLOPS (624 sparse); 40GB 1,555 GB/s, 80GB SXM 2,039, 80GB PCIe 1,935.
#   [h100] NVIDIA H100 Tensor Core GPU datasheet: BF16/FP16 tensor 1,979 (SXM), 1,513 (PCIe),
#          1,671 (NVL) TFLOPS with sparsity (dense is half); 3.35 / 2 / 3.9 TB/s.
#   [h200] NVIDIA H200 Tensor Core GPU datasheet: 1,979 (SXM) and 1,671 (NVL) TFLOPS with
#          sparsity; 4.8 TB/s.
#   [l40s] NVIDIA L40S datasheet: BF16/FP16 tensor 362.05 TFLOPS dense (733 sparse); 864 GB/s.
#   [b200] NVIDIA HGX B200 (1,000 W) datasheet figures: BF16/FP16 tensor 2.25 PFLOPS dense
#          (4.5 sparse); 8 TB/s.
PEAKS: dict[str, dict[str, float]] = {
    "a100-sxm-40gb": {"tflops": 312.0, "mem_bw_gbps": 1555.0},  # [a100]
    "a100-sxm-80gb": {"tflops": 312.0, "mem_bw_gbps": 2039.0},  # [a100]
    "a100-pcie-40gb": {"tflops": 312.0, "mem_bw_gbps": 1555.0},  # [a100]
    "a100-pcie-80gb": {"tflops": 312.0, "mem_bw_gbps": 1935.0},  # [a100]
    "h100-sxm": {"tflops": 989.5, "mem_bw_gbps": 3350.0},  # [h100]
    "h100-pcie": {"tflops": 756.5, "mem_bw_gbps": 2000.0},  # [h100]
    "h100-nvl": {"tflops": 835.5, "mem_bw_gbps": 3900.0},  # [h100]
    "h200-sxm": {"tflops": 989.5, "mem_bw_gbps": 4800.0},  # [h200]
    "h200-nvl": {"tflops": 835.5, "mem_bw_gbps": 4800.0},  # [h200]
    "l40s": {"tflops": 362.05, "mem_bw_gbps": 864.0},  # [l40s]
    "b200": {"tflops": 2250.0, "mem_bw_gbps": 8000.0},  # [b200]
}

_GRES_TYPE = re.compile(r"^[a-z0-9_]+$")
# GRES types whose peaks do not depend on a variant.
_SINGLE_VARIANT = {"l40s": "l40s", "b200": "b200"}


# --------------------------------------------------------------------------
# models


def model_key(model: Any) -> str:
    """The table key of a model: a GRES type (``h100``) stays, a product name is normalised."""
    text = " ".join(str(model or "").split())
    if _GRES_TYPE.match(text):  # already a type (the facts' "types", Slurm's GRES)
        return text
    lowered = text.lower()
    if lowered in _table_models():
        return lowered
    return normalize_gpu_type(text) if text else ""


def _table_models() -> set[str]:
    return {model for model, _interconnect in NCCL_THRESHOLDS} | {key.split("-")[0] for key in PEAKS}


def peak_key(model: Any, memory_mib: float | None = None) -> str | None:
    """The ``PEAKS`` key of a GPU: from its product name (``NVIDIA A100-SXM4-80GB`` ->
    ``a100-sxm-80gb``), or a ``PEAKS`` key itself; None when the variant cannot be told.

    A bare GRES type names no variant except for single-variant models (``l40s``,
    ``b200``): an ``a100`` may be a 40 or 80 GB, SXM or PCIe card.
    """
    name = " ".join(str(model or "").split())
    if name.lower() in PEAKS:
        return name.lower()
    gpu_type = normalize_gpu_type(name) if name else ""
    upper = name.upper()
    if gpu_type in _SINGLE_VARIANT:
        return _SINGLE_VARIANT[gpu_type]
    if name.lower() == gpu_type:  # a bare GRES type: the variant is unknown
        return None
    if gpu_type == "a100":
        form = "pcie" if "PCIE" in upper else "sxm"
        big = "80GB" in upper.replace(" ", "") or (memory_mib is not None and memory_mib > 60 * 1024)
        return f"a100-{form}-{'80gb' if big else '40gb'}"
    if gpu_type in ("h100", "h200"):
        form = "nvl" if "NVL" in upper else "pcie" if "PCIE" in upper else "sxm"
        key = f"{gpu_type}-{form}"
        return key if key in PEAKS else None
    return None


def gpu_peaks(model: Any, memory_mib: float | None = None) -> dict[str, Any] | None:
    """``{"key", "tflops", "mem_bw_gbps"}`` of a GPU (see ``peak_key``), or None when not in ``PEAKS``."""
    key = peak_key(model, memory_mib)
    if key is None:
        return None
    return {"key": key, **PEAKS[key]}


# --------------------------------------------------------------------------
# interconnect


def interconnect_from_facts(gpu_facts_summary: Any) -> tuple[str | None, str]:
    """The node's GPU interconnect from its ``deepops_gpus`` facts: (``nvswitch``|``nvlink``|``pcie``, why),
    or (None, why not) when it cannot be told or an all-reduce over the node means nothing.

    ``nvswitch`` and ``nvlink`` are the facts' own flags (Fabric Manager state or
    the all-pairs NV# shape of ``topo -m``; any NV# link). ``pcie`` needs the
    topology to have been read: a node without ``topo -m`` is unknown, not PCIe.
    """
    facts = gpu_facts_summary if isinstance(gpu_facts_summary, Mapping) else {}
    if not facts:
        return None, "no GPU facts from the node"
    count = _count(facts)
    if not facts.get("present", True) or count == 0:
        return None, "no GPUs on the node"
    if count == 1:
        return None, "one GPU: an all-reduce needs two or more"
    if facts.get("nvswitch"):
        return "nvswitch", f"{count} GPUs on NVSwitch"
    if facts.get("nvlink"):
        return "nvlink", f"{count} GPUs with NVLink between some of them"
    topology = facts.get("topology")
    if isinstance(topology, Mapping) and topology.get("available"):
        return "pcie", f"{count} GPUs, no NVLink in nvidia-smi topo -m"
    return None, "GPU topology unknown (nvidia-smi topo -m was not read)"


def _count(facts: Mapping[str, Any]) -> int:
    try:
        return int(facts.get("gpu_count", facts.get("count")) or 0)
    except (TypeError, ValueError):
        return 0


# --------------------------------------------------------------------------
# thresholds


def validate_overrides(overrides: Any) -> dict[str, float]:
    """Per-group threshold overrides: ``{"<model>/<interconnect>": GB/s}``, e.g. ``{"h100/nvswitch": 300}``.

    ``<model>`` is a GRES type (``h100``, or a product name, normalised) and
    ``<interconnect>`` one of ``nvswitch``, ``nvlink``, ``pcie`` or ``internode``
    (the cross-node run). Returns them with normalised keys; anything else raises
    ``GpuPerformanceInputError`` naming the entry.
    """
    if overrides is None:
        return {}
    if not isinstance(overrides, Mapping):
        raise GpuPerformanceInputError(
            f"NCCL threshold overrides must be a mapping of '<model>/<interconnect>' to GB/s, "
            f"got {type(overrides).__name__}"
        )
    checked: dict[str, float] = {}
    for key, value in overrides.items():
        model, sep, interconnect = str(key).strip().partition("/")
        interconnect = interconnect.strip().lower()
        if not sep or not model.strip() or interconnect not in (*INTERCONNECTS, INTERNODE):
            raise GpuPerformanceInputError(
                f"NCCL threshold override {key!r}: expected '<model>/<interconnect>' with interconnect one of "
                f"{', '.join((*INTERCONNECTS, INTERNODE))}, e.g. 'h100/nvswitch'"
            )
        checked[f"{model_key(model)}/{interconnect}"] = _positive(key, value)
    return checked


def _positive(key: Any, value: Any) -> float:
    if isinstance(value, bool):
        raise GpuPerformanceInputError(f"NCCL threshold override {key!r}: {value!r} is not a number of GB/s")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise GpuPerformanceInputError(f"NCCL threshold override {key!r}: {value!r} is not a number of GB/s") from None
    if not math.isfinite(number) or number <= 0:
        raise GpuPerformanceInputError(f"NCCL threshold override {key!r}: {value!r} must be a positive number of GB/s")
    return number


def nccl_threshold(model: Any, interconnect: Any, overrides: Any = None) -> dict[str, Any]:
    """The bus bandwidth a node must reach: ``{"threshold_gbps": float|None, "key", "source", "reason"}``.

    ``source`` is ``override``, ``table`` or None; with None the check does not
    apply and ``reason`` says why (unknown interconnect, no row for the model).
    Overrides are checked by ``validate_overrides`` (bad ones raise).
    """
    checked = validate_overrides(overrides)
    gpu = model_key(model)
    link = str(interconnect or "").strip().lower()
    key = f"{gpu}/{link}"
    if not gpu:
        return _threshold(None, key, None, "GPU model unknown")
    if not link:
        return _threshold(None, key, None, "GPU interconnect unknown")
    if key in checked:
        return _threshold(checked[key], key, "override", f"{key} overridden to {checked[key]:g} GB/s")
    if (gpu, link) in NCCL_THRESHOLDS:
        value = NCCL_THRESHOLDS[(gpu, link)]
        return _threshold(value, key, "table", f"{key}: {value:g} GB/s from the threshold table")
    return _threshold(None, key, None, f"no NCCL threshold for {gpu} on {link} in the table; an override '{key}' can set one")


def _threshold(value: float | None, key: str, source: str | None, reason: str) -> dict[str, Any]:
    return {"threshold_gbps": value, "key": key, "source": source, "reason": reason}
