"""Parse ``nvidia-smi -q -x`` and ``nvidia-smi topo -m`` output into plain facts.

Pure functions with no Ansible imports: the ``nvidia_gpu_facts`` module ships
this file to hosts through Ansible's module_utils mechanism, and unit tests
import it directly. It must run on the hosts' Python (3.10 on Ubuntu 22.04).

Real captures differ across driver generations (element names, indentation,
values wrapped across lines, trimmed GPU lists), so every lookup tolerates a
missing element and every text value is trimmed.
"""

from __future__ import annotations

import copy
import math
import re
import xml.etree.ElementTree as ET
from typing import Any

__all__ = [
    "GPU_TYPE_PATTERNS",
    "NvidiaSmiParseError",
    "absent_facts",
    "build_facts",
    "gpu_facts",
    "MIG_CAPS_DIR",
    "MIG_MINORS_PATH",
    "infer_mig_profile",
    "mig_active",
    "normalize_gpu_type",
    "normalize_pci_bus_id",
    "parse_cpu_list",
    "parse_mig_minors",
    "parse_topo",
    "parse_xml",
]


class NvidiaSmiParseError(ValueError):
    """The output is not what nvidia-smi prints; the message says why."""


# Product name pattern -> Slurm GRES type. Order matters: more specific
# patterns (GH200, L40S) come before the ones they contain (H200, L40).
# The lookarounds stop "A10" matching "A100" and "H200" matching "GH200".
GPU_TYPE_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"GB300", "gb300"),
    (r"GB200", "gb200"),
    (r"B300", "b300"),
    (r"B200", "b200"),
    (r"B100", "b100"),
    (r"GH200", "gh200"),
    (r"H200", "h200"),
    (r"H100", "h100"),
    (r"H800", "h800"),
    (r"H20", "h20"),
    (r"A100", "a100"),
    (r"A800", "a800"),
    (r"A40", "a40"),
    (r"A30", "a30"),
    (r"A16", "a16"),
    (r"A10G", "a10g"),
    (r"A10", "a10"),
    (r"A2", "a2"),
    (r"L40S", "l40s"),
    (r"L40", "l40"),
    (r"L20", "l20"),
    (r"L4", "l4"),
    (r"RTX\s*PRO\s*6000", "rtxpro6000"),
    (r"RTX\s*6000\s*Ada", "rtx6000ada"),
    (r"RTX\s*A6000", "rtxa6000"),
    (r"RTX\s*A5000", "rtxa5000"),
    (r"RTX\s*A4000", "rtxa4000"),
    (r"V100S", "v100s"),
    (r"V100", "v100"),
    (r"P100", "p100"),
    (r"P40", "p40"),
    (r"T4", "t4"),
)

_COMPILED_TYPE_PATTERNS = tuple(
    (re.compile(r"(?<![A-Za-z0-9])" + pattern + r"(?![A-Za-z0-9])", re.IGNORECASE), gpu_type)
    for pattern, gpu_type in GPU_TYPE_PATTERNS
)

# Values nvidia-smi prints when it has nothing to report.
_MISSING_VALUES = frozenset(
    {"", "N/A", "[N/A]", "Not Supported", "[Not Supported]", "Unknown Error", "None"}
)

# MIG compute slices ("Ng") by SM count of a MIG device, per GPU family: the
# fallback for models without a table in mig_profiles.py. Hopper's 3g has 60
# SMs, not 3 x 16, and its 1g with two memory slices (1g.20gb, 1g.24gb,
# 1g.35gb) has 26, so this cannot be a plain division.
_MIG_SLICES_BY_SM: dict[str, dict[int, int]] = {
    "ampere": {14: 1, 28: 2, 42: 3, 56: 4, 98: 7},
    "hopper": {16: 1, 26: 1, 32: 2, 60: 3, 64: 4, 132: 7},
}
_MIG_FAMILY_BY_TYPE = {
    "a100": "ampere",
    "a800": "ampere",
    "a30": "ampere",
    "h100": "hopper",
    "h800": "hopper",
    "h200": "hopper",
    "gh200": "hopper",
}
# Marketed memory sizes that the product name does not carry (MIG profile
# names are eighths of this number, e.g. H200: 1g.18gb = 141 / 8).
_NOMINAL_GB_BY_TYPE = {"h200": 141}

