"""Parser tests for plugins/module_utils/nvidia_smi.py against real captures.

Expected values come from deepops_py/virtual/fixtures/SOURCES.md (and the
captures themselves); each capture's quirk is exercised on purpose.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ansible_collections.deepops.cluster.plugins.module_utils import nvidia_smi as smi
from gpu_fixtures import A100_MIG_XML, A100_NOMIG_XML, B200_TOPO, DGX1_TOPO, FIXTURES, H100_XML, L40S_XML, PCIE_TOPO
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]


def fixture(name: str) -> str:
    path = FIXTURES / name
    if not path.is_file():
        pytest.fail(f"fixture {name} is missing from {FIXTURES}; copy it with its SOURCES.md entry")
    return path.read_text()


def synthetic_xml(product: str, bus_ids: list[str]) -> str:
    """Build a minimal -q -x document (most elements missing on purpose)."""
    gpus = "".join(
        f'<gpu id="{bus}"><product_name>{product}</product_name>'
        f"<minor_number>{index}</minor_number><pci><pci_bus_id>{bus}</pci_bus_id></pci></gpu>"
        for index, bus in enumerate(bus_ids)
    )
    head = f"<driver_version>1.0</driver_version><attached_gpus>{len(bus_ids)}</attached_gpus>"
    return f"<nvidia_smi_log>{head}{gpus}</nvidia_smi_log>"


# --------------------------------------------------------------------------
# H100 SXM5 x8 (NVSwitch, scrubbed placeholder UUIDs, full capture)
# --------------------------------------------------------------------------


def test_h100_xml_driver_and_gpus():
    facts = smi.gpu_facts(fixture(H100_XML))
    assert facts["present"] is True
    assert (facts["driver_version"], facts["cuda_version"]) == ("580.105.08", "13.0")
    assert facts["count"] == facts["gpu_count"] == facts["attached_gpus"] == 8
    assert facts["types"] == ["h100"]
    assert facts["by_type"] == {"h100": 8}
    assert [gpu["pci_bus_id"] for gpu in facts["gpus"]] == [
        f"00000000:{bus}:00.0" for bus in ("53", "64", "75", "86", "97", "A8", "B9", "CA")
    ]
    assert [gpu["index"] for gpu in facts["gpus"]] == list(range(8))
    assert [gpu["minor_number"] for gpu in facts["gpus"]] == list(range(8))
    assert [gpu["device"] for gpu in facts["gpus"]] == [f"/dev/nvidia{i}" for i in range(8)]
    assert [gpu["serial"] for gpu in facts["gpus"]] == [f"165000000000{i}" for i in range(1, 9)]


def test_h100_xml_per_gpu_values():
    gpu = smi.gpu_facts(fixture(H100_XML))["gpus"][0]
    assert gpu["product_name"] == "NVIDIA H100 80GB HBM3"
    assert gpu["type"] == "h100"
    assert gpu["architecture"] == "Hopper"
    assert (
        gpu["uuid"] == "GPU-00000000-0000-0000-0000-000000000000"
    )  # all-zero placeholder is valid
    assert gpu["memory_total_mib"] == 81559
    assert gpu["mig_mode"] == {"current": "Disabled", "pending": "Disabled"}
    assert gpu["mig_devices"] == []
    assert gpu["power_limits_w"] == {"current": 700.0, "default": 700.0, "min": 200.0, "max": 700.0}
    assert gpu["fabric_state"] == "Completed"


def test_h100_xml_alone_detects_nvswitch_from_fabric_state():
    facts = smi.gpu_facts(fixture(H100_XML))
    assert facts["nvswitch"] is True
    assert facts["nvlink"] is False  # NVLink comes from topo -m only
    assert facts["topology"] == {"available": False, "format": None, "gpu_rows": 0, "nics": []}
    assert all(gpu["numa_node"] is None for gpu in facts["gpus"])
    assert all(gpu["cpu_affinity"] is None for gpu in facts["gpus"])


def test_h100_with_b200_shaped_topology():
    # No licensed H100 topo -m exists; SOURCES.md derives it from the B200 one.
    facts = smi.gpu_facts(fixture(H100_XML), fixture(B200_TOPO))
    gpus = facts["gpus"]
    assert [gpu["numa_node"] for gpu in gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [gpu["cpu_affinity"] for gpu in gpus] == ["0-55,112-167"] * 4 + ["56-111,168-223"] * 4
    assert gpus[0]["cpu_count"] == gpus[7]["cpu_count"] == 112
    assert gpus[0]["cpu_list"] == [*range(56), *range(112, 168)]
    assert gpus[3]["links"] == [18, 18, 18, -1, 18, 18, 18, 18]
    assert facts["nvlink"] is True
    assert facts["nvswitch"] is True
    assert facts["topology"] == {
        "available": True,
        "format": "numa",
        "gpu_rows": 8,
        "nics": [f"mlx5_{i}" for i in range(8)],
    }


# --------------------------------------------------------------------------
# nvidia-smi topo -m captures
# --------------------------------------------------------------------------


def test_b200_topology_survives_damaged_numa_column():
    topo = smi.parse_topo(fixture(B200_TOPO))
    assert topo["format"] == "numa"
    assert [row["index"] for row in topo["gpus"]] == list(range(8))
    # Rows end in "0 N/A": NUMA Affinity and GPU NUMA ID run together.
    assert [row["numa_node"] for row in topo["gpus"]] == [0] * 4 + [1] * 4
    assert topo["gpus"][0]["connections"]["NIC0"] == "PIX"
    assert topo["gpus"][4]["connections"]["NIC3"] == "SYS"
    assert all(
        link == (-1 if position == row["index"] else 18)
        for row in topo["gpus"]
        for position, link in enumerate(row["links"])
    )


def test_pcie_topology_two_numa_nodes_no_nvlink():
    topo = smi.parse_topo(fixture(PCIE_TOPO))
    assert topo["format"] == "numa"
    assert topo["nics"] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert [row["cpu_affinity"] for row in topo["gpus"]] == ["0-31", "0-31", "32-63", "32-63"]
    assert [row["numa_node"] for row in topo["gpus"]] == [0, 0, 1, 1]
    assert topo["gpus"][0]["connections"]["GPU1"] == "NODE"
    assert topo["gpus"][0]["connections"]["GPU2"] == "SYS"
    assert topo["gpus"][2]["links"] == [0, 0, -1, 0]


def test_pcie_topology_with_rtx6000ada_gpus():
    # SOURCES.md gives this server's GPU bus IDs (01, 41, C1, E1) and model.
    buses = [f"00000000:{bus}:00.0" for bus in ("01", "41", "C1", "E1")]
    facts = smi.gpu_facts(
        synthetic_xml("NVIDIA RTX 6000 Ada Generation", buses), fixture(PCIE_TOPO)
    )
    assert facts["types"] == ["rtx6000ada"]
    assert facts["by_type"] == {"rtx6000ada": 4}
    assert [(gpu["pci_bus_id"], gpu["numa_node"], gpu["cpu_count"]) for gpu in facts["gpus"]] == [
        (buses[0], 0, 32),
        (buses[1], 0, 32),
        (buses[2], 1, 32),
        (buses[3], 1, 32),
    ]
    assert facts["nvlink"] is False
    assert facts["nvswitch"] is False


def test_dgx1_legacy_topology():
    text = fixture(DGX1_TOPO)
    assert not text.endswith("\n")  # kept as in the source
    topo = smi.parse_topo(text)
    assert topo["format"] == "legacy"
    assert topo["nics"] == ["mlx5_0", "mlx5_2", "mlx5_1", "mlx5_3"]  # column order, no NIC legend
    assert all(row["numa_node"] is None for row in topo["gpus"])
    assert [row["cpu_affinity"] for row in topo["gpus"]] == ["0-19,40-59"] * 4 + ["20-39,60-79"] * 4
    assert topo["gpus"][0]["links"] == [-1, 1, 1, 2, 2, 0, 0, 0]
    assert topo["gpus"][7]["links"] == [0, 0, 0, 1, 2, 1, 2, -1]


def test_dgx1_hybrid_cube_mesh_is_nvlink_without_nvswitch():
    buses = [f"00000000:{bus:02X}:00.0" for bus in (6, 7, 10, 11, 133, 134, 137, 138)]
    facts = smi.gpu_facts(synthetic_xml("Tesla V100-SXM2-16GB", buses), fixture(DGX1_TOPO))
    assert facts["types"] == ["v100"]
    assert facts["nvlink"] is True
    assert facts["nvswitch"] is False
    assert facts["topology"]["format"] == "legacy"
    assert [gpu["numa_node"] for gpu in facts["gpus"]] == [None] * 8
    assert [gpu["cpu_count"] for gpu in facts["gpus"]] == [40] * 8


# --------------------------------------------------------------------------
# A100 and L40S single-GPU captures
# --------------------------------------------------------------------------


def test_a100_without_mig():
    facts = smi.gpu_facts(fixture(A100_NOMIG_XML))
    assert (facts["driver_version"], facts["cuda_version"]) == ("570.148.08", "12.8")
    assert facts["count"] == facts["attached_gpus"] == 1
    gpu = facts["gpus"][0]
    assert (gpu["product_name"], gpu["type"], gpu["architecture"]) == (
        "NVIDIA A100-SXM4-40GB",
        "a100",
        "Ampere",
    )
    assert gpu["pci_bus_id"] == "00000000:06:00.0"
    assert gpu["uuid"] == "GPU-00000000-0000-0000-0000-000000000000"
    assert gpu["memory_total_mib"] == 40960
    assert gpu["mig_mode"] == {"current": "Disabled", "pending": "Disabled"}
    assert gpu["mig_devices"] == []
    assert gpu["power_limits_w"] == {"current": 400.0, "default": 400.0, "min": 100.0, "max": 400.0}
    assert gpu["fabric_state"] is None
    assert (facts["mig_enabled"], facts["nvswitch"]) == (False, False)


def test_a100_mig_four_1g20gb_devices_and_truncated_gpu_list():
    facts = smi.gpu_facts(fixture(A100_MIG_XML))
    assert (facts["driver_version"], facts["cuda_version"]) == ("535.54.03", "12.2")
    # Trimmed upstream: attached_gpus says 4, one <gpu> is present.
    assert (facts["attached_gpus"], facts["count"]) == (4, 1)
    assert facts["mig_enabled"] is True
    gpu = facts["gpus"][0]
    assert gpu["product_name"] == "NVIDIA A100-SXM4-80GB"
    assert (gpu["pci_bus_id"], gpu["minor_number"], gpu["device"]) == (
        "00000000:01:00.0",
        1,
        "/dev/nvidia1",
    )
    assert (gpu["serial"], gpu["uuid"]) == (
        "1650522003820",
        "GPU-513536b6-7d19-9063-b049-1e69664bb298",
    )
    assert gpu["mig_mode"] == {"current": "Enabled", "pending": "Enabled"}
    assert gpu["power_limits_w"] == {"current": 500.0, "default": 500.0, "min": 100.0, "max": 500.0}
    assert gpu["mig_devices"] == [
        {
            "index": index,
            "gpu_instance_id": index + 3,
            "compute_instance_id": 0,
            "memory_mib": 19968,
            "multiprocessor_count": 14,
            "profile": "1g.20gb",
            "device_files": None,  # no MIG minors file given
        }
        for index in range(4)
    ]
    assert (facts["gres_by_type"], facts["mig_device_count"], facts["mig_device_files_known"]) == ({"1g.20gb": 4}, 4, False)
    assert facts["mig_problems"] == [
        "the MIG minors file /proc/driver/nvidia-caps/mig-minors was not read, so the capability device "
        "files of the MIG devices on GPU 0 are unknown"
    ]


# Lines of the driver's MIG minors file for the capture's GPU (minor number 1, index 0): the
# numbering of NVIDIA's MIG user guide (3 + 135 per GPU minor + 9 per GPU instance, + 1 + CI).
# The gpu0 lines are decoys: the capabilities follow the minor number, not the index.
CAPTURE_MINORS = "config 1\nmonitor 2\ngpu0/gi3/access 30\ngpu0/gi3/ci0/access 31\n" + "".join(
    f"gpu1/gi{gi}/access {138 + 9 * gi}\ngpu1/gi{gi}/ci0/access {139 + 9 * gi}\n" for gi in range(15)
)


def test_a100_mig_capture_with_the_minors_file_gives_each_device_its_files():
    facts = smi.gpu_facts(fixture(A100_MIG_XML), mig_minors_text=CAPTURE_MINORS)
    assert [mig["device_files"] for mig in facts["gpus"][0]["mig_devices"]] == [
        ["/dev/nvidia1", f"/dev/nvidia-caps/nvidia-cap{138 + 9 * gi}", f"/dev/nvidia-caps/nvidia-cap{139 + 9 * gi}"]
        for gi in (3, 4, 5, 6)
    ]
    assert (facts["mig_device_files_known"], facts["mig_problems"]) == (True, [])
    # A minors file without the instance's lines: known to be unknown, and said so.
    partial = smi.gpu_facts(fixture(A100_MIG_XML), mig_minors_text=CAPTURE_MINORS.replace("gpu1/gi5/", "gpu9/gi5/"))
    assert [mig["device_files"] is None for mig in partial["gpus"][0]["mig_devices"]] == [False, False, True, False]
    assert partial["mig_device_files_known"] is False
    assert partial["mig_problems"] == [
        "GPU 0 MIG device 2 (GPU instance 5, compute instance 0): capability device files unknown, "
        "/proc/driver/nvidia-caps/mig-minors has no line for gpu1/gi5/ci0"
    ]


def test_parse_mig_minors_keeps_only_capability_lines():
    assert smi.parse_mig_minors("config 1\nmonitor 2\n\ngpu0/gi1/access 12\ngarbage\nx y z\ngpu0/gi1/ci0/access 13\n") == {
        "config": 1, "monitor": 2, "gpu0/gi1/access": 12, "gpu0/gi1/ci0/access": 13,
    }


def test_truncated_xml_with_larger_topology_maps_by_index():
    facts = smi.gpu_facts(fixture(A100_MIG_XML), fixture(B200_TOPO))
    assert facts["count"] == 1
    assert facts["topology"]["gpu_rows"] == 8
    assert facts["gpus"][0]["numa_node"] == 0
    assert facts["gpus"][0]["cpu_affinity"] == "0-55,112-167"


def test_l40s_mig_not_applicable():
    facts = smi.gpu_facts(fixture(L40S_XML))
    assert (facts["driver_version"], facts["cuda_version"]) == ("595.91.07", "13.2")
    gpu = facts["gpus"][0]
    assert (gpu["product_name"], gpu["type"], gpu["architecture"]) == (
        "NVIDIA L40S",
        "l40s",
        "Ada Lovelace",
    )
    assert gpu["pci_bus_id"] == "00000000:30:00.0"
    assert gpu["memory_total_mib"] == 46068
    assert gpu["mig_mode"] == {"current": "N/A", "pending": "N/A"}
    assert gpu["power_limits_w"] == {"current": 350.0, "default": 350.0, "min": 100.0, "max": 350.0}
    assert (facts["mig_enabled"], facts["nvswitch"], facts["types"]) == (False, False, ["l40s"])


def test_every_xml_fixture_parses():
    names = sorted(path.name for path in FIXTURES.glob("*.xml"))
    assert names, f"no XML fixtures in {FIXTURES}"
    for name in names:
        facts = smi.gpu_facts(fixture(name))
        assert facts["count"] >= 1, name
        assert all(gpu["pci_bus_id"] for gpu in facts["gpus"]), name
        assert all(re.match(r"^[a-z0-9_]+$", gpu["type"]) for gpu in facts["gpus"]), name


def test_every_topo_fixture_parses():
    names = sorted(path.name for path in FIXTURES.glob("topo-*.txt"))
    assert names, f"no topo fixtures in {FIXTURES}"
    for name in names:
        topo = smi.parse_topo(fixture(name))
        assert len(topo["gpus"]) >= 1, name
        assert all(row["links"][row["index"]] == -1 for row in topo["gpus"]), name


# --------------------------------------------------------------------------
# Schema variants and damaged input (hand-written snippets)
# --------------------------------------------------------------------------

V11_GPU = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v11.dtd">
<nvidia_smi_log>
    <driver_version>510.47.03</driver_version>
    <attached_gpus>1</attached_gpus>
    <gpu id="00000000:00:04.0">
        <product_name>NVIDIA A100-SXM4-40GB
        </product_name>
        <mig_mode><current_mig>Enabled</current_mig><pending_mig>Disabled</pending_mig></mig_mode>
        <mig_devices>
            <mig_device>
                <index>0</index><gpu_instance_id>1</gpu_instance_id><compute_instance_id>0</compute_instance_id>
                <device_attributes><shared><multiprocessor_count>42</multiprocessor_count></shared></device_attributes>
                <fb_memory_usage><total>19968 MiB</total></fb_memory_usage>
            </mig_device>
        </mig_devices>
        <fb_memory_usage><total>40960 MiB</total></fb_memory_usage>
        <power_readings>
            <power_limit>300.00 W</power_limit>
            <default_power_limit>400.00 W</default_power_limit>
            <enforced_power_limit>250.00 W</enforced_power_limit>
            <min_power_limit>100.00 W</min_power_limit>
            <max_power_limit>N/A</max_power_limit>
        </power_readings>
    </gpu>
</nvidia_smi_log>
"""


