"""The NCCL threshold and datasheet-peak tables, and how a node's facts pick a row.

Facts come from the recorded nvidia-smi captures as the virtual cluster renders
them (deepops_py/virtual/fixtures), parsed by nvidia_smi as the facts module does.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ansible_collections.deepops.cluster.plugins.module_utils import gpu_performance as perf
from ansible_collections.deepops.cluster.plugins.module_utils.nvidia_smi import gpu_facts, normalize_gpu_type
from gpu_fixtures import A100_MIG_XML, A100_NOMIG_XML, FIXTURES, H100_XML, L40S_XML

from deepops_py.virtual import gpus
from deepops_py.virtual.gpus import GpuSpec


def rendered_facts(model: str, count: int) -> dict:
    spec = GpuSpec(model, count)
    return gpu_facts(gpus.render_query_xml(spec, "gpu01"), gpus.render_topology(spec))


# --------------------------------------------------------------------------
# interconnect from the facts


def test_hgx_h100_is_nvswitch():
    assert perf.interconnect_from_facts(rendered_facts("h100", 8))[0] == "nvswitch"


def test_multi_gpu_pcie_node_is_pcie():
    interconnect, why = perf.interconnect_from_facts(rendered_facts("l40s", 4))
    assert interconnect == "pcie"
    assert "no NVLink" in why


def test_one_gpu_is_not_an_all_reduce():
    interconnect, why = perf.interconnect_from_facts(gpu_facts((FIXTURES / L40S_XML).read_text()))
    assert interconnect is None
    assert "one GPU" in why


def test_without_topology_pcie_is_not_assumed():
    facts = gpu_facts(gpus.render_query_xml(GpuSpec("l40s", 4), "gpu01"))  # no topo -m
    assert perf.interconnect_from_facts(facts) == (None, "GPU topology unknown (nvidia-smi topo -m was not read)")


def test_nvlink_without_switch_is_nvlink():
    facts = {"present": True, "gpu_count": 4, "nvlink": True, "nvswitch": False, "types": ["a100"]}
    assert perf.interconnect_from_facts(facts)[0] == "nvlink"


@pytest.mark.parametrize("facts", [None, {}, {"present": False, "gpu_count": 0}, "junk"])
def test_no_gpus_no_interconnect(facts):
    assert perf.interconnect_from_facts(facts)[0] is None


# --------------------------------------------------------------------------
# thresholds


@pytest.mark.parametrize(("model", "interconnect", "expected"), [
    ("h100", "nvswitch", 360.0),
    ("NVIDIA H100 80GB HBM3", "nvswitch", 360.0),
    ("h200", "nvswitch", 360.0),
    ("a100", "nvswitch", 185.0),
    ("b200", "nvswitch", 600.0),
    ("l40s", "pcie", 10.0),
    ("a100", "pcie", 10.0),
    ("h100", "pcie", 20.0),
    ("a100", "nvlink", 10.0),
])
def test_threshold_per_model_and_topology(model, interconnect, expected):
    mark = perf.nccl_threshold(model, interconnect)
    assert (mark["threshold_gbps"], mark["source"]) == (expected, "table")


@pytest.mark.parametrize(("model", "interconnect", "reason"), [
    ("l40s", "nvswitch", "no NCCL threshold for l40s on nvswitch"),
    ("NVIDIA GeForce RTX 5090", "pcie", "no NCCL threshold for nvidia_geforce_rtx_5090 on pcie"),
    ("h100", None, "GPU interconnect unknown"),
    ("", "nvswitch", "GPU model unknown"),
])
def test_unknown_topology_is_not_applicable_with_a_reason(model, interconnect, reason):
    mark = perf.nccl_threshold(model, interconnect)
    assert mark["threshold_gbps"] is None and mark["source"] is None
    assert reason in mark["reason"]


def test_table_models_are_gres_types():
    """Keys are what normalize_gpu_type makes of the product names, so facts and GRES agree."""
    for model, interconnect in perf.NCCL_THRESHOLDS:
        assert normalize_gpu_type(f"NVIDIA {model.upper()}") == model
        assert interconnect in perf.INTERCONNECTS


def test_override_wins_and_is_normalised():
    mark = perf.nccl_threshold("h100", "nvswitch", {"NVIDIA H100 80GB HBM3/NVSwitch": 300})
    assert (mark["threshold_gbps"], mark["source"], mark["key"]) == (300.0, "override", "h100/nvswitch")
    assert perf.nccl_threshold("l40s", "nvswitch", {"l40s/nvswitch": "55.5"})["threshold_gbps"] == 55.5
    assert perf.nccl_threshold("a100", "pcie", {"h100/pcie": 1})["source"] == "table"  # other rows stay
    assert perf.validate_overrides({"h100/internode": 40}) == {"h100/internode": 40.0}


@pytest.mark.parametrize(("overrides", "message"), [
    (["h100/nvswitch", 300], "must be a mapping"),
    ({"h100": 300}, "expected '<model>/<interconnect>'"),
    ({"h100/infiniband": 300}, "interconnect one of nvswitch, nvlink, pcie, internode"),
    ({"/nvswitch": 300}, "expected '<model>/<interconnect>'"),
    ({"h100/nvswitch": "fast"}, "is not a number"),
    ({"h100/nvswitch": True}, "is not a number"),
    ({"h100/nvswitch": 0}, "must be a positive number"),
    ({"h100/nvswitch": float("nan")}, "must be a positive number"),
])
def test_bad_overrides_raise_a_value_error_naming_the_entry(overrides, message):
    with pytest.raises(perf.GpuPerformanceInputError, match=re.escape(message)):
        perf.nccl_threshold("h100", "nvswitch", overrides)
    assert issubclass(perf.GpuPerformanceInputError, ValueError)


# --------------------------------------------------------------------------
# peaks


def product_name(xml_name: str) -> str:
    return re.search(r"<product_name>([^<]*)</product_name>", (FIXTURES / xml_name).read_text()).group(1).strip()


@pytest.mark.parametrize(("xml_name", "key"), [
    (H100_XML, "h100-sxm"),
    (A100_NOMIG_XML, "a100-sxm-40gb"),
    (A100_MIG_XML, "a100-sxm-80gb"),
    (L40S_XML, "l40s"),
])
def test_peak_key_of_recorded_product_names(xml_name, key):
    assert perf.peak_key(product_name(xml_name)) == key


@pytest.mark.parametrize(("name", "key"), [
    ("NVIDIA H200", "h200-sxm"),
    ("NVIDIA H200 NVL", "h200-nvl"),
    ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA H100 NVL", "h100-nvl"),
    ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
    ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"),
    ("NVIDIA B200", "b200"),
    ("b200", "b200"),
    ("h100-sxm", "h100-sxm"),
    ("a100", None),  # a bare type: 40 or 80 GB, SXM or PCIe?
    ("NVIDIA GeForce RTX 5090", None),
])
def test_peak_key(name, key):
    assert perf.peak_key(name) == key


def test_a100_size_from_memory_when_the_name_has_none():
    assert perf.peak_key("NVIDIA A100-SXM4", memory_mib=81920) == "a100-sxm-80gb"


def test_peaks_cover_the_required_models():
    for key in ("a100-sxm-40gb", "a100-sxm-80gb", "h100-sxm", "h200-sxm", "l40s", "b200"):
        assert perf.PEAKS[key]["tflops"] > 0 and perf.PEAKS[key]["mem_bw_gbps"] > 0
    assert perf.gpu_peaks("NVIDIA H100 80GB HBM3") == {"key": "h100-sxm", "tflops": 989.5, "mem_bw_gbps": 3350.0}
    assert perf.gpu_peaks("NVIDIA GeForce RTX 5090") is None


def test_every_row_names_its_source():
    """Each table row carries a comment; the comment's [tag] is defined in the block above."""
    source = Path(perf.__file__).read_text()
    tags = set(re.findall(r"^#\s+\[([\w-]+)\]", source, re.M))
    rows = re.findall(r'^\s+(?:\("[\w-]+", "\w+"\)|"[\w-]+"): (?:[\d.]+|\{[^}]*\}),(.*)$', source, re.M)
    assert len(rows) == len(perf.NCCL_THRESHOLDS) + len(perf.PEAKS)
    for comment in rows:
        cited = re.findall(r"\[([\w-]+)\]", comment)
        assert cited or "#" in comment, comment
        assert set(cited) <= tags, comment
