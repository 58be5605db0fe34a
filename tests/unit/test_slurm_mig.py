"""Slurm GRES for MIG devices, from GPU facts of the virtual cluster's stand-in nvidia-smi.

Each simulated node runs the stand-in as 'virtual up' installs it (in a
temporary directory), a MIG layout is created with its ``mig`` commands, and
the GPU facts come from its ``-q -x``, ``topo -m`` and MIG minors file through
the functions the nvidia_gpu_facts module calls. The slurm role's templates
then render slurm.conf and gres.conf from them (tests/support/slurm_render.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.deepops.cluster.plugins.filter import platforms as platform_filters
from ansible_collections.deepops.cluster.plugins.filter import slurm as slurm_filters
from slurm_render import ROLE, nvidia_smi, render, slurm

from deepops_py.virtual import payload
from deepops_py.virtual.gpus import GpuSpec

STAND_IN = payload.DATA_DIR / "nvidia-smi"
BOOT = payload.DATA_DIR / "deepops-simulated-gpus"
A100_MIXED = "3g.40gb,2g.20gb,1g.10gb,1g.10gb"
H100_SEVEN = ",".join(["1g.10gb"] * 7)


class SimulatedNode:
    """One node's simulated GPUs under a temporary root, booted, with the stand-in run against them."""

    def __init__(self, root: Path, name: str, spec: GpuSpec):
        self.root = root / name
        for relative, (content, mode) in payload.gpu_files(spec, name).items():
            target = self.root / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
            target.chmod(mode)
        (self.root / "dev").mkdir()
        self.env = {
            **os.environ,
            "DEEPOPS_SIMULATED_GPUS": str(self.root / "etc/deepops/simulated-gpus.json"),
            "DEEPOPS_SIMULATED_GPUS_DATA": str(self.root / "usr/share/deepops/simulated-gpus"),
            "DEEPOPS_SIMULATED_MIG_STATE": str(self.root / "var/lib/deepops/simulated-gpus/mig-state.json"),
            "DEEPOPS_SIMULATED_MIG_RUN": str(self.root / "run/deepops/simulated-gpus"),
            "DEEPOPS_SIMULATED_DEV": str(self.root / "dev"),
            "DEEPOPS_SIMULATED_NVIDIA_SMI": str(STAND_IN),
        }
        subprocess.run([sys.executable, str(BOOT)], check=True, env=self.env)

    @property
    def minors_file(self) -> Path:
        return self.root / "run/deepops/simulated-gpus/mig-minors"

    def smi(self, *args: str) -> str:
        result = subprocess.run([sys.executable, str(STAND_IN), *args], capture_output=True, text=True, env=self.env)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result.stdout

    def gpu_facts(self, *, minors: bool = True) -> dict:
        """deepops_gpus as nvidia_gpu_facts builds it; ``minors=False``: the minors file is missing."""
        parsed = nvidia_smi.parse_xml(self.smi("-q", "-x"))
        mig_minors = nvidia_smi.parse_mig_minors(self.minors_file.read_text()) if minors else None
        path = str(self.minors_file if minors else self.root / "nowhere" / "mig-minors")
        return nvidia_smi.build_facts(parsed, nvidia_smi.parse_topo(self.smi("topo", "-m")), mig_minors, path)


def _host(gpus: dict, *, vcpus: int, sockets: int, cores: int, threads: int) -> dict:
    return {
        "processor_vcpus": vcpus, "processor_count": sockets, "processor_cores": cores,
        "processor_threads_per_core": threads, "memtotal_mb": 512_000, "deepops_gpus": gpus,
    }


def _a100_host(gpus: dict) -> dict:  # the PCIe topology gives GPU 0 CPUs 0-31, GPU 1 CPUs 32-63
    return _host(gpus, vcpus=64, sockets=2, cores=32, threads=1)


