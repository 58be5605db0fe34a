"""slurm.conf and gres.conf rendering from facts, in-process: the role's
templates rendered with Jinja2 and the project's filter plugins, with facts
derived from the real nvidia-smi fixtures through the GPU facts parser.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from slurm_render import ROLE, hostlist, nvidia_smi, render, slurm

REPO = Path(__file__).resolve().parents[2]


def _fixture_dir() -> Path:
    for candidate in (REPO / "tests" / "fixtures" / "nvidia-smi", REPO / "deepops_py" / "virtual" / "fixtures"):
        if list(candidate.rglob("*.xml")):
            return candidate
    pytest.skip("no nvidia-smi XML fixtures in the project")


def _gpu_facts(pattern: str) -> dict:
    """GPU facts from a real ``nvidia-smi -q -x`` capture (first file whose name contains ``pattern``)."""
    xml = sorted(path for path in _fixture_dir().rglob("*.xml") if pattern in path.name.lower())
    if not xml:
        pytest.skip(f"no {pattern} capture among the fixtures")
    return nvidia_smi.build_facts(nvidia_smi.parse_xml(xml[0].read_text()), None)


def _host_facts(gpus: dict | None, *, vcpus=224, sockets=2, cores=56, threads=2, mem=2_064_000) -> dict:
    facts = {
        "processor_vcpus": vcpus,
        "processor_count": sockets,
        "processor_cores": cores,
        "processor_threads_per_core": threads,
        "memtotal_mb": mem,
    }
    if gpus is not None:
        facts["deepops_gpus"] = gpus
    return facts


def _with_affinity(gpus: dict, affinities: list[str]) -> dict:
    gpus = {**gpus, "gpus": [dict(gpu) for gpu in gpus["gpus"]]}
    for gpu, affinity in zip(gpus["gpus"], affinities):
        gpu["cpu_affinity"] = affinity
    return gpus


def lines(text: str, prefix: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(prefix)]


def test_dgx_h100_node_line_and_gres_with_cores():
    h100 = _with_affinity(_gpu_facts("h100"), ["0-55,112-167"] * 4 + ["56-111,168-223"] * 4)
    facts = {f"dgx{i:02d}": _host_facts(h100) for i in range(1, 17)}
    conf = render("slurm.conf.j2", facts)
    assert lines(conf, "NodeName=") == [
        "NodeName=dgx[01-16] CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2 RealMemory=2062976 "
        f"Gres=gpu:h100:{h100['count']} Features=h100,nvswitch State=UNKNOWN"
    ]
    assert "SlurmctldHost=ctl01" in conf and "SlurmctldParameters=enable_configless" in conf
    gres = lines(render("gres.conf.j2", facts), "NodeName=")
    if h100["count"] == 8:
        assert gres == [
            "NodeName=dgx[01-16] Name=gpu Type=h100 File=/dev/nvidia[0-3] Cores=0-55",
            "NodeName=dgx[01-16] Name=gpu Type=h100 File=/dev/nvidia[4-7] Cores=56-111",
        ]
    # Default partitions: one per type plus the default "all".
    assert lines(conf, "PartitionName=") == [
        "PartitionName=h100 Nodes=dgx[01-16] Default=NO MaxTime=INFINITE State=UP",
        "PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
    ]


def test_simulated_gpus_on_a_small_machine_leave_cores_out():
    h100 = _with_affinity(_gpu_facts("h100"), ["0-55,112-167"] * 8)
    facts = {"gpu01": _host_facts(h100, vcpus=2, sockets=1, cores=2, threads=1, mem=24000)}
    gres = lines(render("gres.conf.j2", facts), "NodeName=")
    assert gres and all("Cores=" not in line for line in gres)
    assert gres[0].startswith("NodeName=gpu01 Name=gpu Type=h100 File=/dev/nvidia[0-")


def test_mixed_cluster_types_cpu_nodes_and_reserve():
    h100, a100 = _gpu_facts("h100"), _gpu_facts("a100")
    facts = {
        "gpu01": _host_facts(h100), "gpu02": _host_facts(h100),
        "gpu03": _host_facts(a100), "cpu01": _host_facts(None), "cpu02": _host_facts({"present": False, "gpus": []}),
        "gone": {},  # unreachable, no facts: left out, the role asserts on it
    }
    conf = render("slurm.conf.j2", facts, slurm_realmemory_reserve_mb=4000)
    nodes = lines(conf, "NodeName=")
    assert f"NodeName=gpu[01-02] CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2 RealMemory=2060000 Gres=gpu:h100:{h100['count']} Features=h100,nvswitch State=UNKNOWN" in nodes
    assert any(line.startswith("NodeName=gpu03 ") and f"Gres=gpu:{a100['types'][0]}:" in line for line in nodes)
    assert "NodeName=cpu[01-02] CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2 RealMemory=2060000 State=UNKNOWN" in nodes
    assert not any("gone" in line for line in nodes)
    gres = render("gres.conf.j2", facts)
    assert "cpu0" not in gres
    parts = lines(conf, "PartitionName=")
    assert parts[-1] == "PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
    assert "PartitionName=h100 Nodes=gpu[01-02] Default=NO MaxTime=INFINITE State=UP" in parts


def test_ten_thousand_nodes_compress_to_one_line_each():
    h100 = _with_affinity(_gpu_facts("h100"), ["0-55,112-167"] * 4 + ["56-111,168-223"] * 4)
    facts = {f"gpu{i:05d}": _host_facts(h100) for i in range(1, 10001)}
    facts.update({f"cpu{i:05d}": _host_facts(None) for i in range(1, 10001)})
    # One odd node in the middle splits the range.
    facts["gpu05000"] = _host_facts(h100, mem=1_000_000)
    conf = render("slurm.conf.j2", facts)
    nodes = lines(conf, "NodeName=")
    assert len(nodes) == 3
    assert nodes[0].startswith("NodeName=cpu[00001-10000] ")
    assert nodes[1].startswith("NodeName=gpu[00001-04999,05001-10000] ")
    assert nodes[2].startswith("NodeName=gpu05000 ")
    gres = lines(render("gres.conf.j2", facts), "NodeName=")
    assert all(line.startswith("NodeName=gpu[00001-10000] ") for line in gres)
    expanded = hostlist.hostlist_expand(nodes[1].split()[0].split("=", 1)[1])
    assert len(expanded) == 9999 and "gpu05000" not in expanded


def test_partitions_and_extra_settings():
    facts = {"gpu01": _host_facts(_gpu_facts("h100"))}
    conf = render(
        "slurm.conf.j2", facts,
        slurm_partitions=[
            {"name": "batch", "nodes": ["gpu01"], "default": True, "max_time": "7-00:00:00",
             "options": {"OverSubscribe": "NO", "State": "DOWN"}},
            {"name": "debug", "nodes": "gpu01"},
        ],
        slurm_config={"SchedulerParameters": "bf_continue", "ClusterName": "site", "Bogus": None},
    )
    assert lines(conf, "PartitionName=") == [
        "PartitionName=batch Nodes=gpu01 Default=YES MaxTime=7-00:00:00 OverSubscribe=NO State=DOWN",
        "PartitionName=debug Nodes=gpu01 Default=NO MaxTime=INFINITE State=UP",
    ]
    assert "SchedulerParameters=bf_continue" in conf and "ClusterName=site" in conf and "Bogus" not in conf


def test_partitions_leave_out_the_nodes_being_removed():
    # deepops node remove gpu03 with hand-written partitions that name it: slurm.conf no longer
    # defines gpu03, and slurmctld would not start with a partition naming it.
    partitions = [{"name": "batch", "nodes": "gpu[01-03]"}, {"name": "big", "nodes": ["gpu03"]}, {"name": "all"}]
    assert slurm.slurm_partition_lines(partitions, ["gpu03"]) == [
        "PartitionName=batch Nodes=gpu[01-02] Default=NO MaxTime=INFINITE State=UP",
        "PartitionName=big Default=NO MaxTime=INFINITE State=UP",  # kept, holding no node
        "PartitionName=all Nodes=ALL Default=NO MaxTime=INFINITE State=UP",
    ]
    assert slurm.slurm_partition_lines(partitions)[0] == "PartitionName=batch Nodes=gpu[01-03] Default=NO MaxTime=INFINITE State=UP"


@pytest.mark.parametrize(
    ("affinity", "cores", "cpus", "expected"),
    [
        ("0-55,112-167", 112, 224, "0-55"),
        ("56-111,168-223", 112, 224, "56-111"),
        ("0-223", 112, 224, None),  # every core: no constraint
        ("0-55,112-167", 2, 2, None),  # CPUs beyond the node
        (None, 112, 224, None),
        ("N/A", 112, 224, None),
        ("0,2,4", 4, 8, "0,2"),  # 4 -> core 0 (sibling thread)
    ],
)
def test_gpu_cores_rule(affinity, cores, cpus, expected):
    assert slurm.gpu_cores(affinity, cores, cpus) == expected


def test_inconsistent_cpu_topology_keeps_only_cpus():
    facts = {"vm01": _host_facts(None, vcpus=6, sockets=1, cores=4, threads=1, mem=8000)}
    assert lines(render("slurm.conf.j2", facts), "NodeName=") == ["NodeName=vm01 CPUs=6 RealMemory=6976 State=UNKNOWN"]


def test_nodes_to_resume():
    sinfo = "gpu01|down*|Not responding\ngpu02|drain|maintenance\ngpu03|down|Node unexpectedly rebooted\nx|down|Not responding\ngpu04|idle|none"
    assert slurm.slurm_nodes_to_resume(sinfo, ["gpu01", "gpu02", "gpu03", "gpu04"], ["Not responding", "Node unexpectedly rebooted"]) == ["gpu01", "gpu03"]


def test_features_come_from_gpus_topology_cpu_vendor_and_the_inventory():
    h100 = _gpu_facts("h100")
    a100 = _gpu_facts("a100")
    amd = {**_host_facts(a100), "processor": ["0", "AuthenticAMD", "AMD EPYC 7742 64-Core Processor"]}
    intel = {**_host_facts(h100), "processor": ["0", "GenuineIntel", "Intel(R) Xeon(R) Platinum 8480C"]}
    facts = {"gpu01": intel, "gpu02": amd, "cpu01": _host_facts(None)}
    conf = render("slurm.conf.j2", facts, node_features={"gpu02": ["ib", "localnvme"], "cpu01": ["bigmem"]})
    by_node = {line.split()[0]: line for line in lines(conf, "NodeName=")}
    assert "Features=h100,intel,nvswitch " in by_node["NodeName=gpu01"]
    a100_type = a100["types"][0]
    assert f"Features={','.join(sorted([a100_type, 'amd', 'ib', 'localnvme']))} " in by_node["NodeName=gpu02"]
    assert "Features=bigmem " in by_node["NodeName=cpu01"]


def test_a_node_without_features_gets_no_features_key():
    # No GPUs, no vendor string, nothing declared; and records saved by an
    # older deploy (no "features" key) still render.
    assert "Features=" not in render("slurm.conf.j2", {"cpu01": _host_facts(None)})
    record = slurm.slurm_node_facts({"cpu01": _host_facts(None)})["cpu01"]
    del record["features"]
    assert "Features" not in slurm.slurm_node_line(record)


@pytest.mark.parametrize("bad", ["a,b", "x|y", "has space", "", 7])
def test_a_declared_feature_slurm_would_parse_as_an_operator_is_refused(bad):
    with pytest.raises(slurm.SlurmConfError, match="node feature"):
        slurm.slurm_node_facts({"cpu01": _host_facts(None)}, 0, {"cpu01": [bad]})


def test_node_states_from_sinfo_keep_a_reason_with_bars():
    sinfo = "gpu01|idle|none\ngpu03|drained|deepops node remove\ngpu04|mixed|a|b reason\n\nnot a row"
    assert slurm.slurm_node_states(sinfo) == slurm.slurm_node_states(sinfo.splitlines()) == {
        "gpu01": ["idle", "none"], "gpu03": ["drained", "deepops node remove"], "gpu04": ["mixed", "a|b reason"]}


# sinfo -h -N -o '%N|%t|%E' rows of a busy cluster: every node here has a slurmd that answers.
UP_ROWS = {
    "idle": "idle|none", "mixed": "mix|none", "allocated": "alloc|none", "completing": "comp|none",
    "planned": "plnd|none", "planned-flag": "mix-|none", "reserved": "resv|none", "maintenance": "maint|none",
    "maint-flag": "idle$|none", "drained": "drain|disk swap", "draining": "drng|disk swap", "failed": "fail|psu",
    "reboot-pending": "alloc@|none",
}
# ...and here it has not registered, its registration was refused, or it cannot answer now.
NOT_UP_ROWS = {
    "down": ("down|Not responding", "down (Not responding)"), "unknown": ("unk|none", "unk"),
    "invalid": ("inval|gres/gpu count reported lower than configured (4 < 8)",
                "inval (gres/gpu count reported lower than configured (4 < 8))"),
    "future": ("futr|none", "futr"), "not-responding": ("idle*|none", "idle*"),
    "drained-not-responding": ("drain*|disk swap", "drain* (disk swap)"), "powered-off": ("idle~|none", "idle~"),
    "powering-up": ("idle#|none", "idle#"), "powering-down": ("idle%|none", "idle%"),
    "rebooting": ("mix^|none", "mix^"),
}


def _sinfo(rows: dict[str, str]) -> str:
    # Each node twice, as sinfo lists a node once per partition.
    return "\n".join(f"{node}|{row}" for node, row in rows.items() for _partition in (1, 2))


def test_a_node_is_up_when_slurmd_answers_whatever_an_admin_or_the_scheduler_made_of_it():
    assert slurm.slurm_nodes_not_up(_sinfo(UP_ROWS), list(UP_ROWS)) == {}


def test_a_node_is_not_up_until_slurmd_registered_and_answers_and_says_why():
    rows = {node: row for node, (row, _why) in NOT_UP_ROWS.items()}
    expected = {node: why for node, (_row, why) in NOT_UP_ROWS.items()}
    assert slurm.slurm_nodes_not_up(_sinfo(rows).splitlines(), list(rows)) == expected


def test_a_node_sinfo_does_not_list_is_not_up_and_other_nodes_are_not_judged():
    sinfo = _sinfo({"gpu01": "idle|none", "gpu09": "down|Not responding"})
    assert slurm.slurm_nodes_not_up(sinfo, ["gpu01", "gpu02"]) == {"gpu02": "not known to slurmctld"}
    assert slurm.slurm_nodes_not_up("", []) == {}