def test_v11_schema_wrapped_values_and_power_readings():
    facts = smi.gpu_facts(V11_GPU)
    gpu = facts["gpus"][0]
    assert gpu["product_name"] == "NVIDIA A100-SXM4-40GB"  # wrapped across lines in the capture
    assert gpu["pci_bus_id"] == "00000000:00:04.0"  # from the gpu id attribute
    assert gpu["mig_mode"] == {"current": "Enabled", "pending": "Disabled"}
    assert gpu["mig_devices"][0]["profile"] == "3g.20gb"
    # enforced_power_limit is what the GPU runs at; power_limit is only requested.
    assert gpu["power_limits_w"] == {"current": 250.0, "default": 400.0, "min": 100.0, "max": None}
    assert facts["cuda_version"] is None


def test_missing_elements_give_nulls_not_errors():
    facts = smi.gpu_facts(
        "<nvidia_smi_log><gpu><product_name>N/A</product_name></gpu></nvidia_smi_log>"
    )
    gpu = facts["gpus"][0]
    assert gpu["product_name"] is None
    assert gpu["type"] == "nvidia_unknown"
    assert (gpu["minor_number"], gpu["device"], gpu["pci_bus_id"], gpu["memory_total_mib"]) == (
        None,
        None,
        None,
        None,
    )
    assert gpu["mig_mode"] == {"current": "N/A", "pending": "N/A"}
    assert gpu["power_limits_w"] == {"current": None, "default": None, "min": None, "max": None}
    assert facts["attached_gpus"] is None


