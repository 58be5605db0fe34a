"""The GPU health check (roles/slurm/files/deepops_gpu_health.py): parsing real nvidia-smi
captures and Slurm's output, the drain/resume/requeue decisions, and a whole check on a
simulated node whose stand-in nvidia-smi reports injected faults, with scontrol and squeue
stand-ins that record what the check asked of Slurm."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from by_path import load_module
from gpu_fixtures import A100_MIG_XML, A100_NOMIG_XML, FIXTURES, H100_XML, L40S_XML
from mig_standin import STAND_IN, install_node

from deepops_py.virtual import payload
from deepops_py.virtual.gpus import GpuSpec

REPO = Path(__file__).resolve().parents[2]
health = load_module("deepops_gpu_health", REPO / "roles" / "slurm" / "files" / "deepops_gpu_health.py")
FAULT_TOOL = payload.DATA_DIR / "deepops-simulated-gpu-fault"

H100_NODE = ("NodeName=gpu01 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=0.50 "
             "AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:h100:8(S:0) NodeAddr=gpu01 NodeHostName=gpu01 "
             "Version=22.05.8 OS=Linux 6.1.0 RealMemory=2000 AllocMem=0 FreeMem=1500 Sockets=2 Boards=1 "
             "State={state} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=all,h100 "
             "BootTime=2026-12-02T04:00:00 SlurmdStartTime=2026-12-02T04:10:00 LastBusyTime=2026-12-02T04:20:00 "
             "CfgTRES=cpu=2,mem=2000M,billing=2,gres/gpu=8,gres/gpu:h100=8 AllocTRES= CapWatts=n/a "
             "CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s{reason}")


def node_line(state="IDLE", reason=""):
    return H100_NODE.format(state=state, reason=f" Reason={reason} [root@2026-12-02T05:00:01]" if reason else "")


def xml(name: str) -> str:
    return (FIXTURES / name).read_text()


# --------------------------------------------------------------------------
# Parsing real captures


@pytest.mark.parametrize(("name", "count", "devices", "first_pci"), [
    (H100_XML, 8, 8, "0000:53:00.0"),
    (A100_NOMIG_XML, 1, 1, None),
    (A100_MIG_XML, 1, 4, None),  # MIG on with four 1g.20gb devices: four GRES
    (L40S_XML, 1, 1, None),
])
def test_real_captures_parse_healthy(name, count, devices, first_pci):
    gpus = health.parse_gpus(xml(name))
    assert len(gpus) == count
    assert sum(gpu.devices for gpu in gpus) == devices
    assert all(gpu.ecc_uncorrectable == 0 for gpu in gpus)
    assert not any(gpu.remap_pending or gpu.remap_failure for gpu in gpus)
    if first_pci:
        assert gpus[0].pci == first_pci
    assert health.find_faults(gpus, "", devices, [], "ok") == []


def test_ecc_counters_of_every_generation_are_summed():
    newer = "<volatile><sram_uncorrectable_parity>1</sram_uncorrectable_parity><sram_uncorrectable_secded>2" \
            "</sram_uncorrectable_secded><dram_uncorrectable>3</dram_uncorrectable><dram_correctable>9</dram_correctable></volatile>"
    legacy = "<volatile><single_bit><total>5</total></single_bit><double_bit><total>4</total></double_bit></volatile>"
    off = "<volatile><dram_uncorrectable>N/A</dram_uncorrectable></volatile>"
    for body, expected in ((newer, 6), (legacy, 4), (off, None)):
        document = f'<nvidia_smi_log><gpu id="00000000:07:00.0"><minor_number>0</minor_number><ecc_errors>{body}' \
                   "</ecc_errors></gpu></nvidia_smi_log>"
        assert health.parse_gpus(document)[0].ecc_uncorrectable == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("00000000:53:00.0", "0000:53:00.0"), ("0000:3b:00", "0000:3b:00.0"), ("0000:3B:00.0", "0000:3b:00.0"),
])
def test_pci_ids_of_nvidia_smi_and_the_kernel_agree(text, expected):
    assert health.normalize_pci(text) == expected


@pytest.mark.parametrize(("gres", "count"), [
    ("gpu:h100:8(S:0-1)", 8), ("gpu:1g.10gb:2,gpu:a100:3", 5), ("gpu:4", 4), ("(null)", 0),
    ("gpu:3g.20gb:1(S:0),gpu:1g.5gb:2(S:0-1),gpu:a100:3(S:0-1)", 6),
])
def test_gres_gpu_counts(gres, count):
    assert health.parse_gres_gpus(gres) == count


def test_slurm_node_state_reason_and_gres():
    assert health.parse_slurm_node(node_line()) == health.SlurmNode(False, "", 8)
    drained = health.parse_slurm_node(node_line("IDLE+DRAIN", "deepops: MIG layout change"))
    assert drained == health.SlurmNode(True, "deepops: MIG layout change", 8)
    ours = "deepops-health: GPU 0 (0000:53:00.0): nvidia-smi failed (rc=1)"
    assert health.parse_slurm_node(node_line("MIXED+DRAIN", ours)).reason == ours


def test_only_critical_xids_are_taken():
    lines = [
        "[ 100.5] NVRM: Xid (PCI:0000:53:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        "[ 101.0] NVRM: Xid (PCI:0000:2a:00): 13, pid=42, Graphics Exception",
        "[ 102.0] usb 1-1: new device",
    ]
    assert health.parse_xids(lines, {79}) == [
        {"pci": "0000:53:00.0", "xid": 79, "text": "GPU has fallen off the bus."}]


# --------------------------------------------------------------------------
# Decisions


GPUS = health.parse_gpus(xml(H100_XML))
XID = [{"pci": "0000:53:00.0", "xid": 79, "text": "GPU has fallen off the bus."}]


def test_faults_name_the_gpu_and_say_whether_they_are_critical():
    faults = health.find_faults(GPUS, "", 8, XID, "ok")
    assert [(f.gpu, f.critical) for f in faults] == [("GPU 0 (0000:53:00.0)", True)]
    assert health.drain_reason(faults) == "deepops-health: GPU 0 (0000:53:00.0): Xid 79 (GPU has fallen off the bus.)"
    count = health.find_faults(GPUS[:7], "", 8, [], "ok")
    assert [(f.text, f.critical) for f in count] == [("GPU count: nvidia-smi shows 7, Slurm's GRES has 8", False)]
    driver = health.find_faults(None, "nvidia-smi did not answer within 20.0 s", 8, [], "ok")
    assert [(f.text, f.critical) for f in driver] == [("driver: nvidia-smi did not answer within 20.0 s", True)]
    assert health.find_faults(None, "nvidia-smi not found", 0, [], "ok") == []  # a node without GPUs
    daemon = health.find_faults(GPUS, "", 8, [], "is failed")
    assert [(f.text, f.critical) for f in daemon] == [("nvidia-persistenced is failed", False)]
    assert health.find_faults(GPUS, "", 8, [], "not applicable: the unit is not installed") == []


def test_long_reasons_are_cut():
    faults = [health.Fault(f"GPU {i} (0000:{i:02x}:00.0)", "Xid 79 (GPU has fallen off the bus.)", True) for i in range(8)]
    reason = health.drain_reason(faults)
    assert len(reason) == health.REASON_MAX and reason.endswith("...") and reason.startswith("deepops-health: GPU 0")


CRITICAL = [health.Fault("GPU 0 (0000:53:00.0)", "Xid 79", True)]
MINOR = [health.Fault("GPU 2 (0000:2a:00.0)", "row remapping pending (reset the GPU)", False)]
OURS = health.drain_reason(CRITICAL)


@pytest.mark.parametrize(("drained", "reason", "faults", "requeue", "action", "requeues"), [
    (False, "", [], True, "none", False),
    (False, "", CRITICAL, True, "drain", True),
    (False, "", CRITICAL, False, "drain", False),  # slurm_health_check_requeue off
    (False, "", MINOR, True, "drain", False),  # not critical: jobs finish
    (True, OURS, CRITICAL, True, "none", True),  # still the same fault: nothing new to say
    (True, OURS, CRITICAL + MINOR, True, "update-reason", True),
    (True, OURS, [], True, "resume", False),
    (True, health.drain_reason(MINOR), [], True, "resume", False),
    (True, "deepops: MIG layout change", [], True, "none", False),  # the mig role's drain: never resumed
    (True, "deepops: MIG layout change", MINOR, True, "none", False),  # nor re-labelled
    (True, "deepops validate: nccl 80 GB/s", CRITICAL, True, "none", True),  # its jobs still requeued
    (True, "", [], True, "none", False),  # an admin's drain without reason
])
def test_decisions(drained, reason, faults, requeue, action, requeues):
    decision = health.decide(health.SlurmNode(drained, reason, 8), faults, requeue)
    assert (decision.action, decision.requeue) == (action, requeues)
    if action in ("drain", "update-reason"):
        assert decision.reason == health.drain_reason(faults)


def test_requeueable_jobs_are_running_batch_jobs_that_allow_it():
    shown = "\n".join([
        "JobId=11 JobName=a UserId=u(1000) Requeue=1 Restarts=0 BatchFlag=1 JobState=RUNNING Reason=None",
        "JobId=12 JobName=b UserId=u(1000) Requeue=0 Restarts=0 BatchFlag=1 JobState=RUNNING Reason=None",
        "JobId=13 JobName=c UserId=u(1000) Requeue=1 Restarts=0 BatchFlag=0 JobState=RUNNING Reason=None",
        "JobId=14 JobName=d UserId=u(1000) Requeue=1 Restarts=0 BatchFlag=1 JobState=COMPLETING Reason=None",
    ])
    assert health.requeueable(shown) == ["11"]


@pytest.mark.parametrize(("show", "status"), [
    ("LoadState=not-found\nActiveState=inactive\nUnitFileState=\n", "not applicable"),
    ("LoadState=loaded\nActiveState=inactive\nUnitFileState=disabled\n", "not applicable"),
    ("LoadState=loaded\nActiveState=failed\nUnitFileState=enabled\n", "is failed"),
    ("LoadState=loaded\nActiveState=active\nUnitFileState=enabled\n", "ok"),
])
def test_persistence_daemon(show, status):
    assert health.persistenced_status(show).startswith(status)


# --------------------------------------------------------------------------
# A whole check on a simulated node


SCONTROL = """#!/bin/sh
echo "scontrol $*" >> "$STUB_LOG"
case "$1 $2" in
  "show node") cat "$STUB_DIR/node" ;;
  "show job") cat "$STUB_DIR/jobs" ;;
  "update "*)
    case "$*" in
      *state=resume*) printf '%s' "IDLE" > "$STUB_DIR/state"; : > "$STUB_DIR/reason" ;;
      *state=drain*) printf '%s' "IDLE+DRAIN" > "$STUB_DIR/state"; printf '%s' "${4#reason=}" > "$STUB_DIR/reason" ;;
    esac
    python3 - "$STUB_DIR" <<'EOF'