def _h100_host(gpus: dict) -> dict:  # the HGX topology splits the GPUs over two NUMA nodes of 56 cores
    return _host(gpus, vcpus=224, sockets=2, cores=56, threads=2)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> dict:
    """Facts of five simulated nodes:

    gpu01  2x A100 80GB: GPU 0 cut into 3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb; GPU 1 whole (MIG off)
    gpu02  2x H100 80GB: GPU 0 cut into 7x 1g.10gb; GPU 1 whole
    gpu03  as gpu02, made the same way
    gpu04  4x H100 80GB, all whole
    gpu05  1x A100 80GB in MIG mode without instances
    """
    root = tmp_path_factory.mktemp("mig-nodes")
    nodes = {
        "gpu01": SimulatedNode(root, "gpu01", GpuSpec("a100-80gb", 2)),  # boots with MIG on
        "gpu02": SimulatedNode(root, "gpu02", GpuSpec("h100", 2)),
        "gpu03": SimulatedNode(root, "gpu03", GpuSpec("h100", 2)),
        "gpu04": SimulatedNode(root, "gpu04", GpuSpec("h100", 4)),
        "gpu05": SimulatedNode(root, "gpu05", GpuSpec("a100-80gb", 1)),
    }
    nodes["gpu01"].smi("mig", "-i", "0", "-cgi", A100_MIXED, "-C")
    nodes["gpu01"].smi("-i", "1", "-mig", "0")
    for name in ("gpu02", "gpu03"):
        nodes[name].smi("-i", "0", "-mig", "1")
        nodes[name].smi("mig", "-i", "0", "-cgi", H100_SEVEN, "-C")
    hosts = {name: (_a100_host if name in ("gpu01", "gpu05") else _h100_host)(node.gpu_facts())
             for name, node in nodes.items()}
    return {"nodes": nodes, "facts": hosts}


def _caps(gi: int, gpu_minor: int = 0) -> str:
    """The capability devices of GPU instance GI (one compute instance, 0) as the stand-in numbers them:
    NVIDIA's mig-minors layout, 3 + 135 per GPU minor + 9 per GPU instance (+ 1 for its CI 0)."""
    base = 3 + 135 * gpu_minor + 9 * gi
    return f"/dev/nvidia{gpu_minor},/dev/nvidia-caps/nvidia-cap{base},/dev/nvidia-caps/nvidia-cap{base + 1}"


def _gres_count(fields: dict[str, str]) -> int:
    """GRES of one gres.conf line: MultipleFiles is one whatever it lists; File=/dev/nvidia[0-3] is four."""
    if "MultipleFiles" in fields:
        return 1
    inside = fields["File"].partition("[")[2].rstrip("]")
    if not inside:
        return 1
    return sum(int(last or first) - int(first) + 1
               for first, _sep, last in (part.partition("-") for part in inside.split(",")))


def lines(text: str, prefix: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(prefix)]


def test_facts_give_every_mig_device_its_profile_ids_and_device_files(cluster):
    a100 = cluster["facts"]["gpu01"]["deepops_gpus"]
    assert (a100["mig_problems"], a100["mig_device_files_known"], a100["mig_device_count"]) == ([], True, 4)
    assert a100["gres_by_type"] == {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2, "a100": 1}
    assert [(d["profile"], d["gpu_instance_id"], d["compute_instance_id"], ",".join(d["device_files"]))
            for d in a100["gpus"][0]["mig_devices"]] == [
        ("3g.40gb", 2, 0, _caps(2)), ("2g.20gb", 3, 0, _caps(3)), ("1g.10gb", 9, 0, _caps(9)), ("1g.10gb", 10, 0, _caps(10)),
    ]
    assert a100["gpus"][1]["mig_devices"] == []
    h100 = cluster["facts"]["gpu02"]["deepops_gpus"]
    assert h100["gres_by_type"] == {"1g.10gb": 7, "h100": 1}
    assert [d["gpu_instance_id"] for d in h100["gpus"][0]["mig_devices"]] == list(range(7, 14))
    # The capability device nodes named in the facts are the ones the stand-in created.
    caps = cluster["nodes"]["gpu02"].root / "dev" / "nvidia-caps"
    named = {path.rsplit("/", 1)[1] for d in h100["gpus"][0]["mig_devices"] for path in d["device_files"][1:]}
    assert named == {path.name for path in caps.iterdir()} - {"nvidia-cap1", "nvidia-cap2"}
    empty = cluster["facts"]["gpu05"]["deepops_gpus"]
    assert (empty["mig_enabled"], empty["gres_by_type"], empty["mig_problems"]) == (True, {}, [])


