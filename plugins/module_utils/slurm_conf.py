"""slurm.conf and gres.conf lines from gathered facts.

Each public function is a filter of ``plugins/filter/slurm.py``, whose
docstring lists them with what goes in and what comes out. Identical nodes
are compressed into one line with the hostlist helpers of ``hostlist.py``.

The ``Cores=`` rule: ``nvidia-smi topo -m`` gives a GPU's CPU affinity as
logical CPU ids; ``gres.conf`` wants core indices of the node. Linux numbers
the first hardware thread of every core first and the sibling threads after
them, so core index = CPU id modulo the node's core count. ``Cores=`` is left
out when the affinity names a CPU id the node does not have (simulated GPUs
on a small machine, or facts that do not belong together), when the affinity
is unknown, or when it covers every core (no constraint to express).

MIG: a GPU in MIG mode is not a GRES itself; each of its MIG devices is one,
typed by its profile (``gpu:1g.10gb``), with ``MultipleFiles=`` naming the
parent GPU's device and the GPU- and compute-instance capability devices
(Slurm's gres.conf(5): the files of one MIG device are managed as a single
GRES; ``MultipleFiles`` and ``File`` are mutually exclusive, and a range in
``MultipleFiles`` still means one GRES, so every MIG device takes its own
line). A GPU in MIG mode without instances gives no GRES. Whole GPUs keep
their model's type. The capability minors are the same for the same layout,
so nodes with the same layout still share their lines.

Features (``Features=`` of a node, what ``--constraint`` matches): each GPU
model the node has (a MIG device counts as its parent GPU's model), ``nvlink``
and ``nvswitch`` when the GPU topology shows them, the CPU vendor (``intel``,
``amd``) from the processor facts, and the features the inventory declares for
the host. Network fabrics are not guessed from facts (an mlx5 NIC may run
InfiniBand or Ethernet): a site declares ``ib`` or ``roce`` itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ansible_collections.deepops.cluster.plugins.module_utils import hostlist as _hostlist
from ansible_collections.deepops.cluster.plugins.module_utils import nvidia_smi as _nvidia_smi


class SlurmConfError(ValueError):
    """Facts or settings that cannot be turned into Slurm configuration."""


def _compress(hosts: Iterable[str]) -> str:
    return _hostlist.hostlist_compress(list(hosts))


def _group(mapping: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """``{host: hashable}`` -> ``[(hostlist, value), ...]`` in first-seen value order."""
    by_value: dict[Any, list[str]] = {}
    for host, value in mapping.items():
        by_value.setdefault(value, []).append(host)
    return [(_compress(hosts), value) for value, hosts in by_value.items()]


def _int(value: Any, what: str, host: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise SlurmConfError(f"{host}: fact {what} is {value!r}, expected a number") from None
    return number


def _cpu_ids(text: Any) -> list[int] | None:
    """``'0-3,8'`` -> ``[0, 1, 2, 3, 8]``; None when unknown or unreadable."""
    if not isinstance(text, str) or not re.fullmatch(r"\d+(-\d+)?(,\d+(-\d+)?)*", text.strip()):
        return None
    ids: list[int] = []
    for part in text.strip().split(","):
        first, _sep, last = part.partition("-")
        ids.extend(range(int(first), int(last or first) + 1))
    return ids


def _ranges(numbers: Iterable[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2,5``."""
    ordered = sorted(set(numbers))
    parts: list[str] = []
    start = prev = None
    for number in ordered:
        if start is None:
            start = prev = number
        elif number == prev + 1:
            prev = number
        else:
            parts.append(f"{start}-{prev}" if prev != start else str(start))
            start = prev = number
    if start is not None:
        parts.append(f"{start}-{prev}" if prev != start else str(start))
    return ",".join(parts)


def gpu_cores(cpu_affinity: Any, cores_total: int, cpus_total: int) -> str | None:
    """Core indices for ``Cores=`` from a GPU's CPU affinity (see the module docstring)."""
    ids = _cpu_ids(cpu_affinity)
    if not ids or cores_total <= 0 or max(ids) >= cpus_total:
        return None
    cores = {cpu % cores_total for cpu in ids}
    if len(cores) >= cores_total:
        return None
    return _ranges(cores)