def test_warning_lines_before_the_xml_are_skipped():
    text = "WARNING: infoROM is corrupted at gpu 0000:53:00.0\n" + fixture(L40S_XML)
    assert smi.gpu_facts(text)["types"] == ["l40s"]


def test_no_gpu_elements():
    facts = smi.gpu_facts("<nvidia_smi_log><driver_version>550.1</driver_version></nvidia_smi_log>")
    assert (facts["present"], facts["count"], facts["gpus"], facts["types"], facts["by_type"]) == (
        True,
        0,
        [],
        [],
        {},
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "printed nothing"),
        ("<nvidia_smi_log><gpu>", "malformed XML"),
        (
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
            "malformed XML",
        ),
        ("<other/>", "<nvidia_smi_log>"),
    ],
)
def test_bad_xml_raises_parse_error(text, message):
    with pytest.raises(smi.NvidiaSmiParseError, match=re.escape(message)):
        smi.parse_xml(text)


def test_topo_without_header_raises():
    with pytest.raises(smi.NvidiaSmiParseError, match="CPU Affinity"):
        smi.parse_topo("No devices were found")


def test_topo_short_row_raises():
    text = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \nGPU1\tNV4\t X \t0-7\n"
    with pytest.raises(smi.NvidiaSmiParseError, match="GPU0 has 1 cells"):
        smi.parse_topo(text)


