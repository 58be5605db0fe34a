"""Files 'virtual up' puts into a node container before its first start.

They travel as one tar stream (``docker cp - NAME:/``), so a node is complete
when systemd first boots it. Compute nodes get the simulated GPUs: the
stand-in nvidia-smi, its rendered outputs, the stand-in dcgm-exporter, the marker file (with each
GPU's MIG profile table), and a oneshot unit that recreates /dev/nvidia* on every start and resets
the MIG state as a reboot does. The MIG state itself is not shipped: the stand-in creates it
(/var/lib/deepops/simulated-gpus/mig-state.json) on first change.
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from pathlib import Path

from deepops_py.virtual import gpus

DATA_DIR = Path(__file__).resolve().parent / "data"
GPU_DATA_DIR = "usr/share/deepops/simulated-gpus"
DEVICE_UNIT = "deepops-simulated-gpus.service"


def gpu_files(spec: gpus.GpuSpec, node: str) -> dict[str, tuple[bytes, int]]:
    """Path inside the container (relative to /) -> (content, mode) for NODE's simulated GPUs."""
    query_xml = gpus.render_query_xml(spec, node)
    marker = gpus.marker(spec, node, query_xml)
    # Recorded all_reduce_perf and dcgmi diag outputs the acceptance stand-ins replay (fixtures/SOURCES.md).
    acceptance = {
        f"{GPU_DATA_DIR}/{path.name}": (path.read_bytes(), 0o644)
        for pattern in ("nccl-all-reduce-*.txt", "dcgmi-diag-*.txt")
        for path in sorted(gpus.FIXTURES_DIR.glob(pattern))
    }
    return {
        **acceptance,
        "usr/bin/nvidia-smi": ((DATA_DIR / "nvidia-smi").read_bytes(), 0o755),
        # nccl-tests and DCGM stand-ins for `deepops validate` nccl, dcgm and burnin.
        "opt/deepops/nccl-tests/bin/all_reduce_perf": ((DATA_DIR / "all_reduce_perf").read_bytes(), 0o755),
        "usr/bin/dcgmi": ((DATA_DIR / "dcgmi").read_bytes(), 0o755),
        # dcgm-exporter stand-in at the package's path; the dcgm_exporter role configures and starts it.
        "usr/bin/dcgm-exporter": ((DATA_DIR / "dcgm-exporter").read_bytes(), 0o755),
        "usr/local/sbin/deepops-simulated-gpus": ((DATA_DIR / "deepops-simulated-gpus").read_bytes(), 0o755),
        # 'deepops virtual fault' runs it: XIDs, ECC errors and row remaps on a simulated GPU.
        "usr/local/sbin/deepops-simulated-gpu-fault": ((DATA_DIR / "deepops-simulated-gpu-fault").read_bytes(), 0o755),
        f"etc/systemd/system/{DEVICE_UNIT}": ((DATA_DIR / DEVICE_UNIT).read_bytes(), 0o644),
        "etc/deepops/simulated-gpus.json": (json.dumps(marker, indent=2).encode() + b"\n", 0o644),
        f"{GPU_DATA_DIR}/nvidia-smi-q.xml": (query_xml.encode(), 0o644),
        f"{GPU_DATA_DIR}/topo-m.txt": (gpus.render_topology(spec).encode(), 0o644),
    }


def node_tar(node: str, public_key: str, gpu_spec: gpus.GpuSpec | None) -> bytes:
    """The tar stream of everything NODE needs; paths relative to /."""
    files = {"root/.ssh/authorized_keys": (public_key.encode(), 0o600)}
    links: dict[str, str] = {}
    if gpu_spec is not None:
        files.update(gpu_files(gpu_spec, node))
        links[f"etc/systemd/system/sysinit.target.wants/{DEVICE_UNIT}"] = f"/etc/systemd/system/{DEVICE_UNIT}"
    directory_modes = {"root": 0o700, "root/.ssh": 0o700}
    buffer = io.BytesIO()
    now = int(time.time())
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        directories = sorted({str(Path(path).parents[i]) for path in [*files, *links]
                              for i in range(len(Path(path).parents) - 1)})
        for directory in directories:
            info = tarfile.TarInfo(directory)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, directory_modes.get(directory, 0o755), now
            tar.addfile(info)
        for path, (content, mode) in sorted(files.items()):
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(content), mode, now
            tar.addfile(info, io.BytesIO(content))
        for path, target in sorted(links.items()):
            info = tarfile.TarInfo(path)
            info.type, info.linkname, info.mtime = tarfile.SYMTYPE, target, now
            tar.addfile(info)
    return buffer.getvalue()