# Where the driver lists the device-file minor of every MIG capability
# ("gpu<minor>/gi<G>/access 120"), and where their device nodes are (NVIDIA
# MIG User Guide, "Device Nodes and Capabilities"). <minor> is the parent
# GPU's minor number, the N of /dev/nvidiaN.
MIG_MINORS_PATH = "/proc/driver/nvidia-caps/mig-minors"
MIG_CAPS_DIR = "/dev/nvidia-caps"

_PCI_BUS_ID = re.compile(
    r"^(?:([0-9A-Fa-f]{1,8}):)?([0-9A-Fa-f]{1,2}):([0-9A-Fa-f]{1,2})\.([0-7])$"
)
_LEADING_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?")
_NVLINK_CELL = re.compile(r"^NV(\d+)$")
_GPU_LABEL = re.compile(r"^GPU(\d+)$")


# --------------------------------------------------------------------------
# Small value helpers
# --------------------------------------------------------------------------


def _text(element: ET.Element | None, path: str) -> str | None:
    """Trimmed text at ``path`` under ``element``; None when absent or empty."""
    if element is None:
        return None
    found = element.find(path)
    if found is None or found.text is None:
        return None
    value = " ".join(found.text.split())  # one capture wraps a value across lines
    return value or None


def _value(element: ET.Element | None, path: str) -> str | None:
    """Like ``_text`` but maps nvidia-smi's placeholders (N/A, ...) to None."""
    value = _text(element, path)
    return None if value is None or value in _MISSING_VALUES else value


def _number(element: ET.Element | None, path: str) -> float | None:
    """Leading number of a value such as ``81559 MiB`` or ``700.00 W``."""
    value = _value(element, path)
    match = _LEADING_NUMBER.match(value) if value else None
    return float(match.group(0)) if match else None


def _int(element: ET.Element | None, path: str) -> int | None:
    number = _number(element, path)
    return int(number) if number is not None else None


def _first_number(element: ET.Element | None, paths: tuple[str, ...]) -> float | None:
    for path in paths:
        number = _number(element, path)
        if number is not None:
            return number
    return None


def normalize_pci_bus_id(value: str | None) -> str | None:
    """Canonical nvidia-smi form ``DDDDDDDD:BB:DD.F`` (upper-case hex).

    Accepts the 4-digit domain form of lspci/sysfs and a missing domain.
    Returns None for values that are not PCI addresses.
    """
    if not value:
        return None
    match = _PCI_BUS_ID.match(value.strip())
    if not match:
        return None
    domain, bus, device, function = match.groups()
    return "{:08X}:{:02X}:{:02X}.{}".format(
        int(domain or "0", 16), int(bus, 16), int(device, 16), function
    )


def normalize_gpu_type(product_name: str | None) -> str:
    """Short lower-case Slurm GRES type for a product name (``h100``, ``l40s``).

    Unknown models get ``nvidia_<sanitized name>`` so the result is always a
    valid GRES type and never collides with a known one.
    """
    name = product_name or ""
    for pattern, gpu_type in _COMPILED_TYPE_PATTERNS:
        if pattern.search(name):
            return gpu_type
    stripped = re.sub(r"^\s*nvidia\s*", "", name, flags=re.IGNORECASE)
    slug = re.sub(r"[^a-z0-9]+", "_", stripped.lower()).strip("_")
    return "nvidia_" + (slug or "unknown")