def test_topo_affinity_not_available():
    topo = smi.parse_topo("\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tN/A\tN/A\n")
    assert topo["gpus"][0]["cpu_affinity"] is None
    assert topo["gpus"][0]["numa_node"] is None


def test_four_gpu_all_to_all_board_is_not_nvswitch():
    # HGX 4-GPU boards link every pair directly: NVLink, but no NVSwitch.
    header = "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\n"
    rows = "".join(
        f"GPU{i}\t" + "\t".join(" X " if i == j else "NV4" for j in range(4)) + "\t0-31\t0\n"
        for i in range(4)
    )
    facts = smi.gpu_facts(
        synthetic_xml("NVIDIA A100-SXM4-80GB", [f"0000:{i}1:00.0" for i in range(4)]), header + rows
    )
    assert (facts["nvlink"], facts["nvswitch"]) == (True, False)


def test_absent_facts():
    facts = smi.absent_facts()
    assert facts["present"] is False
    assert facts["count"] == facts["gpu_count"] == 0
    assert facts["gpus"] == []
    assert facts["driver_version"] is None
    assert (facts["nvlink"], facts["nvswitch"], facts["mig_enabled"]) == (False, False, False)


# --------------------------------------------------------------------------
# Value helpers
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H100 PCIe", "h100"),
        ("NVIDIA H100 NVL", "h100"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA GH200 480GB", "gh200"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA GB200", "gb200"),
        ("NVIDIA A100-SXM4-40GB", "a100"),
        ("NVIDIA A100 80GB PCIe", "a100"),
        ("NVIDIA A10G", "a10g"),
        ("NVIDIA A10", "a10"),
        ("NVIDIA A30", "a30"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA L40", "l40"),
        ("NVIDIA L4", "l4"),
        ("NVIDIA RTX 6000 Ada Generation", "rtx6000ada"),
        ("NVIDIA RTX A6000", "rtxa6000"),
        ("Tesla V100-SXM2-16GB", "v100"),
        ("Tesla T4", "t4"),
        ("NVIDIA GeForce RTX 4090", "nvidia_geforce_rtx_4090"),
        ("", "nvidia_unknown"),
        (None, "nvidia_unknown"),
    ],
)
def test_normalize_gpu_type(name, expected):
    assert smi.normalize_gpu_type(name) == expected