import sys, pathlib
d = pathlib.Path(sys.argv[1])
reason = d.joinpath("reason").read_text()
line = d.joinpath("template").read_text().replace("STATE", d.joinpath("state").read_text())
line = line.replace(" REASON", f" Reason={reason} [root@2026-12-02T05:00:01]" if reason else "")
d.joinpath("node").write_text(line)
EOF
    ;;
esac
"""
SQUEUE = """#!/bin/sh
echo "squeue $*" >> "$STUB_LOG"
cat "$STUB_DIR/running"
"""


class SimulatedNode:
    """gpu01 with 8 simulated H100s (the stand-in nvidia-smi as 'virtual up' installs it), Slurm stand-ins,
    and the check's settings as the slurm role writes them."""

    def __init__(self, root: Path):
        self.root = root
        self.env = {**os.environ, **install_node(root, GpuSpec("h100", 8)),
                    "DEEPOPS_SIMULATED_NVIDIA_SMI": str(STAND_IN)}
        bin_dir = root / "bin"
        bin_dir.mkdir()
        smi = bin_dir / "nvidia-smi"
        smi.write_text(f"#!/bin/sh\nexec {sys.executable} {STAND_IN} \"$@\"\n")
        for path, text in ((smi, None), (bin_dir / "scontrol", SCONTROL), (bin_dir / "squeue", SQUEUE)):
            if text:
                path.write_text(text)
            path.chmod(path.stat().st_mode | stat.S_IXUSR)
        self.stub = root / "slurm"
        self.stub.mkdir()
        (self.stub / "template").write_text(node_line("STATE").replace("ExtSensorsTemp=n/s", "ExtSensorsTemp=n/s REASON"))
        (self.stub / "state").write_text("IDLE")
        (self.stub / "reason").write_text("")
        (self.stub / "node").write_text(node_line())
        (self.stub / "running").write_text("")
        (self.stub / "jobs").write_text("")
        self.log = root / "slurm.log"
        self.log.write_text("")
        self.env.update({"STUB_DIR": str(self.stub), "STUB_LOG": str(self.log), "PATH": f"{bin_dir}:{os.environ['PATH']}"})
        self.kmsg = root / "run/deepops/simulated-gpus/kmsg"
        self.config = root / "gpu-health.json"
        self.config.write_text(json.dumps({
            "node": "gpu01", "nvidia_smi": str(smi), "scontrol": str(bin_dir / "scontrol"),
            "squeue": str(bin_dir / "squeue"), "timeout": 20, "requeue": True,
            "critical_xids": health.DEFAULTS["critical_xids"], "kernel_log": str(self.kmsg),
            "state_file": str(root / "state/state.json"),
            "persistenced_unit": "deepops-test-no-such-unit.service",
        }))

    def fault(self, *args: str) -> str:
        result = subprocess.run([sys.executable, str(FAULT_TOOL), *args], capture_output=True, text=True,
                                env={**self.env, "DEEPOPS_GPU_HEALTH": "deepops-test-no-health-check"})
        assert result.returncode == 0, result.stderr
        return result.stdout

    def check(self, *args: str) -> tuple[int, dict]:
        result = subprocess.run([sys.executable, str(health.__file__), "--config", str(self.config), "--json", *args],
                                capture_output=True, text=True, env=self.env)
        assert result.returncode in (0, 1), result.stderr
        return result.returncode, json.loads(result.stdout)

    def slurm_calls(self) -> list[str]:
        calls = self.log.read_text().splitlines()
        self.log.write_text("")
        return [call for call in calls if not call.startswith("scontrol show node")]

    def node(self) -> health.SlurmNode:
        return health.parse_slurm_node((self.stub / "node").read_text())