def test_node_lines_count_mig_devices_by_profile_and_compress_equal_layouts(cluster):
    conf = render("slurm.conf.j2", cluster["facts"], slurm_realmemory_reserve_mb=0)
    common = "RealMemory=512000"
    assert lines(conf, "NodeName=") == [
        f"NodeName=gpu01 CPUs=64 Sockets=2 CoresPerSocket=32 ThreadsPerCore=1 {common} "
        "Gres=gpu:3g.40gb:1,gpu:2g.20gb:1,gpu:1g.10gb:2,gpu:a100:1 Features=a100 State=UNKNOWN",
        f"NodeName=gpu[02-03] CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2 {common} "
        "Gres=gpu:1g.10gb:7,gpu:h100:1 Features=h100,nvlink,nvswitch State=UNKNOWN",
        f"NodeName=gpu04 CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2 {common} Gres=gpu:h100:4 Features=h100,nvlink,nvswitch State=UNKNOWN",
        # MIG mode on, no instances: no GRES at all, so no GPU model feature either
        f"NodeName=gpu05 CPUs=64 Sockets=2 CoresPerSocket=32 ThreadsPerCore=1 {common} State=UNKNOWN",
    ]
    assert "AccountingStorageTRES=gres/gpu,gres/gpu:1g.10gb,gres/gpu:2g.20gb,gres/gpu:3g.40gb,gres/gpu:a100,gres/gpu:h100" in conf


def test_gres_conf_has_one_multiplefiles_line_per_mig_device(cluster):
    gres = lines(render("gres.conf.j2", cluster["facts"]), "NodeName=")
    assert gres == [
        f"NodeName=gpu01 Name=gpu Type=3g.40gb MultipleFiles={_caps(2)} Cores=0-31",
        f"NodeName=gpu01 Name=gpu Type=2g.20gb MultipleFiles={_caps(3)} Cores=0-31",
        f"NodeName=gpu01 Name=gpu Type=1g.10gb MultipleFiles={_caps(9)} Cores=0-31",
        f"NodeName=gpu01 Name=gpu Type=1g.10gb MultipleFiles={_caps(10)} Cores=0-31",
        "NodeName=gpu01 Name=gpu Type=a100 File=/dev/nvidia1 Cores=32-63",
        *(f"NodeName=gpu[02-03] Name=gpu Type=1g.10gb MultipleFiles={_caps(gi)} Cores=0-55" for gi in range(7, 14)),
        "NodeName=gpu[02-03] Name=gpu Type=h100 File=/dev/nvidia1 Cores=56-111",
        "NodeName=gpu04 Name=gpu Type=h100 File=/dev/nvidia[0-1] Cores=0-55",
        "NodeName=gpu04 Name=gpu Type=h100 File=/dev/nvidia[2-3] Cores=56-111",
    ]


def test_gres_conf_and_node_line_agree_per_type(cluster):
    """What slurmd checks at start: every type's gres.conf records add up to the node's Gres= count."""
    records = slurm.slurm_node_facts(cluster["facts"])
    for host, record in records.items():
        counted: dict[str, int] = {}
        for line in slurm.slurm_gres_lines({host: record}):
            fields = dict(field.split("=", 1) for field in line.split())
            counted[fields["Type"]] = counted.get(fields["Type"], 0) + _gres_count(fields)
        assert counted == cluster["facts"][host]["deepops_gpus"]["gres_by_type"], host


def test_default_partitions_by_model_and_optionally_by_mig_profile(cluster):
    plain = lines(render("slurm.conf.j2", cluster["facts"]), "PartitionName=")
    assert plain == [
        "PartitionName=a100 Nodes=gpu01 Default=NO MaxTime=INFINITE State=UP",
        "PartitionName=h100 Nodes=gpu[02-04] Default=NO MaxTime=INFINITE State=UP",
        "PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
    ]
    mig = lines(render("slurm.conf.j2", cluster["facts"], slurm_mig_partitions=True), "PartitionName=")
    assert mig == [
        "PartitionName=1g.10gb Nodes=gpu[01-03] Default=NO MaxTime=INFINITE State=UP",
        "PartitionName=2g.20gb Nodes=gpu01 Default=NO MaxTime=INFINITE State=UP",
        "PartitionName=3g.40gb Nodes=gpu01 Default=NO MaxTime=INFINITE State=UP",
        *plain,
    ]