@given(st.text(max_size=60))
def test_gpu_type_is_always_a_valid_gres_type(name):
    assert re.fullmatch(r"[a-z0-9_]+", smi.normalize_gpu_type(name))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("00000000:53:00.0", "00000000:53:00.0"),
        ("00000000:a8:00.0", "00000000:A8:00.0"),
        ("0000:b9:00.0", "00000000:B9:00.0"),
        ("ca:00.0", "00000000:CA:00.0"),
        ("00000001:01:1f.7", "00000001:01:1F.7"),
        ("not a bus id", None),
        ("", None),
        (None, None),
    ],
)
def test_normalize_pci_bus_id(value, expected):
    assert smi.normalize_pci_bus_id(value) == expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [("0-3,8,10-11", [0, 1, 2, 3, 8, 10, 11]), ("5", [5]), ("N/A", []), (None, []), ("", [])],
)
def test_parse_cpu_list(spec, expected):
    assert smi.parse_cpu_list(spec) == expected


def test_parse_cpu_list_rejects_garbage():
    with pytest.raises(smi.NvidiaSmiParseError):
        smi.parse_cpu_list("0-x")


@pytest.mark.parametrize(
    ("gpu_type", "product", "parent_mib", "sms", "mib", "expected"),
    [
        ("a100", "NVIDIA A100-SXM4-40GB", 40960, 14, 4864, "1g.5gb"),
        ("a100", "NVIDIA A100-SXM4-40GB", 40960, 28, 9856, "2g.10gb"),
        ("a100", "NVIDIA A100-SXM4-40GB", 40960, 42, 19968, "3g.20gb"),
        ("a100", "NVIDIA A100-SXM4-40GB", 40960, 98, 40192, "7g.40gb"),
        ("a100", "NVIDIA A100-SXM4-80GB", 81920, 14, 9728, "1g.10gb"),
        ("a100", "NVIDIA A100-SXM4-80GB", 81920, 42, 40192, "3g.40gb"),
        ("h100", "NVIDIA H100 80GB HBM3", 81559, 16, 9984, "1g.10gb"),
        ("h100", "NVIDIA H100 80GB HBM3", 81559, 64, 40448, "4g.40gb"),
        ("h100", "NVIDIA H100 80GB HBM3", 81559, 132, 80896, "7g.80gb"),
        ("h200", "NVIDIA H200", 143771, 16, 17920, "1g.18gb"),
        ("h200", "NVIDIA H200", 143771, 60, 71424, "3g.71gb"),
        ("gh200", "NVIDIA GH200 480GB", 97871, 16, 11776, "1g.12gb"),
        # Hopper's 1g with two memory slices has 26 SMs: from the table, and from the SM map
        # for a Hopper board the table does not list (H100 PCIe).
        ("h100", "NVIDIA H100 80GB HBM3", 81559, 26, 20096, "1g.20gb"),
        ("h100", "NVIDIA H100 NVL", 95830, 26, 22144, "1g.24gb"),
        ("h200", "NVIDIA H200", 143771, 26, 33280, "1g.35gb"),
        ("h100", "NVIDIA H100 PCIe", 81559, 26, 20096, "1g.20gb"),
        ("l40s", "NVIDIA L40S", 46068, 14, 9728, None),  # no MIG family
        ("a100", "NVIDIA A100-SXM4-40GB", 40960, 13, 4864, None),  # unknown SM count
        ("a100", "NVIDIA A100-SXM4-40GB", 40960, 14, 40192, None),  # no 14-SM profile of that size
        # In the table, the parent's memory is not needed; elsewhere it is.
        ("a100", "NVIDIA A100-SXM4-40GB", None, 14, 4864, "1g.5gb"),
        ("h100", "NVIDIA H100 PCIe", None, 16, 9984, None),
    ],
)
def test_infer_mig_profile(gpu_type, product, parent_mib, sms, mib, expected):
    assert smi.infer_mig_profile(gpu_type, product, parent_mib, sms, mib) == expected