@pytest.fixture
def node(tmp_path):
    return SimulatedNode(tmp_path)


def test_healthy_node_is_left_alone(node):
    rc, result = node.check()
    assert rc == 0 and result["faults"] == [] and result["action"] == "none"
    assert result["persistenced"].startswith("not applicable")
    assert node.slurm_calls() == []


def test_critical_xid_drains_requeues_and_stays_until_cleared(node):
    (node.stub / "running").write_text("41\n42\n")
    (node.stub / "jobs").write_text(
        "JobId=41 Requeue=1 BatchFlag=1 JobState=RUNNING\nJobId=42 Requeue=0 BatchFlag=1 JobState=RUNNING\n")
    assert "NVRM: Xid (PCI:0000:53:00): 79," in node.fault("xid", "0", "79")
    rc, result = node.check()
    assert rc == 1 and result["action"] == "drain" and result["requeued"] == ["41"]
    state = node.node()
    assert state.drained and state.reason.startswith("deepops-health: GPU 0 (0000:53:00.0): Xid 79")
    calls = node.slurm_calls()
    assert any(call.startswith("scontrol update nodename=gpu01 state=drain reason=deepops-health: GPU 0") for call in calls)
    assert "scontrol requeue 41" in calls and "scontrol requeue 42" not in calls

    (node.stub / "running").write_text("")
    rc, result = node.check()  # the XID is in the past of the log, but the GPU still needs a reset
    assert rc == 1 and result["action"] == "none" and node.node().drained

    node.fault("clear")
    assert subprocess.run([sys.executable, health.__file__, "--config", str(node.config), "--clear-xids"],
                          env=node.env, capture_output=True, text=True).returncode == 0
    rc, result = node.check()
    assert rc == 0 and result["action"] == "resume"
    assert not node.node().drained and "scontrol update nodename=gpu01 state=resume" in node.slurm_calls()