def _device_files(devices: list[str]) -> str:
    """``['/dev/nvidia0', '/dev/nvidia1']`` -> ``/dev/nvidia[0-1]``."""
    names = [device.rsplit("/", 1) for device in devices]
    directories = {directory for directory, _name in names}
    if len(directories) != 1:
        return ",".join(devices)
    return f"{directories.pop()}/{_compress(name for _directory, name in names)}"


def _gpu_entries(host: str, gpu: Mapping[str, Any], cores: str | None) -> list[dict]:
    """The GRES of one GPU: itself, or its MIG devices when it is in MIG mode."""
    device = str(gpu.get("device") or f"/dev/nvidia{gpu.get('minor_number', gpu.get('index'))}")
    gpu_type = str(gpu.get("type") or "gpu")
    if not _nvidia_smi.mig_active(gpu):
        return [{"type": gpu_type, "device": device, "cores": cores}]
    entries = []
    for mig in gpu.get("mig_devices") or []:
        name = (
            f"{host}: GPU {gpu.get('index')} ({device}) MIG device {mig.get('index')} "
            f"(GPU instance {mig.get('gpu_instance_id')}, compute instance {mig.get('compute_instance_id')})"
        )
        if not mig.get("profile"):
            raise SlurmConfError(f"{name}: its MIG profile is unknown, so it has no GRES type")
        files = mig.get("device_files")
        if not files:
            raise SlurmConfError(
                f"{name}: its device files are unknown (the MIG minors file was not read: "
                "nvidia_gpu_facts' mig_minors_path, the inventory's nvidia_mig_minors_path)"
            )
        entries.append(
            {"type": str(mig["profile"]), "device": device, "files": [str(path) for path in files],
             "cores": cores, "parent": gpu_type}
        )
    return entries


# A feature name in Features= and --constraint: nothing Slurm reads as an operator (& | , [ ] * !).
_FEATURE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
# Vendor strings of /proc/cpuinfo (Ansible's ``processor`` fact) -> feature.
_CPU_VENDOR_FEATURES = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}


def node_features(facts: Mapping[str, Any], gpus: Iterable[Mapping[str, Any]], declared: Iterable[Any] = ()) -> list[str]:
    """The sorted ``Features=`` of one node: from its facts and GPU entries, plus DECLARED."""
    features = {_word(_gpu_model(gpu), "GPU type") for gpu in gpus}
    gpu_facts = facts.get("deepops_gpus") or {}
    features |= {name for name in ("nvlink", "nvswitch") if gpu_facts.get(name)}
    processor = facts.get("processor") or []
    features |= {feature for vendor, feature in _CPU_VENDOR_FEATURES.items() if vendor in processor}
    for name in declared or ():
        if not isinstance(name, str) or not _FEATURE.fullmatch(name):
            raise SlurmConfError(f"node feature {name!r}: letters, digits, _ . and - only")
        features.add(name)
    return sorted(features)


def _gpu_model(gpu: Mapping[str, Any]) -> str:
    """The model of a GRES entry: a whole GPU's type, a MIG device's parent GPU's."""
    return str(gpu.get("parent") or gpu["type"])


