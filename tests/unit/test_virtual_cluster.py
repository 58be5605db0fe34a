"""Virtual cluster: spec from CLI options, inventory, known_hosts and node payload (no Docker)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from deepops_py.errors import InputError
from deepops_py.virtual import cluster, inventory, payload
from deepops_py.virtual.gpus import GpuSpec


def test_default_spec_is_h100_then_a100():
    spec = cluster.ClusterSpec.from_options(compute=2, gpus=(), image="debian12")
    assert [(node.name, node.role, node.gpus) for node in spec.nodes()] == [
        ("ctl01", "controller", None),
        ("gpu01", "compute", GpuSpec("h100", 8)),
        ("gpu02", "compute", GpuSpec("a100", 4)),
    ]


def test_gpus_cycle_over_compute_nodes():
    spec = cluster.ClusterSpec.from_options(compute=5, gpus=("l40s:1", "h100:2"), image="debian13")
    assert [str(node.gpus) for node in spec.nodes()[1:]] == ["l40s:1", "h100:2", "l40s:1", "h100:2", "l40s:1"]
    assert [node.name for node in spec.nodes()] == ["ctl01", "gpu01", "gpu02", "gpu03", "gpu04", "gpu05"]
    default = cluster.ClusterSpec.from_options(compute=3)
    assert [str(node.gpus) for node in default.nodes()[1:]] == ["h100:8", "a100:4", "h100:8"]


@pytest.mark.parametrize(
    "options",
    [
        {"compute": 2, "gpus": ("h100:99",), "image": "debian12"},
        {"compute": 2, "gpus": ("nope:1",), "image": "debian12"},
        {"compute": 0, "gpus": (), "image": "debian12"},
        {"compute": 2, "gpus": (), "image": "ubuntu"},
    ],
)
def test_bad_options_are_input_errors(options):
    with pytest.raises(InputError):
        cluster.ClusterSpec.from_options(**options)


ENDPOINTS = [
    inventory.Endpoint("ctl01", "controller", 32768, "ssh-ed25519 AAAActl"),
    inventory.Endpoint("gpu01", "compute", 32769, "ssh-ed25519 AAAAgpu1"),
    inventory.Endpoint("gpu02", "compute", 32770, "ssh-ed25519 AAAAgpu2"),
]


def test_inventory_groups_and_connection_vars(tmp_path):
    key, known_hosts = tmp_path / "id_ed25519", tmp_path / "known_hosts"
    text = inventory.render_inventory(ENDPOINTS, key_path=key, known_hosts_path=known_hosts,
                                      apt_proxy="http://deepops-aptcache:3142")
    assert "&id" not in text and "*id" not in text  # no YAML aliases
    document = yaml.safe_load(text)["all"]
    assert document["vars"]["common_apt_proxy"] == "http://deepops-aptcache:3142"
    assert document["vars"]["deepops_virtual"] is True
    # what containers cannot do is switched off through ordinary role variables
    assert document["vars"]["slurm_proctrack_type"] == "proctrack/linuxproc"
    assert document["vars"]["nvidia_driver_enabled"] is False
    # the stand-in nvidia-smi's MIG minors file, not the driver's /proc one
    assert document["vars"]["nvidia_mig_minors_path"] == "/run/deepops/simulated-gpus/mig-minors"
    loader = importlib.machinery.SourceFileLoader("stand_in", str(payload.DATA_DIR / "nvidia-smi"))
    stand_in = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(stand_in)
    assert stand_in.MIG_MINORS == document["vars"]["nvidia_mig_minors_path"]
    children = document["children"]
    for group in ("slurm_controller", "slurm_login", "monitoring"):
        assert list(children[group]["hosts"]) == ["ctl01"]
    assert list(children["slurm_compute"]["hosts"]) == ["gpu01", "gpu02"]
    gpu02 = document["hosts"]["gpu02"]
    assert gpu02["ansible_host"] == "127.0.0.1"
    assert gpu02["ansible_port"] == 32770
    assert gpu02["ansible_user"] == "root"
    assert gpu02["ansible_ssh_private_key_file"] == str(key)
    assert f"UserKnownHostsFile={known_hosts}" in gpu02["ansible_ssh_common_args"]
    assert "StrictHostKeyChecking=no" not in gpu02["ansible_ssh_common_args"]


def test_inventory_loads_with_ansible(tmp_path):
    path = tmp_path / "inventory.yml"
    path.write_text(inventory.render_inventory(ENDPOINTS, key_path=tmp_path / "k", known_hosts_path=tmp_path / "kh",
                                               apt_proxy=""))
    result = subprocess.run(
        [str(Path(sys.executable).with_name("ansible-inventory")), "-i", str(path), "--list"],
        capture_output=True, text=True, check=True,
    )
    listed = json.loads(result.stdout)
    assert sorted(listed["slurm_compute"]["hosts"]) == ["gpu01", "gpu02"]
    assert listed["_meta"]["hostvars"]["ctl01"]["ansible_port"] == 32768


def test_known_hosts_use_bracketed_port_form():
    assert inventory.render_known_hosts(ENDPOINTS[:1]) == "[127.0.0.1]:32768 ssh-ed25519 AAAActl\n"


def _members(data: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {member.name: member for member in tar.getmembers()}


def test_controller_payload_is_only_the_ssh_key():
    members = _members(payload.node_tar("ctl01", "ssh-ed25519 AAAA test\n", None))
    assert set(members) == {"root", "root/.ssh", "root/.ssh/authorized_keys"}
    assert members["root/.ssh"].mode == 0o700
    assert members["root/.ssh/authorized_keys"].mode == 0o600


def test_compute_payload_installs_simulated_gpus():
    members = _members(payload.node_tar("gpu01", "ssh-ed25519 AAAA test\n", GpuSpec("a100", 4)))
    assert members["usr/bin/nvidia-smi"].mode == 0o755
    assert members["etc/deepops/simulated-gpus.json"].isfile()
    link = members["etc/systemd/system/sysinit.target.wants/deepops-simulated-gpus.service"]
    assert link.issym() and link.linkname == "/etc/systemd/system/deepops-simulated-gpus.service"


def _run_stand_in(tmp_path: Path, spec: GpuSpec, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the stand-in nvidia-smi against files rendered into tmp_path instead of /."""
    files = payload.gpu_files(spec, "gpu01")
    for relative, (content, _mode) in files.items():
        target = tmp_path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    script = (payload.DATA_DIR / "nvidia-smi").read_text()
    script = script.replace('"/etc/deepops/', f'"{tmp_path}/etc/deepops/')
    script = script.replace('"/usr/share/deepops/', f'"{tmp_path}/usr/share/deepops/')
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True)