def test_ecc_errors_and_row_remaps_in_the_stand_ins_output(node):
    node.fault("ecc", "3", "2")
    node.fault("row-remap-pending", "5")
    query = subprocess.run([sys.executable, str(STAND_IN), "--query-gpu=index,ecc.errors.uncorrected.volatile.total,"
                            "remapped_rows.pending,remapped_rows.failure", "--format=csv,noheader"],
                           capture_output=True, text=True, env=node.env, check=True).stdout.splitlines()
    assert query[3] == "3, 2, No, No" and query[5] == "5, 0, Yes, No" and query[0] == "0, 0, No, No"
    rc, result = node.check("--check")  # --check changes nothing
    assert rc == 1 and result["action"] == "would drain" and node.slurm_calls() == []
    assert [(f["gpu"], f["text"], f["critical"]) for f in result["faults"]] == [
        ("GPU 3 (0000:86:00.0)", "2 uncorrectable ECC error(s)", True),
        ("GPU 5 (0000:a8:00.0)", "row remapping pending (reset the GPU)", False),
    ]
    node.fault("clear", "3")
    rc, result = node.check()
    assert [f["gpu"] for f in result["faults"]] == ["GPU 5 (0000:a8:00.0)"] and result["action"] == "drain"
    assert result["requeued"] == [] and not [c for c in node.slurm_calls() if c.startswith("squeue")]