def parse_cpu_list(spec: str | None) -> list[int]:
    """Expand a Linux/Slurm CPU list such as ``0-55,112-167`` into ints."""
    if not spec or spec in _MISSING_VALUES:
        return []
    cpus: list[int] = []
    for raw_part in spec.split(","):
        part = raw_part.strip()
        if not part:
            continue
        low, _sep, high = part.partition("-")
        try:
            first, last = int(low), int(high or low)
        except ValueError as exc:
            raise NvidiaSmiParseError(f"CPU affinity {spec!r} is not a CPU list") from exc
        cpus.extend(range(first, last + 1))
    return cpus


# --------------------------------------------------------------------------
# nvidia-smi -q -x
# --------------------------------------------------------------------------


def parse_xml(text: str) -> dict[str, Any]:
    """Parse ``nvidia-smi -q -x`` into driver-level values and a GPU list."""
    if not text or not text.strip():
        raise NvidiaSmiParseError("nvidia-smi -q -x printed nothing")
    # Driver warnings (e.g. "WARNING: infoROM is corrupted") can precede the XML.
    start = min(
        (i for i in (text.find("<?xml"), text.find("<nvidia_smi_log")) if i >= 0), default=0
    )
    try:
        root = ET.fromstring(text[start:].strip())
    except ET.ParseError as exc:
        raise NvidiaSmiParseError(f"nvidia-smi -q -x printed malformed XML: {exc}") from exc
    if root.tag != "nvidia_smi_log":
        raise NvidiaSmiParseError(f"expected <nvidia_smi_log> as the XML root, found <{root.tag}>")
    return {
        "driver_version": _value(root, "driver_version"),
        "cuda_version": _value(root, "cuda_version"),
        "attached_gpus": _int(root, "attached_gpus"),
        "gpus": [_parse_gpu(index, gpu) for index, gpu in enumerate(root.findall("gpu"))],
    }


def _parse_gpu(index: int, gpu: ET.Element) -> dict[str, Any]:
    product_name = _value(gpu, "product_name")
    gpu_type = normalize_gpu_type(product_name)
    minor = _int(gpu, "minor_number")
    memory_total = _int(gpu, "fb_memory_usage/total")
    bus_id = normalize_pci_bus_id(_value(gpu, "pci/pci_bus_id") or gpu.get("id"))
    return {
        "index": index,
        "minor_number": minor,
        "product_name": product_name,
        "type": gpu_type,
        "architecture": _value(gpu, "product_architecture"),
        "uuid": _value(gpu, "uuid"),
        "serial": _value(gpu, "serial"),
        "pci_bus_id": bus_id,
        "device": f"/dev/nvidia{minor}" if minor is not None else None,
        "memory_total_mib": memory_total,
        "numa_node": None,
        "cpu_affinity": None,
        "cpu_list": [],
        "cpu_count": 0,
        "mig_mode": {
            "current": _text(gpu, "mig_mode/current_mig") or "N/A",
            "pending": _text(gpu, "mig_mode/pending_mig") or "N/A",
        },
        "mig_devices": [
            _parse_mig_device(mig, product_name, gpu_type, memory_total)
            for mig in gpu.findall("mig_devices/mig_device")
        ],
        "power_limits_w": _parse_power_limits(gpu),
        "fabric_state": _value(gpu, "fabric/state"),
        "links": None,
    }


def _parse_power_limits(gpu: ET.Element) -> dict[str, float | None]:
    # v12+ drivers use <gpu_power_readings>/<current_power_limit>; v11 used
    # <power_readings> with <enforced_power_limit> and <power_limit>.
    readings = gpu.find("gpu_power_readings")
    if readings is None:
        readings = gpu.find("power_readings")
    return {
        "current": _first_number(
            readings, ("current_power_limit", "enforced_power_limit", "power_limit")
        ),
        "default": _number(readings, "default_power_limit"),
        "min": _number(readings, "min_power_limit"),
        "max": _number(readings, "max_power_limit"),
    }


