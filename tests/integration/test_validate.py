"""deepops validate on the deployed virtual cluster: it passes, and it can fail."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.deepops.cluster.plugins.module_utils.validation import (
    CHECK_NAMES,
    OPT_IN_CHECKS,
    SKIPPABLE_CHECKS,
)


@pytest.fixture(scope="module")
def deployed(cluster):
    cluster.ensure_deployed()
    return cluster


def _leftover_jobs(cluster) -> str:
    return cluster.ssh("ctl01", "squeue --noheader --name=deepops-validate --format=%i").stdout.strip()


def test_validate_passes_on_a_deployed_cluster(deployed, tmp_path):
    junit = tmp_path / "validate.xml"
    result = deployed.deepops("validate", "--json", "--junit", str(junit), timeout=1200)
    data = result.json()
    failed = [check for check in data["checks"] if check["status"] == "fail"]
    assert result.rc == 0 and not failed, failed or result.stderr
    assert data["ok"] and data["summary"]["failed"] == 0
    # only mig is not applicable: the virtual cluster's nodes all have (simulated) GPUs, none in MIG mode
    assert [(c["check"], c["node"]) for c in data["checks"] if c["status"] == "not_applicable"] == [("mig", "")]
    # every check ran, in the list's order
    assert list(dict.fromkeys(check["check"] for check in data["checks"])) == [
        name for name in CHECK_NAMES if name not in OPT_IN_CHECKS]
    assert data["summary"]["skipped"] == list(OPT_IN_CHECKS)  # burnin: only with --burn-in
    computes = deployed.computes
    assert sorted(c["node"] for c in data["checks"] if c["check"] == "gpus") == computes
    assert sorted(c["node"] for c in data["checks"] if c["check"] == "nodes") == computes
    preemption = next(c for c in data["checks"] if c["check"] == "preemption")
    assert "requeued (Restarts=" in preemption["detail"]
    # a real MPI job (never simulated): one rank per compute node, Debian's Open MPI over srun --mpi=pmix
    [mpi] = [c for c in data["checks"] if c["check"] == "mpi"]
    expected_sum = len(computes) * (len(computes) - 1) // 2
    assert f"{len(computes)} ranks, allreduce sum {expected_sum} (expected {expected_sum})" in mpi["detail"], mpi
    assert "Open MPI" in mpi["detail"], mpi

    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("name") == "deepops-validate"
    # JUnit's skipped: the not-applicable mig result
    assert suite.get("failures") == "0" and suite.get("skipped") == "1" and int(suite.get("tests")) == len(data["checks"])
    assert not _leftover_jobs(deployed), "validation left jobs behind"
    # the run is in the history, and its results with it
    shown = deployed.deepops("runs", "show", data["run_id"], "--json", check=True).json()
    assert shown["data"]["validate_preemption"][0]["status"] == "pass"


def test_validate_fails_on_an_impossible_preemption_bound(deployed, tmp_path):
    junit = tmp_path / "validate.xml"
    skipped = [name for name in SKIPPABLE_CHECKS if name != "preemption"]
    result = deployed.deepops(
        "validate", "--json", "--junit", str(junit), *(arg for name in skipped for arg in ("--skip", name)),
        "-e", "validate_preemption_bound=0", timeout=900,
    )
    assert result.rc == 1, result.stdout + result.stderr
    data = result.json()
    assert not data["ok"] and data["summary"]["skipped"] == skipped
    assert {check["check"] for check in data["checks"]} == {"nodes", "preemption"}
    not_passed = [check for check in data["checks"] if check["status"] != "pass"]
    assert len(not_passed) == 1, not_passed
    [failed] = not_passed
    assert failed["status"] == "fail" and not failed["passed"]
    assert failed["check"] == "preemption" and "bound 0 s" in failed["detail"]
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("failures") == "1"
    assert suite.find("testcase/failure").get("message") == failed["detail"]
    assert not _leftover_jobs(deployed), "a failed validation must still cancel its jobs"


FAULT_FILE = "/etc/deepops/simulated-gpu-fault.json"
GPU_CHECKS_ONLY = [arg for name in SKIPPABLE_CHECKS if name not in ("dcgm", "nccl") for arg in ("--skip", name)]


@pytest.fixture
def faulty_gpu01(deployed):
    """gpu01's stand-in GPU tools switched to a fault; switched back, and the node resumed, afterwards."""

    def switch(**modes):
        deployed.ssh("gpu01", f"echo '{json.dumps(modes)}' > {FAULT_FILE}", check=True)

    yield switch
    deployed.ssh("gpu01", f"rm -f {FAULT_FILE}", check=True)
    deployed.ssh("ctl01", "scontrol update NodeName=gpu01 State=RESUME || true")