def test_a_changed_layout_changes_the_records_and_splits_the_line(cluster, tmp_path):
    """gpu03 re-cut into 3g.40gb x2: its definition differs, so it leaves gpu02's line (and slurmctld restarts)."""
    node = SimulatedNode(tmp_path, "gpu03", GpuSpec("h100", 2))
    node.smi("-i", "0", "-mig", "1")
    node.smi("mig", "-i", "0", "-cgi", "3g.40gb,3g.40gb", "-C")
    facts = {**cluster["facts"], "gpu03": _h100_host(node.gpu_facts())}
    assert slurm.slurm_node_facts(facts)["gpu03"] != slurm.slurm_node_facts(cluster["facts"])["gpu03"]
    nodes = lines(render("slurm.conf.j2", facts), "NodeName=gpu0")
    assert [line.split()[0] for line in nodes] == ["NodeName=gpu01", "NodeName=gpu02", "NodeName=gpu03",
                                                   "NodeName=gpu04", "NodeName=gpu05"]
    assert "Gres=gpu:3g.40gb:2,gpu:h100:1" in nodes[2]
    gres = lines(render("gres.conf.j2", facts), "NodeName=gpu03 ")
    assert gres == [
        f"NodeName=gpu03 Name=gpu Type=3g.40gb MultipleFiles={_caps(gi)} Cores=0-55" for gi in (1, 2)
    ] + ["NodeName=gpu03 Name=gpu Type=h100 File=/dev/nvidia1 Cores=56-111"]


def test_missing_minors_file_fails_clearly_and_renders_nothing(cluster):
    facts = cluster["nodes"]["gpu02"].gpu_facts(minors=False)
    assert facts["mig_device_files_known"] is False
    assert all(device["device_files"] is None for device in facts["gpus"][0]["mig_devices"])
    (problem,) = facts["mig_problems"]
    assert problem.startswith("the MIG minors file ") and problem.endswith(
        "/nowhere/mig-minors was not read, so the capability device files of the MIG devices on GPU 0 are unknown")
    hosts = {**cluster["facts"], "gpu02": _h100_host(facts)}
    with pytest.raises(slurm.SlurmConfError, match=r"^gpu02: GPU 0 \(/dev/nvidia0\) MIG device 0 .*device files are unknown"):
        slurm.slurm_node_facts(hosts)
    # Through the filter, as the role calls it: a filter error naming the host, not a traceback.
    node_facts = slurm_filters.FilterModule().filters()["slurm_node_facts"]
    with pytest.raises(AnsibleFilterError, match="slurm_node_facts: gpu02: GPU 0"):
        node_facts(hosts)
    with pytest.raises(slurm.SlurmConfError):
        render("gres.conf.j2", hosts)


DEBIAN_12 = {"distribution": "Debian", "distribution_version": "12.8", "distribution_release": "bookworm"}