@pytest.mark.parametrize(
    ("product", "sms", "mib", "engines", "expected"),
    [
        # The +me profile differs from the plain one only in media engines (-lgip's JPEG and OFA).
        ("NVIDIA H100 80GB HBM3", 16, 9984, {"decoders": 1, "encoders": 0, "jpeg": 1, "ofa": 0}, "1g.10gb"),
        ("NVIDIA H100 80GB HBM3", 16, 9984, {"decoders": 1, "encoders": 0, "jpeg": 1, "ofa": 1}, "1g.10gb+me"),
        ("NVIDIA A100-SXM4-80GB", 14, 9728, {"decoders": 1, "encoders": 0, "jpeg": 1, "ofa": 1}, "1g.10gb+me"),
        ("NVIDIA A100-SXM4-80GB", 14, 9728, {"decoders": None, "encoders": None, "jpeg": None, "ofa": None}, "1g.10gb"),
        ("NVIDIA A100-SXM4-80GB", 14, 19968, {"decoders": 1, "encoders": 0, "jpeg": 0, "ofa": 0}, "1g.20gb"),
    ],
)
def test_infer_mig_profile_tells_me_profiles_by_their_engines(product, sms, mib, engines, expected):
    assert smi.infer_mig_profile(smi.normalize_gpu_type(product), product, 81920, sms, mib, engines=engines) == expected


def test_build_facts_does_not_modify_its_input():
    parsed = smi.parse_xml(fixture(L40S_XML))
    before = repr(parsed)
    smi.build_facts(parsed, smi.parse_topo(fixture(PCIE_TOPO)))
    assert repr(parsed) == before