def slurm_node_facts(
    facts_by_host: Mapping[str, Any],
    realmemory_reserve_mb: int = 0,
    declared_features: Mapping[str, Iterable[Any]] | None = None,
) -> dict[str, dict]:
    """Compact, comparable node records from each host's ``ansible_facts``.

    A host without facts (unreachable in this run) is left out with no error;
    the caller decides what that means. A GPU in MIG mode gives one entry per
    MIG device (``files``: its device files; ``parent``: the GPU's type); a
    MIG device without a profile or device files is an error naming it.
    DECLARED_FEATURES: the inventory's extra features by host (``features``).
    """
    records: dict[str, dict] = {}
    for host, facts in facts_by_host.items():
        if not isinstance(facts, Mapping) or "processor_vcpus" not in facts:
            continue
        sockets = _int(facts.get("processor_count"), "processor_count", host)
        cores = _int(facts.get("processor_cores"), "processor_cores", host)
        threads = _int(facts.get("processor_threads_per_core"), "processor_threads_per_core", host)
        cpus = _int(facts.get("processor_vcpus"), "processor_vcpus", host)
        memory = _int(facts.get("memtotal_mb"), "memtotal_mb", host)
        real_memory = max(memory - int(realmemory_reserve_mb), 1)
        gpus = []
        gpu_facts = facts.get("deepops_gpus") or {}
        for gpu in gpu_facts.get("gpus") or []:
            gpus.extend(_gpu_entries(host, gpu, gpu_cores(gpu.get("cpu_affinity"), sockets * cores, cpus)))
        records[host] = {
            "cpus": cpus,
            "sockets": sockets,
            "cores_per_socket": cores,
            "threads_per_core": threads,
            "real_memory": real_memory,
            "gpus": gpus,
            "features": node_features(facts, gpus, (declared_features or {}).get(host) or ()),
        }
    return records


def _gres(record: Mapping[str, Any]) -> str:
    counts: dict[str, int] = {}
    for gpu in record["gpus"]:
        gpu_type = _word(gpu["type"], "GPU type")
        counts[gpu_type] = counts.get(gpu_type, 0) + 1
    return ",".join(f"gpu:{gpu_type}:{count}" for gpu_type, count in counts.items())


def slurm_node_line(record: Mapping[str, Any]) -> str:
    """The attributes after ``NodeName=...`` for one node record."""
    parts = [f"CPUs={record['cpus']}"]
    if record["sockets"] * record["cores_per_socket"] * record["threads_per_core"] == record["cpus"]:
        parts += [
            f"Sockets={record['sockets']}",
            f"CoresPerSocket={record['cores_per_socket']}",
            f"ThreadsPerCore={record['threads_per_core']}",
        ]
    parts.append(f"RealMemory={record['real_memory']}")
    gres = _gres(record)
    if gres:
        parts.append(f"Gres={gres}")
    # Records saved by a deploy before features existed have none.
    if record.get("features"):
        parts.append(f"Features={','.join(record['features'])}")
    return " ".join(parts)


