"""Simulated GPUs: --gpus parsing, rendered nvidia-smi XML and topology."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from deepops_py.errors import InputError
from deepops_py.virtual import gpus
from deepops_py.virtual.gpus import GpuSpec


def test_parse_valid_spec():
    assert GpuSpec.parse("h100:8") == GpuSpec("h100", 8)
    assert GpuSpec.parse(" L40S:1 ") == GpuSpec("l40s", 1)
    assert str(GpuSpec("a100", 4)) == "a100:4"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("h100", "expected MODEL:COUNT"),
        ("h100:", "expected MODEL:COUNT"),
        (":4", "expected MODEL:COUNT"),
        ("h100:0", "from 1 to 16"),
        ("h100:17", "from 1 to 16"),
        ("h100:-1", "from 1 to 16"),
        ("h100:two", "from 1 to 16"),
        ("v100:4", "unknown GPU model 'v100'"),
    ],
)
def test_parse_rejects_bad_input(text, fragment):
    with pytest.raises(InputError) as caught:
        GpuSpec.parse(text)
    assert fragment in str(caught.value)
    assert caught.value.exit_code == 2


def test_unknown_model_suggests_close_name():
    with pytest.raises(InputError, match="Did you mean 'h100'"):
        GpuSpec.parse("h10:8")


def test_every_model_has_a_description_and_its_fixtures():
    assert {"h100", "a100", "l40s"} <= set(gpus.MODELS)
    for model in gpus.MODELS.values():
        assert model.description
        assert (gpus.FIXTURES_DIR / model.xml_fixture).is_file()
        assert (gpus.FIXTURES_DIR / model.topology_fixture).is_file()


def test_sources_document_every_fixture_and_no_gpl_file():
    sources = (gpus.FIXTURES_DIR / "SOURCES.md").read_text()
    for path in gpus.FIXTURES_DIR.iterdir():
        if path.name != "SOURCES.md":
            assert f"### {path.name}" in sources
    assert not list(gpus.FIXTURES_DIR.glob("*mig-2x3g20gb*"))  # the GPL-3.0 netdata capture stays out


@pytest.mark.parametrize("model", sorted(gpus.MODELS))
@pytest.mark.parametrize("count", [1, 4, 8, 16])
def test_rendered_xml_has_count_distinct_gpus(model, count):
    text = gpus.render_query_xml(GpuSpec(model, count), "gpu01")
    root = ET.fromstring(text)
    assert root.findtext("attached_gpus") == str(count)
    elements = root.findall("gpu")
    assert len(elements) == count
    uuids = [gpu.findtext("uuid") for gpu in elements]
    bus_ids = [gpu.findtext("pci/pci_bus_id") for gpu in elements]
    ids = [gpu.get("id") for gpu in elements]
    assert len(set(uuids)) == count
    assert len(set(bus_ids)) == count
    assert ids == bus_ids
    assert [gpu.findtext("minor_number") for gpu in elements] == [str(i) for i in range(count)]
    assert len({gpu.findtext("pci/pci_bus") for gpu in elements}) == count
    assert all(bus_id.startswith("00000000:") and bus_id.endswith(":00.0") for bus_id in bus_ids)


def test_rendered_xml_says_it_is_simulated_and_keeps_recorded_content():
    text = gpus.render_query_xml(GpuSpec("h100", 4), "gpu01")
    assert "<!-- SIMULATED GPUs" in text
    assert text.startswith('<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">')
    root = ET.fromstring(text)
    assert {gpu.findtext("product_name") for gpu in root.findall("gpu")} == {"NVIDIA H100 80GB HBM3"}
    assert root.findtext("driver_version") == "580.105.08"
    # the first four recorded GPUs, in order
    assert [gpu.findtext("pci/pci_bus_id") for gpu in root.findall("gpu")] == [
        "00000000:53:00.0", "00000000:64:00.0", "00000000:75:00.0", "00000000:86:00.0",
    ]


def test_rendering_is_deterministic_and_unique_per_node():
    spec = GpuSpec("a100", 4)
    assert gpus.render_query_xml(spec, "gpu01") == gpus.render_query_xml(spec, "gpu01")
    first = {gpu["uuid"] for gpu in gpus.gpus_from_xml(gpus.render_query_xml(spec, "gpu01"))}
    second = {gpu["uuid"] for gpu in gpus.gpus_from_xml(gpus.render_query_xml(spec, "gpu02"))}
    assert not first & second


def test_marker_describes_the_simulation():
    spec = GpuSpec("l40s", 2)
    marker = gpus.marker(spec, "gpu03", gpus.render_query_xml(spec, "gpu03"))
    assert marker["simulated"] is True
    assert marker["model"] == "l40s" and marker["count"] == 2
    assert [gpu["index"] for gpu in marker["gpus"]] == [0, 1]
    assert marker["gpus"][0]["name"] == "NVIDIA L40S"
    assert marker["gpus"][0]["memory_total"].endswith("MiB")


def _parse_topology(text: str) -> tuple[list[str], list[list[str]]]:
    lines = text.splitlines()
    header = lines[0].split("\t")[1:]
    rows = [line.split("\t") for line in lines[1:] if line.startswith("GPU")]
    return header, rows


@pytest.mark.parametrize("count", [1, 2, 4, 8, 16])
def test_topology_is_square_and_symmetric(count):
    header, rows = _parse_topology(gpus.render_topology(GpuSpec("h100", count)))
    assert header[:count] == [f"GPU{i}" for i in range(count)]
    assert len(rows) == count
    for i, row in enumerate(rows):
        cells = [cell.strip() for cell in row[1: count + 1]]
        assert cells[i] == "X"
        for j in range(count):
            assert cells[j] == rows[j][1 + i].strip()


def test_h100_topology_is_nvswitch_split_over_two_numa_nodes():
    text = gpus.render_topology(GpuSpec("h100", 8))
    _, rows = _parse_topology(text)
    links = {cell.strip() for row in rows for cell in row[1:9]} - {"X"}
    assert links == {"NV18"}
    affinity = [[cell for cell in row[9:] if cell] for row in rows]
    assert [a[0] for a in affinity] == ["0-55,112-167"] * 4 + ["56-111,168-223"] * 4
    assert [a[1] for a in affinity] == ["0"] * 4 + ["1"] * 4
    assert "Legend:" in text and "NIC" not in text


def test_a100_topology_is_pcie_over_two_numa_nodes():
    _, rows = _parse_topology(gpus.render_topology(GpuSpec("a100", 4)))
    cells = [[cell.strip() for cell in row[1:5]] for row in rows]
    assert cells[0] == ["X", "NODE", "SYS", "SYS"]
    assert cells[2] == ["SYS", "SYS", "X", "NODE"]
    _, rows = _parse_topology(gpus.render_topology(GpuSpec("a100", 8)))
    assert [cell.strip() for cell in rows[0][1:9]] == ["X"] + ["NODE"] * 3 + ["SYS"] * 4
    _, rows = _parse_topology(gpus.render_topology(GpuSpec("h100", 2)))
    assert [[cell for cell in row[3:] if cell][1] for row in rows] == ["0", "1"]


def test_marker_carries_each_gpus_mig_table():
    expected = {"a100": "a100-40gb", "a100-80gb": "a100-80gb", "h100": "h100-80gb", "l40s": None}
    for model, mig_model in expected.items():
        spec = GpuSpec(model, 2)
        marker = gpus.marker(spec, "gpu01", gpus.render_query_xml(spec, "gpu01"))
        tables = [gpu["mig"] for gpu in marker["gpus"]]
        if mig_model is None:
            assert tables == [None, None]
            continue
        assert {table["model"] for table in tables} == {mig_model}
        table = tables[0]
        assert table["source"] and table["bar1_mib"] in (65536, 131072)
        profile = table["profiles"][0]
        assert set(profile) >= {"name", "profile_id", "placements", "placement_size", "max_instances",
                                "multiprocessors", "memory_mib", "copy_engines", "decoders", "encoders", "jpeg", "ofa"}
        assert isinstance(profile["placements"], list)  # JSON, read by the stand-in inside the node
    recorded = {model: gpus.marker(GpuSpec(model, 1), "n", gpus.render_query_xml(GpuSpec(model, 1), "n"))["gpus"][0]
                ["mig"]["recorded_mode"] for model in ("a100", "a100-80gb", "h100")}
    assert recorded == {"a100": "Disabled", "a100-80gb": "Enabled", "h100": "Disabled"}


def test_a100_80gb_model_renders_the_mig_capture_with_new_identities():
    text = gpus.render_query_xml(GpuSpec("a100-80gb", 4), "gpu02")
    root = ET.fromstring(text)
    elements = root.findall("gpu")
    assert {gpu.findtext("product_name") for gpu in elements} == {"NVIDIA A100-SXM4-80GB"}
    assert len({gpu.findtext("gpu_module_id") for gpu in elements}) == 4  # driver 535's name for module_id
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>')  # the capture's quirk is kept
    assert "MIG on" in gpus.MODELS["a100-80gb"].description