def _parse_mig_device(
    mig: ET.Element, product_name: str | None, gpu_type: str, parent_memory_mib: int | None
) -> dict[str, Any]:
    memory = _int(mig, "fb_memory_usage/total")
    sm_count = _int(mig, "device_attributes/shared/multiprocessor_count")
    engines = {
        name: _int(mig, f"device_attributes/shared/{element}")
        for name, element in (
            ("decoders", "decoder_count"),
            ("encoders", "encoder_count"),
            ("jpeg", "jpg_count"),
            ("ofa", "ofa_count"),
        )
    }
    return {
        "index": _int(mig, "index"),
        "gpu_instance_id": _int(mig, "gpu_instance_id"),
        "compute_instance_id": _int(mig, "compute_instance_id"),
        "memory_mib": memory,
        "multiprocessor_count": sm_count,
        "profile": infer_mig_profile(
            gpu_type, product_name, parent_memory_mib, sm_count, memory, engines=engines
        ),
        "device_files": None,  # filled in from the MIG minors file (build_facts)
    }


def infer_mig_profile(
    gpu_type: str,
    product_name: str | None,
    parent_memory_mib: int | None,
    sm_count: int | None,
    memory_mib: int | None,
    engines: dict[str, int | None] | None = None,
) -> str | None:
    """MIG profile name (``1g.20gb``) from a MIG device's SMs and memory.

    ``-q -x`` never names the profile. For a model in the MIG profile table
    (``mig_profiles.MODELS``) the profile is the table's: the one with the
    device's SM count and the nearest memory size, told apart from its
    ``+me`` twin by the media engines when ``engines`` gives them. Other
    models: compute slices from a per-family SM table, memory counted in
    eighths of the parent GPU and named after the marketed size, as NVIDIA's
    profile names are. None when unknown (a compute instance smaller than
    its GPU instance is never named).
    """
    # Imported here: mig_profiles imports this module (normalize_gpu_type).
    from ansible_collections.deepops.cluster.plugins.module_utils import mig_profiles  # pylint: disable=import-outside-toplevel

    model = mig_profiles.model_for(product_name=product_name, gpu_type=None if product_name else gpu_type)
    if model is not None:
        return _table_profile(model, sm_count, memory_mib, engines or {})
    slices = _MIG_SLICES_BY_SM.get(_MIG_FAMILY_BY_TYPE.get(gpu_type, ""), {}).get(sm_count or 0)
    nominal_gb = _nominal_memory_gb(gpu_type, product_name, parent_memory_mib)
    if not slices or not nominal_gb or not memory_mib or not parent_memory_mib:
        return None
    eighths = min(8, max(1, round(memory_mib / parent_memory_mib * 8)))
    memory_gb = math.floor(nominal_gb * eighths / 8 + 0.5)  # half up: H200 3g is 70.5 -> 71gb
    return f"{slices}g.{memory_gb}gb"


def _table_profile(
    model: Any, sm_count: int | None, memory_mib: int | None, engines: dict[str, int | None]
) -> str | None:
    """The profile of ``model`` (a ``mig_profiles.MigModel``) that a MIG device is, or None."""
    if not sm_count or not memory_mib:
        return None
    candidates = [profile for profile in model.profiles if profile.multiprocessors == sm_count]
    if not candidates:
        return None
    nearest = min(abs(profile.memory_mib - memory_mib) for profile in candidates)
    candidates = [profile for profile in candidates if abs(profile.memory_mib - memory_mib) == nearest]
    # Sizes move by a quarter GiB between drivers; half a memory slice apart is another profile.
    if nearest > candidates[0].memory_mib / candidates[0].memory_slices / 2:
        return None
    known = {name: count for name, count in engines.items() if count is not None}
    if known:
        matching = [
            profile for profile in candidates
            if all(getattr(profile, name) == count for name, count in known.items())
        ]
        candidates = matching or candidates
    # Still two (no engine counts): the plain profile, which a +me one only adds engines to.
    return min(candidates, key=lambda profile: (len(profile.name), profile.name)).name