def test_preflight_stops_on_mig_problems_before_any_change():
    """The role's per-host assert, its problems evaluated as Ansible does (Jinja2 on the facts)."""
    tasks = yaml.safe_load((ROLE / "tasks" / "preflight.yml").read_text())
    gather = next(task for task in tasks if "deepops.cluster.nvidia_gpu_facts" in task)
    assert gather["deepops.cluster.nvidia_gpu_facts"]["mig_minors_path"] == "{{ nvidia_mig_minors_path | default(omit) }}"
    (check,) = [task for task in tasks if "mig_problems" in str(task.get("vars", {}).get("__slurm_problems"))]
    assert check["ansible.builtin.assert"]["that"] == ["__slurm_problems | length == 0"]
    env = jinja2.Environment()
    env.filters.update({"to_json": json.dumps, "deepops.cluster.os_support_problems": platform_filters.os_support_problems})

    def problems(host: str, gpu_facts: dict, gpu_type: str = "") -> list[str]:
        context = {"ansible_facts": {**DEBIAN_12, "deepops_gpus": gpu_facts}, "inventory_hostname": host,
                   "_slurm_computes": ["gpu02"], "slurm_gpu_type": gpu_type}
        context["__slurm_gpus"] = env.compile_expression(check["vars"]["__slurm_gpus"].strip()[2:-2])(context)
        return env.compile_expression(check["vars"]["__slurm_problems"].strip()[2:-2])(context)

    found = ["the MIG minors file /proc/driver/nvidia-caps/mig-minors was not read, so ..."]
    assert problems("gpu02", {"mig_problems": found}) == [
        "gpu02: cannot write gres.conf for its MIG devices: the MIG minors file /proc/driver/nvidia-caps/mig-minors"
        " was not read, so ..."]
    assert problems("gpu02", {"mig_problems": []}) == problems("gpu02", {}) == []
    # The controller is not a compute node: its GPUs are not checked.
    assert problems("ctl01", {"mig_problems": found}, "a100") == []
    assert problems("gpu02", {"types": ["a100"], "by_type": {"a100": 4}, "count": 4}, "a100") == []
    [wrong] = problems("gpu02", {"types": ["a100"], "by_type": {"a100": 4}, "count": 4}, "h100")
    assert wrong.startswith('gpu02: the inventory says slurm_gpu_type=h100, but nvidia-smi reports {"a100": 4}')
    assert problems("gpu02", {"count": 0}, "h100")[0].endswith("reports no GPUs. Fix the inventory (or the node) before deploying")
    member = yaml.safe_load((ROLE / "tasks" / "member_facts.yml").read_text())
    (delegated,) = [task for task in member if "deepops.cluster.nvidia_gpu_facts" in task]
    assert "hostvars[__slurm_member]['nvidia_mig_minors_path']" in delegated["deepops.cluster.nvidia_gpu_facts"]["mig_minors_path"]


def test_the_roles_accounting_tres_setting_is_rendered_from_the_records(cluster):
    """vars/main.yml's AccountingStorageTRES expression, rendered with the collection's filters."""
    expression = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["_slurm_conf_defaults"]["AccountingStorageTRES"]
    env = jinja2.Environment()
    env.filters.update({f"deepops.cluster.{name}": function for name, function in slurm_filters.FilterModule().filters().items()})
    records = slurm.slurm_node_facts(cluster["facts"])
    assert env.from_string(expression).render(_slurm_node_records=records) == (
        "gres/gpu,gres/gpu:1g.10gb,gres/gpu:2g.20gb,gres/gpu:3g.40gb,gres/gpu:a100,gres/gpu:h100"
    )
    whole = {host: record for host, record in records.items() if host == "gpu04"}
    assert env.from_string(expression).render(_slurm_node_records=whole) == "gres/gpu,gres/gpu:h100"
    assert env.from_string(expression).render(_slurm_node_records={}) == "gres/gpu"


def test_saved_records_of_earlier_deploys_still_render():
    """Records saved before MIG support (no files, no parent) render as they did."""
    record = {"cpus": 8, "sockets": 1, "cores_per_socket": 8, "threads_per_core": 1, "real_memory": 1000,
              "gpus": [{"type": "h100", "device": f"/dev/nvidia{i}", "cores": None} for i in range(2)]}
    assert slurm.slurm_gres_lines({"gpu01": record}) == ["NodeName=gpu01 Name=gpu Type=h100 File=/dev/nvidia[0-1]"]
    assert slurm.slurm_node_lines({"gpu01": record})[0].endswith("Gres=gpu:h100:2")


@pytest.mark.parametrize("attack", ["x\nAuthType=auth/none", "x #rest", "1g.10gb Count=99"])
def test_a_mig_profile_or_device_file_cannot_break_out_of_its_line(attack):
    mig = {"index": 0, "gpu_instance_id": 7, "compute_instance_id": 0, "profile": "1g.10gb",
           "device_files": ["/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap66", "/dev/nvidia-caps/nvidia-cap67"]}
    gpu = {"index": 0, "minor_number": 0, "device": "/dev/nvidia0", "type": "h100",
           "mig_mode": {"current": "Enabled", "pending": "Enabled"}, "mig_devices": [mig]}
    host = _host({"gpus": [gpu]}, vcpus=8, sockets=1, cores=8, threads=1)
    for bad in ({**mig, "profile": attack}, {**mig, "device_files": [*mig["device_files"][:2], attack]}):
        records = slurm.slurm_node_facts({"gpu01": {**host, "deepops_gpus": {"gpus": [{**gpu, "mig_devices": [bad]}]}}})
        with pytest.raises(slurm.SlurmConfError, match="GPU type|MIG device file"):
            slurm.slurm_gres_lines(records)