def slurm_node_lines(records: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """``NodeName=`` lines, identical nodes compressed into one hostlist each."""
    grouped = _group({host: slurm_node_line(record) for host, record in sorted(records.items())})
    return [f"NodeName={hosts} {line}" for hosts, line in grouped]


def _gres_conf_for(record: Mapping[str, Any]) -> tuple[str, ...]:
    """This node's gres.conf attributes: one string per (type, cores) run of whole GPUs,
    one per MIG device (``MultipleFiles=`` cannot share a line between GRES)."""
    runs: list[tuple[str, str | None, list[str], bool]] = []  # type, cores, devices or files, MIG
    for gpu in record["gpus"]:
        if gpu.get("files"):
            runs.append((gpu["type"], gpu["cores"], list(gpu["files"]), True))
        elif runs and not runs[-1][3] and runs[-1][0] == gpu["type"] and runs[-1][1] == gpu["cores"]:
            runs[-1][2].append(gpu["device"])
        else:
            runs.append((gpu["type"], gpu["cores"], [gpu["device"]], False))
    lines = []
    for gpu_type, cores, devices, mig in runs:
        line = f"Name=gpu Type={_word(gpu_type, 'GPU type')} "
        if mig:
            line += "MultipleFiles=" + ",".join(_word(path, "MIG device file") for path in devices)
        else:
            line += f"File={_word(_device_files(devices), 'GPU device file')}"
        if cores:
            line += f" Cores={cores}"
        lines.append(line)
    return tuple(lines)


def slurm_gres_lines(records: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """gres.conf lines for every node with GPUs, identical nodes compressed."""
    per_host = {host: _gres_conf_for(record) for host, record in sorted(records.items()) if record["gpus"]}
    return [f"NodeName={hosts} {line}" for hosts, lines in _group(per_host) for line in lines]


def slurm_default_partitions(records: Mapping[str, Mapping[str, Any]], mig_partitions: bool = False) -> list[dict]:
    """One partition per GPU model (named after its type) and a default ``all`` partition.

    A node is in its GPUs' model partition whether they are whole or cut
    into MIG devices. ``mig_partitions`` adds one partition per MIG profile
    (named after it, e.g. ``1g.10gb``) with the nodes that have such devices.
    """
    by_type: dict[str, list[str]] = {}
    for host, record in sorted(records.items()):
        kinds = [_gpu_model(gpu) for gpu in record["gpus"]]
        if mig_partitions:
            kinds += [gpu["type"] for gpu in record["gpus"] if gpu.get("files")]
        for gpu_type in dict.fromkeys(kinds):
            by_type.setdefault(gpu_type, []).append(host)
    partitions = [{"name": gpu_type, "nodes": _compress(hosts)} for gpu_type, hosts in sorted(by_type.items())]
    partitions.append({"name": "all", "nodes": "ALL", "default": True})
    return partitions


def slurm_accounting_tres(records: Mapping[str, Mapping[str, Any]]) -> str:
    """``AccountingStorageTRES``: ``gres/gpu`` and ``gres/gpu:<type>`` for every GRES type of the
    nodes (GPU models and MIG profiles), so sacct and the nodes' TRES count each type."""
    types = sorted({_word(gpu["type"], "GPU type") for record in records.values() for gpu in record["gpus"]})
    return ",".join(["gres/gpu", *(f"gres/gpu:{gpu_type}" for gpu_type in types)])


# A slurm.conf word: no whitespace (a second key on the line, or a new line),
# no control character and no "#" (the rest of the line becomes a comment).
_WORD = re.compile(r"[^\s#\x00-\x1f\x7f]+")
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def _word(text: Any, what: str) -> str:
    """TEXT as one slurm.conf word, or SlurmConfError naming WHAT: no value may
    add a key, a line or a comment to the generated file (the inventory check
    rejects such values first; this is the second line of defence)."""
    text = str(text)
    if not _WORD.fullmatch(text):
        raise SlurmConfError(f"{what}: {text!r} cannot go into slurm.conf (whitespace, '#' or a control character)")
    return text


def _key(key: Any, what: str) -> str:
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise SlurmConfError(f"{what}: {key!r} is not a slurm.conf key (letters, digits and _ only)")
    return key


def _value(value: Any, what: str = "value") -> str:
    if isinstance(value, bool):
        return "YES" if value else "NO"
    if isinstance(value, (list, tuple)):
        return ",".join(_word(item, what) for item in value)
    return "" if str(value) == "" else _word(value, what)


def slurm_partition_lines(partitions: Iterable[Mapping[str, Any]], removed: Iterable[str] = ()) -> list[str]:
    """``PartitionName=`` lines from ``slurm_partitions``-style dicts.

    Nodes in REMOVED (leaving the cluster: ``deepops node remove``) are left
    out of the partitions that name them, as slurm.conf no longer defines
    them and slurmctld would not start with a partition naming one; a
    partition left with none keeps no ``Nodes=`` (it exists, holding no node).
    """
    removed = set(removed)
    lines = []
    for partition in partitions:
        if not isinstance(partition, Mapping) or not partition.get("name"):
            raise SlurmConfError(f"a partition needs a name: {partition!r}")
        name = _word(partition["name"], "partition name")
        nodes = partition.get("nodes", "ALL")
        if removed and nodes != "ALL":
            nodes = [node for node in _hostlist.hostlist_expand(nodes) if node not in removed]
        if isinstance(nodes, (list, tuple)):
            nodes = _compress(nodes)
        parts = [f"PartitionName={name}"]
        if nodes != "":
            parts.append(f"Nodes={_word(nodes, f'partition {name}: nodes')}")
        parts.append(f"Default={_value(bool(partition.get('default', False)))}")
        parts.append(f"MaxTime={_word(partition.get('max_time') or 'INFINITE', f'partition {name}: max_time')}")
        parts.append("State=UP")
        for key, value in (partition.get("options") or {}).items():
            key = _key(key, f"partition {name}: option")
            parts = [part for part in parts if not part.startswith(f"{key}=")]
            parts.append(f"{key}={_value(value, f'partition {name}: {key}')}")
        lines.append(" ".join(parts))
    return lines


def slurm_conf_lines(settings: Mapping[str, Any]) -> list[str]:
    """``Key=value`` lines; a None or empty value leaves the key out."""
    lines = []
    for key, value in settings.items():
        text = "" if value is None else _value(value, _key(key, "slurm.conf setting"))
        if text != "":
            lines.append(f"{key}={text}")
    return lines


def slurm_node_states(sinfo: str | Iterable[str]) -> dict[str, list[str]]:
    """``{node: [state, reason]}`` from ``sinfo -h -N -o '%N|%T|%E'`` (or ``%t``) output, text or its lines.

    A node in several partitions is listed once per partition, with the same
    state; a reason may itself hold ``|`` (it is the last field).
    """
    found: dict[str, list[str]] = {}
    rows = sinfo.splitlines() if isinstance(sinfo, str) else list(sinfo or [])
    for row in rows:
        if "|" not in row:
            continue
        node, _sep, rest = row.partition("|")
        state, _sep, reason = rest.partition("|")
        found[node.strip()] = [state.strip(), reason]
    return found


# What a compute node's short state (sinfo %t) says about its slurmd, for the
# deploy's readiness wait (roles/slurm/tasks/ready.yml). Not registered, or its
# registration refused (inval: fewer resources than slurm.conf gives it):
_NOT_REGISTERED_STATES = ("down", "unk", "inval", "futr")
# Registered but unable to answer now: not responding (*), powered off (~),
# powering up (#), powering down (%), a reboot issued (^).
_NOT_ANSWERING_SUFFIXES = "*~#%^"
# Every other suffix and state is a node whose slurmd answers, whatever the
# scheduler or an admin made of it: planned for a pending job (plnd, -),
# reserved (resv, maint, $), drained (drain, drng), failed (fail, failg), a
# reboot pending (@). A deploy leaves those states as they are.
# Every suffix sinfo may append to a state, answering or not:
_STATE_SUFFIXES = "*~#!%$@^-"


def slurm_nodes_not_up(sinfo: str | Iterable[str], nodes: Iterable[str]) -> dict[str, str]:
    """``{node: "state (reason)"}`` for each of ``nodes`` whose slurmd has not registered or does not answer.

    ``sinfo`` is ``sinfo -h -N -o '%N|%t|%E'`` output; a node it does not list is not up.
    """
    states = slurm_node_states(sinfo)
    not_up = {}
    for node in nodes:
        if node not in states:
            not_up[node] = "not known to slurmctld"
            continue
        state, reason = states[node]
        base = state.rstrip(_STATE_SUFFIXES)
        if base in _NOT_REGISTERED_STATES or any(flag in state[len(base):] for flag in _NOT_ANSWERING_SUFFIXES):
            not_up[node] = f"{state} ({reason})" if reason and reason != "none" else state
    return not_up


def slurm_nodes_to_resume(sinfo: str, hosts: Iterable[str], reasons: Iterable[str]) -> list[str]:
    """Nodes of ``hosts`` that are down or drained for one of ``reasons``.

    ``sinfo`` is ``sinfo -h -N -o '%N|%t|%E'`` output.
    """
    reasons = list(reasons)
    states = slurm_node_states(sinfo)
    return sorted(
        node for node in set(hosts) & states.keys()
        if states[node][0].rstrip(_STATE_SUFFIXES) in ("down", "drain", "drng")
        and any(states[node][1].startswith(r) for r in reasons)
    )
