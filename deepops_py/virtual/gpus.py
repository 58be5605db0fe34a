"""Simulated GPUs: models, ``--gpus MODEL:COUNT`` parsing, and the rendered outputs.

Each model is backed by real ``nvidia-smi`` captures (see fixtures/SOURCES.md).
For a node with COUNT GPUs the recorded ``<gpu>`` elements are trimmed or
repeated; each keeps its recorded content but gets its own minor number, PCI
address, UUID and serial, derived deterministically from the node name and
index so that re-running ``virtual up`` renders the same bytes.

The marker file also carries each GPU's MIG profile table, taken from the
collection's ``mig_profiles`` (the stand-in ``nvidia-smi`` runs inside the node
and cannot import the collection): null for a GPU without MIG.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import re
import uuid
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ansible_collections.deepops.cluster.plugins.module_utils import mig_profiles

from deepops_py.errors import InputError

FIXTURES_DIR = Path(__file__).resolve().parent / "fixtures"
MAX_GPUS_PER_NODE = 16
_UUID_NAMESPACE = uuid.UUID("6f1c1d2e-8a57-4c1b-9d0e-1d2f7e0a5b31")  # fixed: same node+index, same UUID


@dataclass(frozen=True)
class Model:
    """A GPU model the virtual cluster can simulate, and the captures behind it."""

    name: str  # the MODEL in --gpus MODEL:COUNT (Slurm's GRES type comes from the product name)
    description: str
    xml_fixture: str  # nvidia-smi -q -x capture
    topology_fixture: str  # nvidia-smi topo -m capture whose shape the topology follows


MODELS: dict[str, Model] = {
    model.name: model
    for model in (
        Model(
            "h100",
            "NVIDIA H100 80GB HBM3 (SXM5, NVSwitch): recorded 8-GPU HGX capture; topology from an 8x B200 NV18 board",
            "h100-sxm5-80gb-x8-driver580.xml",
            "topo-hgx-b200-x8-8nic-2numa-gke-a4.txt",
        ),
        Model(
            "a100",
            "NVIDIA A100-SXM4-40GB, MIG off (can be enabled): recorded 1-GPU capture repeated; PCIe topology "
            "over 2 NUMA nodes",
            "a100-sxm4-40gb-x1-nomig-driver570.xml",
            "topo-pcie-rtx6000ada-x4-4nic-2numa-asus-esc8000a-e12.txt",
        ),
        Model(
            "a100-80gb",
            "NVIDIA A100-SXM4-80GB, MIG on, no instances yet: recorded 1-GPU capture repeated; PCIe topology "
            "over 2 NUMA nodes",
            "a100-sxm4-80gb-mig-4x1g20gb-driver535.xml",
            "topo-pcie-rtx6000ada-x4-4nic-2numa-asus-esc8000a-e12.txt",
        ),
        Model(
            "l40s",
            "NVIDIA L40S 48GB (PCIe): recorded 1-GPU capture repeated; PCIe topology over 2 NUMA nodes",
            "l40s-x1-driver595.xml",
            "topo-pcie-rtx6000ada-x4-4nic-2numa-asus-esc8000a-e12.txt",
        ),
    )
}


@dataclass(frozen=True)
class GpuSpec:
    """One node's simulated GPUs: ``h100:8``."""

    model: str
    count: int

    def __str__(self) -> str:
        return f"{self.model}:{self.count}"

    @classmethod
    def parse(cls, text: str) -> GpuSpec:
        model, sep, count_text = text.strip().lower().partition(":")
        if not sep or not model or not count_text:
            raise InputError(f"--gpus {text!r}: expected MODEL:COUNT, for example h100:8")
        if model not in MODELS:
            close = difflib.get_close_matches(model, MODELS, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise InputError(f"--gpus {text!r}: unknown GPU model {model!r}.{hint} Known: {', '.join(sorted(MODELS))}")
        if not count_text.isdigit() or not 1 <= int(count_text) <= MAX_GPUS_PER_NODE:
            raise InputError(f"--gpus {text!r}: COUNT must be a whole number from 1 to {MAX_GPUS_PER_NODE}")
        return cls(model, int(count_text))


# --------------------------------------------------------------------------
# nvidia-smi -q -x

_GPU_BLOCK = re.compile(r'^([ \t]*)<gpu id="[^"]*">.*?^\1</gpu>[ \t]*\n', re.S | re.M)


@cache
def _fixture(name: str) -> str:
    return (FIXTURES_DIR / name).read_text()


def _tag_text(block: str, tag: str) -> str:
    found = re.search(rf"<{tag}>([^<]*)</{tag}>", block)
    return found.group(1).strip() if found else ""


def _set_tag(block: str, tag: str, value: str) -> str:
    return re.sub(rf"<{tag}>[^<]*</{tag}>", f"<{tag}>{value}</{tag}>", block, count=1)


def _bus_numbers(recorded: list[int], count: int) -> list[int]:
    """Recorded PCI bus numbers first, then free ones spaced like a real board."""
    buses = list(recorded[:count])
    candidate = max(recorded)
    while len(buses) < count:
        candidate = (candidate + 0x11) % 0xF0 or 0x11
        if candidate not in buses and candidate not in recorded:
            buses.append(candidate)
    return buses


def gpu_uuid(node: str, index: int) -> str:
    return f"GPU-{uuid.uuid5(_UUID_NAMESPACE, f'{node}/{index}')}"


def _serial(node: str, index: int) -> str:
    return str(int(hashlib.sha256(f"{node}/{index}".encode()).hexdigest()[:12], 16) % 10**13).zfill(13)


def render_query_xml(spec: GpuSpec, node: str) -> str:
    """``nvidia-smi -q -x`` for NODE's simulated GPUs, marked as simulated."""
    model = MODELS[spec.model]
    text = _fixture(model.xml_fixture)
    blocks = list(_GPU_BLOCK.finditer(text))
    header, footer = text[: blocks[0].start()], text[blocks[-1].end():]
    separator = text[blocks[0].end(): blocks[1].start()] if len(blocks) > 1 else "\n"
    recorded_buses = [int(_tag_text(block.group(0), "pci_bus"), 16) for block in blocks]
    buses = _bus_numbers(recorded_buses, spec.count)
    used_modules: set[str] = set()
    rendered = []
    for index in range(spec.count):
        source = blocks[index % len(blocks)].group(0)
        old_bus_id = _tag_text(source, "pci_bus_id")
        bus_id = f"{old_bus_id[:9]}{buses[index]:02X}{old_bus_id[11:]}"
        module_tag = "module_id" if "<module_id>" in source else "gpu_module_id"  # driver 535 names it so
        module = _tag_text(source, module_tag)
        if index >= len(blocks) or module in used_modules:
            module = str(next(n for n in range(1, 10 * MAX_GPUS_PER_NODE) if str(n) not in used_modules))
        used_modules.add(module)
        block = source.replace(f'<gpu id="{old_bus_id}">', f'<gpu id="{bus_id}">', 1)
        block = _set_tag(block, "pci_bus_id", bus_id)
        block = _set_tag(block, "pci_bus", f"{buses[index]:02X}")
        block = _set_tag(block, "minor_number", str(index))
        block = _set_tag(block, "uuid", gpu_uuid(node, index))
        block = _set_tag(block, "serial", _serial(node, index))
        block = _set_tag(block, module_tag, module)
        rendered.append(block)
    header = _set_tag(header, "attached_gpus", str(spec.count))
    comment = (
        f"\t<!-- SIMULATED GPUs: deepops virtual cluster node {node}, {spec}. Every GPU element is a real"
        f" recorded capture ({model.xml_fixture}) with its identity (minor number, PCI address, UUID, serial,"
        " module id) rewritten; see /etc/deepops/simulated-gpus.json. No GPU is present. -->\n"
    )
    header = header.replace("<nvidia_smi_log>\n", "<nvidia_smi_log>\n" + comment, 1)
    return header + separator.join(rendered) + footer


def gpus_from_xml(xml_text: str) -> list[dict]:
    """Per-GPU facts of a rendered XML, for the marker file and the stand-in's -L/--query-gpu/-mig."""
    root = ET.fromstring(xml_text)
    gpus = []
    for gpu in root.findall("gpu"):
        gpus.append({
            "index": int(gpu.findtext("minor_number", "0")),
            "name": (gpu.findtext("product_name") or "").strip(),
            "uuid": (gpu.findtext("uuid") or "").strip(),
            "pci_bus_id": (gpu.findtext("pci/pci_bus_id") or "").strip(),
            "memory_total": (gpu.findtext("fb_memory_usage/total") or "").strip(),
            "serial": (gpu.findtext("serial") or "").strip(),
            "persistence_mode": (gpu.findtext("persistence_mode") or "").strip(),
            "mig": mig_table(gpu),
        })
    return gpus


def mig_model(name: str) -> mig_profiles.MigModel | None:
    """The MIG table of the simulated model NAME (by its capture's product name); None without MIG."""
    return mig_profiles.model_for(product_name=_tag_text(_fixture(MODELS[name].xml_fixture), "product_name"))


def mig_table(gpu: ET.Element) -> dict | None:
    """What the stand-in needs to simulate MIG on one recorded GPU: its model's profile table
    (``mig_profiles``), the recorded MIG mode it boots with and its BAR1 size; None without MIG."""
    model = mig_profiles.model_for(product_name=(gpu.findtext("product_name") or "").strip())
    if model is None:
        return None
    bar1 = re.match(r"\s*(\d+)", gpu.findtext("bar1_memory_usage/total") or "")
    return {
        "model": model.key,
        "label": model.label,
        "source": model.source,
        "recorded_mode": "Enabled" if (gpu.findtext("mig_mode/current_mig") or "").strip() == "Enabled" else "Disabled",
        "bar1_mib": int(bar1.group(1)) if bar1 else None,
        "compute_slices": model.compute_slices,
        "memory_slices": model.memory_slices,
        "profiles": [
            {**dataclasses.asdict(profile), "placements": list(profile.placements)} for profile in model.profiles
        ],
    }


def marker(spec: GpuSpec, node: str, xml_text: str) -> dict:
    """The content of /etc/deepops/simulated-gpus.json on NODE."""
    root = ET.fromstring(xml_text)
    model = MODELS[spec.model]
    return {
        "simulated": True,
        "note": "These GPUs are simulated by the deepops virtual cluster: nvidia-smi is a stand-in that prints "
                "recorded captures of real GPUs, and /dev/nvidia* are device nodes without a driver.",
        "node": node,
        "model": spec.model,
        "count": spec.count,
        "description": model.description,
        "xml_fixture": model.xml_fixture,
        "topology_fixture": model.topology_fixture,
        "driver_version": (root.findtext("driver_version") or "").strip(),
        "cuda_version": (root.findtext("cuda_version") or "").strip(),
        "gpus": gpus_from_xml(xml_text),
    }


# --------------------------------------------------------------------------
# nvidia-smi topo -m


@dataclass(frozen=True)
class _RecordedTopology:
    links: list[list[str]]  # GPU x GPU, "X" on the diagonal
    cpu_affinity: list[str]
    numa_affinity: list[str]
    legend: str


@cache
def _recorded_topology(name: str) -> _RecordedTopology:
    lines = _fixture(name).splitlines()
    header = lines[0].split()
    gpu_columns = sum(1 for token in header if re.fullmatch(r"GPU\d+", token))
    other_columns = header.index("CPU") - gpu_columns  # NIC columns; not simulated
    links, cpus, numas = [], [], []
    for line in lines[1:]:
        tokens = line.split()
        if not tokens or not re.fullmatch(r"GPU\d+", tokens[0]):
            continue
        links.append(tokens[1: 1 + gpu_columns])
        rest = tokens[1 + gpu_columns + other_columns:]
        cpus.append(rest[0])
        numas.append(rest[1])
    legend_start = next(i for i, line in enumerate(lines) if line.strip() == "Legend:")
    legend_end = next((i for i, line in enumerate(lines) if line.strip() == "NIC Legend:"), len(lines))
    legend = "\n".join(lines[legend_start:legend_end]).rstrip()
    return _RecordedTopology(links, cpus, numas, legend)


def _same_place_link(recorded: _RecordedTopology, row: int) -> str:
    """How two GPUs standing in for the same recorded GPU are linked: like its same-NUMA peers."""
    peers = [
        recorded.links[row][col] for col in range(len(recorded.links))
        if col != row and recorded.numa_affinity[col] == recorded.numa_affinity[row]
    ] or [recorded.links[row][col] for col in range(len(recorded.links)) if col != row]
    return Counter(peers).most_common(1)[0][0] if peers else "SYS"


def render_topology(spec: GpuSpec) -> str:
    """``nvidia-smi topo -m`` for COUNT GPUs of MODEL (GPU rows and columns only)."""
    recorded = _recorded_topology(MODELS[spec.model].topology_fixture)
    recorded_count = len(recorded.links)
    place = [index * recorded_count // spec.count for index in range(spec.count)]
    lines = ["\t" + "\t".join(f"GPU{i}" for i in range(spec.count)) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]
    for i in range(spec.count):
        cells = []
        for j in range(spec.count):
            if i == j:
                cells.append(" X ")
            elif place[i] == place[j]:
                cells.append(_same_place_link(recorded, place[i]))
            else:
                cells.append(recorded.links[place[i]][place[j]])
        row = recorded.cpu_affinity[place[i]], recorded.numa_affinity[place[i]], "N/A"
        lines.append(f"GPU{i}\t" + "\t".join(cells) + "\t" + "\t\t".join(row))
    return "\n".join(lines) + "\n\n" + recorded.legend + "\n"