def _slurm_play_imports() -> dict[str, dict]:
    """The Slurm plays' role imports (playbooks/components/slurm.yml), by the tasks file they import."""
    play = yaml.safe_load((ROLE.parents[1] / "playbooks" / "components" / "slurm.yml").read_text())
    return {task["ansible.builtin.import_role"].get("tasks_from"): task for entry in play
            for task in entry.get("tasks", []) if "ansible.builtin.import_role" in task}


def test_the_mig_resume_reads_node_states_as_slurm_ready_does():
    """The deploy hands the controller's first read of the nodes' states to the
    MIG resume, and the read the resume used to slurm's ready.yml, in place of
    their own (playbooks/components/slurm.yml): all three must be the same read."""
    slurm_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    mig_vars = yaml.safe_load((ROLE.parent / "mig" / "vars" / "main.yml").read_text())
    resume = yaml.safe_load((ROLE.parent / "mig" / "tasks" / "resume.yml").read_text())
    [read] = [task for task in resume if task.get("register") == "__mig_sinfo"]
    assert read["ansible.builtin.command"]["argv"] == slurm_vars["_slurm_sinfo_nodes_argv"]
    controller = yaml.safe_load((ROLE / "tasks" / "controller.yml").read_text())
    [first_read] = [task for task in controller if task.get("register") == "__slurm_controller_reads"]
    assert "{'name': 'nodes', 'argv': _slurm_sinfo_nodes_argv" in first_read["deepops.cluster.host_reads"]["commands"]
    assert "__slurm_controller_reads.commands.nodes" in slurm_vars["_slurm_nodes_read_at_start"]
    assert "_mig_nodes_read" in mig_vars["_mig_sinfo"] and "__mig_sinfo" in mig_vars["_mig_sinfo"]
    imports = _slurm_play_imports()
    assert imports["resume.yml"]["vars"]["_mig_nodes_read"] == "{{ _slurm_nodes_read_at_start }}"
    handed = imports["ready"]["vars"]["_slurm_ready_nodes_read"]
    assert "_slurm_nodes_read_at_start" in handed and "__mig_sinfo" in handed


def test_the_readiness_wait_reads_again_after_the_mig_resume_resumed_a_node():
    """The read the MIG resume made shows the nodes it then resumed as drained,
    which the readiness wait counts as up: handed on, the wait would go by it
    instead of looking at the nodes after their resume. ready.yml gets no read
    (and makes its own) where the resume changed a node, the earlier read
    otherwise."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    imports = _slurm_play_imports()
    handed = imports["ready"]["vars"]["_slurm_ready_nodes_read"]
    resume = yaml.safe_load((ROLE.parent / "mig" / "tasks" / "resume.yml").read_text())
    assert [task for task in resume if task.get("register") == "__mig_resumed"]

    def read(**variables):
        return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(handed))

    at_start = {"rc": 0, "stdout": "gpu02|idle|none"}
    mig_read = {"rc": 0, "stdout": "gpu02|drain|deepops: MIG layout change"}
    resumed = {"changed": True, "results": [{"changed": True, "item": "gpu02"}]}
    none_resumed = {"changed": False, "skipped": True, "results": []}
    assert read(_slurm_nodes_read_at_start=at_start) == at_start
    assert read(_slurm_nodes_read_at_start=at_start, __mig_resumed=none_resumed) == at_start
    assert read(_slurm_nodes_read_at_start={}, __mig_sinfo=mig_read, __mig_resumed=none_resumed) == mig_read
    assert read(_slurm_nodes_read_at_start={}, __mig_sinfo=mig_read, __mig_resumed=resumed) == {}
    assert read(_slurm_nodes_read_at_start=at_start, __mig_resumed=resumed) == {}