def test_stand_in_nvidia_smi_outputs(tmp_path):
    spec = GpuSpec("h100", 2)
    listing = _run_stand_in(tmp_path, spec, "-L").stdout.splitlines()
    assert len(listing) == 2 and listing[1].startswith("GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-")
    csv = _run_stand_in(tmp_path, spec, "--query-gpu=index,name,uuid,pci.bus_id,memory.total",
                        "--format=csv,noheader").stdout.splitlines()
    assert csv[0].split(", ")[0::3] == ["0", "00000000:53:00.0"]
    assert csv[0].endswith("81559 MiB")
    xml = _run_stand_in(tmp_path, spec, "-q", "-x").stdout
    assert "<attached_gpus>2</attached_gpus>" in xml
    assert _run_stand_in(tmp_path, spec, "topo", "-m").stdout.startswith("\tGPU0\tGPU1\t")
    rejected = _run_stand_in(tmp_path, spec, "--bogus")
    assert rejected.returncode != 0 and "not supported" in rejected.stderr


def test_cluster_name_comes_from_the_environment(monkeypatch):
    from deepops_py.virtual import cluster

    monkeypatch.delenv("DEEPOPS_VIRTUAL_NAME", raising=False)
    assert cluster.cluster_name() == "deepops"
    monkeypatch.setenv("DEEPOPS_VIRTUAL_NAME", "deepops-it")
    assert cluster._container("gpu01") == "deepops-it-gpu01"


@pytest.mark.parametrize("bad", ["", "Upper", "1abc", "has space", "x" * 40])
def test_bad_cluster_name_is_input_error(monkeypatch, bad):
    from deepops_py.errors import InputError
    from deepops_py.virtual import cluster

    monkeypatch.setenv("DEEPOPS_VIRTUAL_NAME", bad)
    with pytest.raises(InputError, match="DEEPOPS_VIRTUAL_NAME"):
        cluster.cluster_name()