def test_a_failing_gpu_node_is_named_by_the_pair_tests_drained_and_reported(deployed, faulty_gpu01, tmp_path):
    faulty_gpu01(nccl="fail", dcgm="fail")
    report = tmp_path / "acceptance.html"
    result = deployed.deepops("validate", "--json", *GPU_CHECKS_ONLY, "--drain-failed", "--report", str(report),
                              timeout=900)
    assert result.rc == 1, result.stdout[-3000:] + result.stderr[-3000:]
    data = result.json()
    checks = {(c["check"], c["node"]): c for c in data["checks"]}
    assert checks["nccl", "gpu01"]["status"] == "fail" and "#wrong" in checks["nccl", "gpu01"]["detail"]
    assert checks["nccl", "all"]["status"] == "fail" and "at fault: gpu01" in checks["nccl", "all"]["detail"]
    assert checks["dcgm", "gpu01"]["status"] == "fail" and "GPU 0" in checks["dcgm", "gpu01"]["detail"]
    assert checks["nccl", "gpu02"]["status"] != "fail" and checks["dcgm", "gpu02"]["status"] == "pass"
    assert all(checks[key]["simulated"] for key in checks if key[0] in ("dcgm", "nccl"))  # stand-ins say so
    assert [entry["node"] for entry in data["drained"]] == ["gpu01"]
    node = deployed.ssh("ctl01", "scontrol show node gpu01 --oneliner", check=True).stdout
    assert "State=IDLE+DRAIN" in node and "Reason=deepops validate dcgm: dcgmi diag -r 1: GPU 0" in node, node
    assert "DRAIN" not in deployed.ssh("ctl01", "scontrol show node gpu02 --oneliner", check=True).stdout
    page = report.read_text()
    assert page.count('data-plot="nccl"') >= 2 and "SIMULATED" in page


def test_a_slow_gpu_node_fails_its_bandwidth_mark(deployed, faulty_gpu01):
    faulty_gpu01(nccl="slow")
    result = deployed.deepops("validate", "--json", *GPU_CHECKS_ONLY, "--skip", "dcgm", timeout=900)
    assert result.rc == 1, result.stdout[-3000:] + result.stderr[-3000:]
    [gpu01] = [c for c in result.json()["checks"] if (c["check"], c["node"]) == ("nccl", "gpu01")]
    assert gpu01["status"] == "fail" and " < " in gpu01["detail"] and "(h100, nvswitch)" in gpu01["detail"], gpu01
    assert gpu01["measurements"]["busbw_gbps"] < gpu01["measurements"]["threshold_gbps"]
    assert result.json()["drained"] == []  # not asked to drain


@pytest.fixture
def munge_stopped_on_gpu02(deployed):
    """gpu02's munge stopped; afterwards started again, the node resumed if slurmctld marked it down, and waited for."""
    deployed.ssh("gpu02", "systemctl stop munge", check=True)
    yield
    deployed.ssh("gpu02", "systemctl start munge", check=False)
    # RESUME fails on a node slurmctld never marked down: tolerated
    deployed.ssh("ctl01", "scontrol update NodeName=gpu02 State=RESUME", check=False)
    deployed.ssh("ctl01", "for _ in $(seq 30); do case $(sinfo --noheader --Node --nodes=gpu02 --format=%T | head -n1) in "
                          "idle|mixed) exit 0 ;; esac; sleep 2; done; exit 1", check=False)


def test_a_node_whose_munge_is_stopped_is_named_and_gets_no_job(deployed, munge_stopped_on_gpu02):
    # nodes, hostname and gpus only: the others need no more to show it
    skipped = [name for name in SKIPPABLE_CHECKS if name not in ("hostname", "gpus")]
    result = deployed.deepops("validate", "--json", *(arg for name in skipped for arg in ("--skip", name)), timeout=900)
    assert result.rc == 1, result.stdout[-3000:] + result.stderr[-3000:]
    data = result.json()
    checks = {(c["check"], c["node"]): c for c in data["checks"]}
    # Slurm may still show gpu02 idle (slurmctld notices only after SlurmdTimeout): munge is named all the same
    gpu02 = checks["nodes", "gpu02"]
    assert gpu02["status"] == "fail", gpu02
    assert gpu02["detail"].startswith("munge is not running on gpu02 (systemctl is-active: inactive): "
                                      "slurmd cannot authenticate to slurmctld"), gpu02
    assert checks["nodes", "gpu01"]["status"] == "pass" and checks["gpus", "gpu01"]["status"] == "pass"
    assert "not usable" in checks["gpus", "gpu02"]["detail"]  # no job was sent there: it would hang
    assert not data["failed_hosts"]  # gpu02 itself answered: failed checks, not a failed run
    assert not _leftover_jobs(deployed), "validation left jobs behind"