def test_a_drain_for_another_reason_is_never_touched(node):
    (node.stub / "state").write_text("IDLE+DRAIN")
    (node.stub / "reason").write_text("deepops: MIG layout change")
    (node.stub / "node").write_text(node_line("IDLE+DRAIN", "deepops: MIG layout change"))
    rc, result = node.check()
    assert rc == 0 and result["action"] == "none" and node.slurm_calls() == []
    node.fault("row-remap-failure", "1")
    rc, result = node.check()
    assert rc == 1 and result["action"] == "none"
    assert [c for c in node.slurm_calls() if c.startswith("scontrol update")] == []
    assert node.node().reason == "deepops: MIG layout change"


def test_gpu_count_against_gres(node):
    (node.stub / "template").write_text((node.stub / "template").read_text().replace("gpu:h100:8", "gpu:h100:7"))
    (node.stub / "node").write_text(node_line().replace("gpu:h100:8", "gpu:h100:7"))
    rc, result = node.check()
    assert result["faults"] == [{"gpu": "", "text": "GPU count: nvidia-smi shows 8, Slurm's GRES has 7",
                                 "critical": False}]


def test_kernel_log_is_read_on_from_where_the_last_check_stopped(node, tmp_path):
    node.kmsg.parent.mkdir(parents=True, exist_ok=True)
    node.kmsg.write_text("[ 1.0] NVRM: Xid (PCI:0000:53:00): 13, pid=1, Graphics Exception\n")
    config = health.load_config(str(node.config))
    state = health.load_state(config["state_file"])
    assert len(health.new_kernel_lines(config, state)) == 1
    assert health.new_kernel_lines(config, state) == []
    with node.kmsg.open("a") as handle:
        handle.write("[ 2.0] second\n")
    assert health.new_kernel_lines(config, state) == ["[ 2.0] second"]
    node.kmsg.write_text("[ 0.5] after truncation\n")  # shorter than the offset: read from the start
    assert health.new_kernel_lines(config, state) == ["[ 0.5] after truncation"]


def test_role_settings_reach_the_program():
    """The slurm role's defaults, the config it renders and the program's DEFAULTS agree."""
    defaults = yaml.safe_load((REPO / "roles/slurm/defaults/main.yml").read_text())
    variables = yaml.safe_load((REPO / "roles/slurm/vars/main.yml").read_text())
    assert defaults["slurm_health_check_critical_xids"] == health.DEFAULTS["critical_xids"]
    assert defaults["slurm_health_check_timeout"] == health.DEFAULTS["timeout"]
    assert set(variables["_slurm_health_check_config"]) <= set(health.DEFAULTS)
    assert variables["_slurm_health_check_config_file"] == health.DEFAULT_CONFIG


def test_fault_tool_refuses_what_it_cannot_do(node):
    bad = subprocess.run([sys.executable, str(FAULT_TOOL), "xid", "9", "79"], capture_output=True, text=True, env=node.env)
    assert bad.returncode == 6 and "No GPU 9" in bad.stderr
    assert subprocess.run([sys.executable, str(FAULT_TOOL), "melt", "0"], capture_output=True, text=True,
                          env=node.env).returncode == 2


# --------------------------------------------------------------------------
# deepops virtual fault: input


@pytest.mark.parametrize(("fault", "gpu", "argv"), [
    ("xid:79", None, ["xid", "0", "79"]),
    ("XID:48", 3, ["xid", "3", "48"]),
    ("ecc", 2, ["ecc", "2", "1"]),
    ("ecc:5", None, ["ecc", "0", "5"]),
    ("row-remap-pending", 1, ["row-remap-pending", "1"]),
    ("row-remap-failure", None, ["row-remap-failure", "0"]),
    ("clear", None, ["clear"]),
    ("clear", 4, ["clear", "4"]),
])
def test_fault_requests_become_the_node_tools_arguments(fault, gpu, argv):
    from deepops_py.virtual import cluster

    request = cluster.FaultRequest.parse("gpu01", fault, gpu)
    assert request.argv() == [cluster.FAULT_TOOL, *argv]


@pytest.mark.parametrize("fault", ["xid", "xid:abc", "xid:0", "ecc:0", "ecc:x", "melt", "clear:1", "row-remap-pending:2"])
def test_bad_faults_exit_2_before_docker_is_asked(fault, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from deepops_py.cli import main

    monkeypatch.setenv("DEEPOPS_STATE_DIR", str(tmp_path))
    result = CliRunner().invoke(main, ["virtual", "fault", "gpu01", fault])
    assert result.exit_code == 2, result.output
    assert "fault" in result.output and "Traceback" not in result.output
