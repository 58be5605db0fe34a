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
        {"compute": 2, "gpus": (), "image": "debian12", "controllers": 3},
        {"compute": 2, "gpus": (), "image": "debian12", "controllers": 0},
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


# --------------------------------------------------------------------------
# a restarted container's new SSH port: the hint (docker faked at its one entry point, docker.run)

STALE_HINT = "gpu01: its SSH port changed (inventory 32769, container now 32774): run `deepops virtual up` to refresh the inventory"


class FakeDocker:
    """``docker ps`` and ``docker inspect`` of a virtual cluster whose nodes publish sshd on PORTS ({host: port or None})."""

    def __init__(self, ports):
        self.ports = ports
        self.calls = []

    def __call__(self, args, *, input=None, timeout=120, check=True):
        self.calls.append((list(args), timeout))
        if args[0] == "ps":
            out = "\n".join(cluster._container(host) for host in self.ports)
        elif args[0] == "inspect":
            out = json.dumps([
                {"Name": "/" + cluster._container(host), "State": {"Status": "running" if port else "exited"},
                 "Config": {"Labels": {cluster.HOST_LABEL: host, cluster.ROLE_LABEL: "compute"}},
                 "NetworkSettings": {"Ports": {"22/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(port)}]} if port else {}}}
                for host, port in self.ports.items()
            ])
        else:
            raise AssertionError(f"unexpected docker {args}")
        return subprocess.CompletedProcess(["docker", *args], 0, out, "")


@pytest.fixture
def virtual_inventory(tmp_path, monkeypatch):
    """The virtual cluster's own inventory (ENDPOINTS' ports), in a state directory of this test's own."""
    monkeypatch.setenv("DEEPOPS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("DEEPOPS_VIRTUAL_NAME", raising=False)
    monkeypatch.delenv("DEEPOPS_INVENTORY", raising=False)
    monkeypatch.chdir(tmp_path)  # no config/inventory.yml: the CLI falls back to the virtual cluster's
    path = tmp_path / "state" / "virtual" / "inventory.yml"
    path.parent.mkdir(parents=True)
    path.write_text(inventory.render_inventory(ENDPOINTS, key_path=tmp_path / "k", known_hosts_path=tmp_path / "kh",
                                               apt_proxy=""))
    return path


def fake_docker(monkeypatch, ports):
    from deepops_py.virtual import docker

    fake = FakeDocker(ports)
    monkeypatch.setattr(docker, "run", fake)
    return fake


def test_a_changed_ssh_port_is_named_for_the_virtual_clusters_own_inventory(virtual_inventory, monkeypatch):
    # gpu01 restarted and got a new port, gpu02 kept its own, ctl01 is stopped (publishes nothing)
    docker = fake_docker(monkeypatch, {"ctl01": None, "gpu01": 32774, "gpu02": 32770})
    asked = {"ctl01": 32768, "gpu01": 32769, "gpu02": 32770}
    assert cluster.stale_port_hints(virtual_inventory, asked) == [STALE_HINT]
    assert [args[0] for args, _ in docker.calls] == ["ps", "inspect"]
    assert {timeout for _, timeout in docker.calls} == {cluster.PORT_LOOKUP_TIMEOUT_S}  # a hint never holds a command up
    assert cluster.stale_port_hints(virtual_inventory, {"gpu02": 32770}) == []


def test_no_hint_for_other_inventories_and_none_without_asking(virtual_inventory, monkeypatch, tmp_path):
    docker = fake_docker(monkeypatch, {"gpu01": 32774})
    other = tmp_path / "site.yml"
    other.write_text(virtual_inventory.read_text())
    assert cluster.stale_port_hints(other, {"gpu01": 32769}) == []
    assert cluster.stale_port_hints(virtual_inventory, {}) == []
    assert docker.calls == []  # Docker is asked only for the virtual cluster's inventory, and only about some host


@pytest.mark.parametrize("broken", ["no docker CLI", "no engine", "garbage"])
def test_no_hint_and_no_failure_when_docker_cannot_say(virtual_inventory, monkeypatch, broken):
    from deepops_py.errors import DeepopsError
    from deepops_py.virtual import docker

    if broken == "no docker CLI":
        monkeypatch.setattr(docker.shutil, "which", lambda name: None)
    elif broken == "no engine":
        def refuse(args, **kwargs):
            raise DeepopsError("'docker ps -a' failed: Cannot connect to the Docker daemon at unix:///var/run/docker.sock")
        monkeypatch.setattr(docker, "run", refuse)
    else:
        monkeypatch.setattr(docker, "run", lambda args, **kwargs: subprocess.CompletedProcess(args, 0, "x\n" if args[0] == "ps" else "{", ""))
    assert cluster.stale_port_hints(virtual_inventory, {"gpu01": 32769}) == []


def test_deepops_check_hints_at_virtual_up_below_an_unreachable_host(virtual_inventory, monkeypatch):
    from click.testing import CliRunner

    from deepops_py import preflight
    from deepops_py.cli import main

    def fake_preflight(cluster_, **options):
        results = []
        for name, host in cluster_.hosts.items():
            check = preflight.HostCheck(host=name, address=host.address, port=host.port)
            if name == "gpu01":
                check.record(preflight.CHECK_SSH, False, f"unreachable: root@127.0.0.1:{host.port}: Connection refused")
            else:
                for each in preflight.CHECKS:
                    check.record(each, True, "ok")
            results.append(check)
        return results

    monkeypatch.setattr(preflight, "run_preflight", fake_preflight)
    fake_docker(monkeypatch, {"ctl01": 32768, "gpu01": 32774, "gpu02": 32770})
    for args in ([], ["--json"]):
        result = CliRunner().invoke(main, ["check", *args])
        assert result.exit_code == 1, result.output
        assert "(virtual cluster)" in result.stderr
        assert result.stderr.strip().splitlines()[-1] == STALE_HINT
    assert json.loads(result.stdout)["hosts"][1]["host"] == "gpu01"  # --json: stdout stays JSON


def test_a_runs_summary_hints_at_virtual_up_for_an_unreachable_host(virtual_inventory, monkeypatch):
    from click.testing import CliRunner

    from deepops_py import runner
    from deepops_py.cli import main
    from deepops_py.run_results import HostResult, RunResult

    def fake_run(request, json_output=False, **kwargs):
        hosts = {"ctl01": HostResult("ctl01", ok=5),
                 "gpu01": HostResult("gpu01", unreachable=1, failed_task="Validate | Gather GPU facts",
                                     message="Failed to connect to the host via ssh: Connection refused")}
        return RunResult(run_id="r1", command=request.command, playbook=request.playbook, inventory=str(request.inventory),
                         start="s", artifacts="/tmp/a", status="failed", hosts=hosts, data={})

    monkeypatch.setattr(runner, "run_playbook", fake_run)
    fake_docker(monkeypatch, {"ctl01": 32768, "gpu01": 32774, "gpu02": 32770})
    for command in (["validate"], ["deploy", "--json"]):
        result = CliRunner().invoke(main, command)
        assert result.exit_code == 1, result.output
        assert result.stderr.strip().splitlines()[-1] == STALE_HINT


def test_login_adds_a_login_node_without_gpus():
    spec = cluster.ClusterSpec.from_options(compute=2, login=True)
    assert [(node.name, node.role, node.gpus) for node in spec.nodes()][-1] == ("login01", "login", None)
    assert "login01" not in [node.name for node in cluster.ClusterSpec.from_options(compute=2).nodes()]


def test_inventory_with_a_login_node_puts_it_alone_in_slurm_login(tmp_path):
    endpoints = [*ENDPOINTS, inventory.Endpoint("login01", "login", 32771, "ssh-ed25519 AAAAlogin")]
    text = inventory.render_inventory(endpoints, key_path=tmp_path / "k", known_hosts_path=tmp_path / "kh", apt_proxy="",
                                      user_public_key="ssh-ed25519 AAAAuser deepops-virtual\n")
    document = yaml.safe_load(text)["all"]
    assert list(document["children"]["slurm_login"]["hosts"]) == ["login01"]
    assert list(document["children"]["slurm_controller"]["hosts"]) == ["ctl01"]
    assert "login01" not in document["children"]["slurm_compute"]["hosts"]
    # the ordinary user of every virtual cluster, reachable with the cluster's key
    assert document["vars"]["cluster_users"] == [
        {"name": "alice", "uid": 2001, "gid": 2001, "ssh_keys": ["ssh-ed25519 AAAAuser deepops-virtual"]}]


def test_a_second_controller_is_a_backup_in_slurm_controller_only(tmp_path):
    spec = cluster.ClusterSpec.from_options(compute=1, controllers=2)
    assert [(node.name, node.role) for node in spec.nodes()] == [("ctl01", "controller"), ("ctl02", "controller"),
                                                                  ("gpu01", "compute")]
    endpoints = [ENDPOINTS[0], inventory.Endpoint("ctl02", "controller", 32771, "ssh-ed25519 AAAActl2"), *ENDPOINTS[1:]]
    text = inventory.render_inventory(endpoints, key_path=tmp_path / "k", known_hosts_path=tmp_path / "kh", apt_proxy="",
                                      user_public_key="")
    children = yaml.safe_load(text)["all"]["children"]
    assert list(children["slurm_controller"]["hosts"]) == ["ctl01", "ctl02"]
    # monitoring, login (without a login node) and, by default, slurmdbd stay on the first controller
    assert list(children["monitoring"]["hosts"]) == ["ctl01"] and list(children["slurm_login"]["hosts"]) == ["ctl01"]
    assert "slurm_dbd" not in children


def test_controllers_mount_the_shared_state_volume(monkeypatch):
    calls = []
    monkeypatch.setattr(cluster.docker, "volumes", lambda name: [])
    monkeypatch.setattr(cluster.docker, "run", lambda argv, **kwargs: calls.append(argv))
    controller, compute = cluster.ClusterSpec.from_options(compute=1, controllers=2).nodes()[1:3]
    volume = f"{cluster.cluster_name()}-slurmctld-state"
    assert cluster._node_volumes(controller) == ["-v", f"{volume}:/var/lib/slurm/slurmctld"]
    assert calls == [["volume", "create", "--label", f"deepops.virtual={cluster.cluster_name()}", volume]]
    assert cluster._node_volumes(compute) == []
# --------------------------------------------------------------------------
# shared storage: Docker volumes mounted in every node, the stand-in for NFS


def test_inventory_declares_the_stand_in_volumes_as_site_managed_mounts(tmp_path):
    from deepops_py import inventory as deepops_inventory

    path = tmp_path / "inventory.yml"
    path.write_text(inventory.render_inventory(ENDPOINTS, key_path=tmp_path / "k", known_hosts_path=tmp_path / "kh",
                                               apt_proxy=""))
    assert yaml.safe_load(path.read_text())["all"]["vars"]["shared_mounts"] == [
        {"path": "/home", "managed": False}, {"path": "/sw", "managed": False, "modulefiles": "modulefiles"}]
    assert "stand-in for NFS" in path.read_text()
    loaded = deepops_inventory.load_cluster(path)  # the inventory check accepts it
    assert loaded.hosts["gpu01"].vars["shared_mounts"][0]["path"] == "/home"


class VolumeDocker:
    """Records docker calls; answers ps/inspect/volume ls/network ls for one cluster."""

    def __init__(self, volumes=(), containers=()):
        self.volumes, self.containers, self.calls = list(volumes), list(containers), []

    def __call__(self, args, *, input=None, timeout=120, check=True):
        self.calls.append(list(args))
        out = ""
        if args[:2] == ["volume", "ls"]:
            out = "\n".join(self.volumes)
        elif args[0] == "ps":
            out = "\n".join(self.containers)
        elif args[0] == "info":
            out = "20.10\n"
        elif args[0] == "inspect":
            out = "[]"
        return subprocess.CompletedProcess(["docker", *args], 0, out, "")


def test_nodes_mount_the_shared_volumes_at_the_same_paths(monkeypatch):
    from deepops_py.virtual import docker

    monkeypatch.setenv("DEEPOPS_VIRTUAL_NAME", "vt")
    fake = VolumeDocker(volumes=["vt-home"])
    monkeypatch.setattr(docker, "run", fake)
    changes = []
    cluster._ensure_volumes(changes)
    assert ["volume", "create", "--label", "deepops.virtual=vt", "vt-sw"] in fake.calls
    assert not any(call[:2] == ["volume", "create"] and call[-1] == "vt-home" for call in fake.calls)
    assert changes == ["created volume vt-sw (shared /sw)"]
    spec = cluster.ClusterSpec.from_options(compute=1)
    cluster._create_node(spec.nodes()[0], spec, "ssh-ed25519 AAAA x")
    create = next(call for call in fake.calls if call[0] == "create")
    mounts = [create[i + 1] for i, arg in enumerate(create) if arg == "-v"]
    assert {"vt-home:/home", "vt-sw:/sw"} <= set(mounts)
    assert "vt-slurmctld-state:/var/lib/slurm/slurmctld" in mounts  # ctl01: the controllers' shared Slurm state


def test_a_node_made_without_the_shared_volumes_is_refused_not_guessed(monkeypatch):
    monkeypatch.setenv("DEEPOPS_VIRTUAL_NAME", "vt")
    spec = cluster.ClusterSpec.from_options(compute=1)
    labels = {cluster.GPUS_LABEL: "", cluster.IMAGE_NAME_LABEL: "debian12"}
    old = {"ctl01": {"Config": {"Labels": labels}, "Mounts": [{"Name": None, "Destination": "/sys/fs/cgroup"}]}}
    with pytest.raises(InputError, match="ctl01 has no shared /home and /sw"):
        cluster._refuse_mismatches(spec.nodes()[:1], old, spec)
    new = {"ctl01": {"Config": {"Labels": labels}, "Mounts": [{"Name": "vt-home", "Destination": "/home"},
                                                               {"Name": "vt-sw", "Destination": "/sw"}]}}
    cluster._refuse_mismatches(spec.nodes()[:1], new, spec)


def test_down_removes_the_shared_volumes(monkeypatch, tmp_path):
    from deepops_py.virtual import docker

    monkeypatch.setenv("DEEPOPS_VIRTUAL_NAME", "vt")
    monkeypatch.setenv("DEEPOPS_STATE_DIR", str(tmp_path))
    fake = VolumeDocker(volumes=["vt-home", "vt-sw"])
    monkeypatch.setattr(docker, "run", fake)
    said = list(cluster.down())
    assert ["volume", "rm", "vt-home"] in fake.calls and ["volume", "rm", "vt-sw"] in fake.calls
    assert "removed volume vt-home" in said