def _nominal_memory_gb(
    gpu_type: str, product_name: str | None, memory_mib: int | None
) -> int | None:
    if not memory_mib:
        return None
    measured_gb = memory_mib / 1024
    named = re.search(r"(\d+)\s*GB", product_name or "", re.IGNORECASE)
    # "GH200 480GB" counts CPU memory too: trust the name only near the measure.
    if named and abs(int(named.group(1)) - measured_gb) <= 0.1 * measured_gb:
        return int(named.group(1))
    return _NOMINAL_GB_BY_TYPE.get(gpu_type) or round(measured_gb)


# --------------------------------------------------------------------------
# nvidia-smi topo -m
# --------------------------------------------------------------------------


def parse_topo(text: str) -> dict[str, Any]:
    """Parse the ``nvidia-smi topo -m`` matrix.

    Splits on any whitespace: pasted captures have tabs turned into spaces and
    the ``GPU NUMA ID`` column run into ``NUMA Affinity``. The legacy format
    (DGX-1 era) has no NUMA column, so ``numa_node`` stays None there.
    """
    lines = (text or "").splitlines()
    header_at = next((i for i, line in enumerate(lines) if "CPU Affinity" in line), None)
    if header_at is None:
        raise NvidiaSmiParseError(
            "nvidia-smi topo -m output has no header line with 'CPU Affinity'"
        )
    header = lines[header_at]
    columns = header.split("CPU Affinity", 1)[0].split()
    has_numa = "NUMA Affinity" in header
    rows = _topo_gpu_rows(lines[header_at + 1 :], columns, has_numa)
    legend = _nic_legend(lines)
    nics = [legend.get(label, label) for label in columns if not _GPU_LABEL.match(label)]
    return {
        "format": "numa" if has_numa else "legacy",
        "columns": columns,
        "nics": nics,
        "gpus": rows,
    }


def _topo_gpu_rows(lines: list[str], columns: list[str], has_numa: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    gpu_columns = [i for i, label in enumerate(columns) if _GPU_LABEL.match(label)]
    for line in lines:
        tokens = line.split()
        if not tokens:
            continue
        if tokens[0].startswith("Legend"):
            break
        label = _GPU_LABEL.match(tokens[0])
        if not label:
            continue  # NIC rows
        cells = tokens[1 : 1 + len(columns)]
        if len(cells) < len(columns):
            raise NvidiaSmiParseError(
                f"topo row {tokens[0]} has {len(cells)} cells, the header has {len(columns)}"
            )
        rest = tokens[1 + len(columns) :]
        affinity = rest[0] if rest and rest[0] not in _MISSING_VALUES else None
        numa = rest[1] if has_numa and len(rest) > 1 else None
        rows.append(
            {
                "index": int(label.group(1)),
                # No zip(strict=...): hosts may run Python 3.8/3.9; lengths match (sliced).
                "connections": dict(zip(columns, cells)),
                "links": [_slurm_link(cells[i]) for i in gpu_columns],
                "cpu_affinity": affinity,
                "numa_node": int(numa) if numa and numa.isdigit() else None,
            }
        )
    return rows


def _slurm_link(cell: str) -> int:
    """gres.conf ``Links=`` value: -1 self, N for NV<N>, 0 for PCIe paths."""
    if cell == "X":
        return -1
    match = _NVLINK_CELL.match(cell)
    return int(match.group(1)) if match else 0


def _nic_legend(lines: list[str]) -> dict[str, str]:
    legend: dict[str, str] = {}
    for line in lines:
        match = re.match(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$", line)
        if match:
            legend[match.group(1)] = match.group(2)
    return legend


# --------------------------------------------------------------------------
# Facts
# --------------------------------------------------------------------------


def absent_facts() -> dict[str, Any]:
    """Facts for a host without nvidia-smi: no GPUs, not an error."""
    return _summary(
        {"driver_version": None, "cuda_version": None, "attached_gpus": None, "gpus": []},
        topology=None,
        present=False,
    )


def build_facts(
    xml_facts: dict[str, Any],
    topo: dict[str, Any] | None = None,
    mig_minors: dict[str, int] | None = None,
    mig_minors_path: str | None = None,
) -> dict[str, Any]:
    """Merge parsed XML, topo output and the MIG minors; topo rows map to GPUs by index.

    ``mig_minors`` is ``parse_mig_minors`` of the driver's MIG minors file
    (at ``mig_minors_path``), or None when it was not read: then the MIG
    devices' capability device files are unknown, and ``mig_problems`` says so.
    """
    merged = copy.deepcopy(xml_facts)  # callers keep their input unchanged
    rows = {row["index"]: row for row in (topo or {}).get("gpus", [])}
    for gpu in merged["gpus"]:
        row = rows.get(gpu["index"])
        if row is not None:
            _apply_topo_row(gpu, row)
        for mig in gpu["mig_devices"]:
            mig["device_files"] = _mig_device_files(gpu, mig, mig_minors)
    facts = _summary(merged, topology=topo, present=True)
    facts["mig_minors_path"] = mig_minors_path
    facts["mig_problems"] = _mig_problems(merged["gpus"], mig_minors, mig_minors_path)
    return facts


def gpu_facts(
    xml_text: str, topo_text: str | None = None, mig_minors_text: str | None = None
) -> dict[str, Any]:
    """Facts straight from the command outputs and the MIG minors file (topo and minors optional)."""
    topo = parse_topo(topo_text) if topo_text else None
    minors = parse_mig_minors(mig_minors_text) if mig_minors_text is not None else None
    return build_facts(parse_xml(xml_text), topo, minors)


def parse_mig_minors(text: str) -> dict[str, int]:
    """The driver's MIG minors file -> ``{"gpu0/gi1/access": 12, "config": 1, ...}``.

    Lines are ``<capability> <minor>``; any other line is left out.
    """
    minors: dict[str, int] = {}
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1].isdigit():
            minors[fields[0]] = int(fields[1])
    return minors


def mig_active(gpu: dict[str, Any]) -> bool:
    """Whether the GPU is in MIG mode now: then its MIG devices, not the GPU, are what jobs get."""
    return (gpu.get("mig_mode") or {}).get("current") == "Enabled"


def _mig_device_files(
    gpu: dict[str, Any], mig: dict[str, Any], minors: dict[str, int] | None
) -> list[str] | None:
    """The parent GPU's device and the GPU- and compute-instance capability devices of a MIG device.

    None when any of them is unknown: no minors file, no minor number, or
    no line for the instance in the file.
    """
    gpu_minor, gi, ci = gpu.get("minor_number"), mig.get("gpu_instance_id"), mig.get("compute_instance_id")
    if minors is None or gpu_minor is None or gi is None or ci is None or not gpu.get("device"):
        return None
    gi_minor = minors.get(f"gpu{gpu_minor}/gi{gi}/access")
    ci_minor = minors.get(f"gpu{gpu_minor}/gi{gi}/ci{ci}/access")
    if gi_minor is None or ci_minor is None:
        return None
    return [
        gpu["device"],
        f"{MIG_CAPS_DIR}/nvidia-cap{gi_minor}",
        f"{MIG_CAPS_DIR}/nvidia-cap{ci_minor}",
    ]


def _mig_problems(
    gpus: list[dict[str, Any]], minors: dict[str, int] | None, path: str | None
) -> list[str]:
    """Why the MIG devices in use cannot all be given to Slurm (unnamed profile, unknown device files)."""
    problems: list[str] = []
    unread: list[str] = []  # GPUs whose MIG devices wait for the minors file
    where = path or MIG_MINORS_PATH
    for gpu in gpus:
        if not mig_active(gpu):
            continue
        for mig in gpu["mig_devices"]:
            name = (
                f"GPU {gpu['index']} MIG device {mig['index']} "
                f"(GPU instance {mig['gpu_instance_id']}, compute instance {mig['compute_instance_id']})"
            )
            if mig["profile"] is None:
                problems.append(
                    f"{name}: no MIG profile has {mig['multiprocessor_count']} SMs and "
                    f"{mig['memory_mib']} MiB on a {gpu['product_name']}"
                )
            if mig["device_files"] is not None:
                continue
            if minors is None:
                if str(gpu["index"]) not in unread:
                    unread.append(str(gpu["index"]))
            elif gpu.get("minor_number") is None:
                problems.append(f"{name}: capability device files unknown, nvidia-smi gives the GPU no minor number")
            else:
                problems.append(
                    f"{name}: capability device files unknown, {where} has no line for "
                    f"gpu{gpu['minor_number']}/gi{mig['gpu_instance_id']}/ci{mig['compute_instance_id']}"
                )
    if unread:
        problems.append(
            f"the MIG minors file {where} was not read, so the capability device files of the MIG "
            f"devices on GPU {', '.join(unread)} are unknown"
        )
    return problems


def _apply_topo_row(gpu: dict[str, Any], row: dict[str, Any]) -> None:
    cpus = parse_cpu_list(row["cpu_affinity"])
    gpu.update(
        numa_node=row["numa_node"],
        cpu_affinity=row["cpu_affinity"],
        cpu_list=cpus,
        cpu_count=len(cpus),
        links=row["links"],
    )


def _gres_by_type(gpus: list[dict[str, Any]]) -> dict[str, int]:
    """Slurm GRES per type: a GPU in MIG mode counts its MIG devices by profile, any other GPU itself."""
    counts: dict[str, int] = {}
    for gpu in gpus:
        if mig_active(gpu):
            kinds = [mig["profile"] for mig in gpu["mig_devices"] if mig["profile"] is not None]
        else:
            kinds = [gpu["type"]]
        for kind in kinds:
            counts[kind] = counts.get(kind, 0) + 1
    return counts


def _summary(
    parsed: dict[str, Any], topology: dict[str, Any] | None, present: bool
) -> dict[str, Any]:
    gpus = parsed["gpus"]
    by_type: dict[str, int] = {}
    for gpu in gpus:
        by_type[gpu["type"]] = by_type.get(gpu["type"], 0) + 1
    fabric_completed = any(gpu["fabric_state"] == "Completed" for gpu in gpus)
    mig_devices = [mig for gpu in gpus if mig_active(gpu) for mig in gpu["mig_devices"]]
    return {
        "present": present,
        "driver_version": parsed["driver_version"],
        "cuda_version": parsed["cuda_version"],
        "count": len(gpus),
        "gpu_count": len(gpus),
        "attached_gpus": parsed["attached_gpus"],
        "types": sorted(by_type),
        "by_type": by_type,
        "gres_by_type": _gres_by_type(gpus),
        "mig_enabled": any(mig_active(gpu) for gpu in gpus),
        "mig_device_count": len(mig_devices),
        "mig_device_files_known": all(mig["device_files"] is not None for mig in mig_devices),
        "mig_minors_path": None,
        "mig_problems": [],
        "nvlink": _topo_has_nvlink(topology),
        "nvswitch": fabric_completed or _topo_all_pairs_same_nvlink(topology),
        "topology": _topology_summary(topology),
        "gpus": gpus,
    }


def _topo_has_nvlink(topology: dict[str, Any] | None) -> bool:
    return any(link > 0 for row in (topology or {}).get("gpus", []) for link in row["links"])


def _topo_all_pairs_same_nvlink(topology: dict[str, Any] | None) -> bool:
    """Tell whether topo shows the HGX/DGX NVSwitch shape: all GPU pairs on one NV#.

    Needs 8+ GPUs: 4-GPU HGX boards link every pair directly, without an
    NVSwitch (and without Fabric Manager).
    """
    rows = (topology or {}).get("gpus", [])
    if len(rows) < 8:
        return False
    links = {link for row in rows for link in row["links"] if link != -1}
    return len(links) == 1 and links.pop() > 0


def _topology_summary(topology: dict[str, Any] | None) -> dict[str, Any]:
    if topology is None:
        return {"available": False, "format": None, "gpu_rows": 0, "nics": []}
    return {
        "available": True,
        "format": topology["format"],
        "gpu_rows": len(topology["gpus"]),
        "nics": topology["nics"],
    }
