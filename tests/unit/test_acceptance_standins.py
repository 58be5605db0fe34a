"""The virtual cluster's stand-in all_reduce_perf and dcgmi: what they print, and how the fault
switch moves the verdicts the validate checks reach.

The stand-ins run as the scripts they are, against a node's files as 'virtual up' installs them
(tests/support/mig_standin.install_node), with the fault switch moved into a temporary directory.
Across nodes, a stand-in mpi4py (written here) plays the other ranks: the real one is not
installed on the test bed, and the point is what the stand-in does with what MPI hands it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ansible_collections.deepops.cluster.plugins.module_utils import dcgm_diag as dcgm
from ansible_collections.deepops.cluster.plugins.module_utils import nccl_tests as nccl
from ansible_collections.deepops.cluster.plugins.module_utils.nvidia_smi import gpu_facts
from mig_standin import install_node

from deepops_py.virtual import gpus, payload
from deepops_py.virtual.gpus import GpuSpec

ALL_REDUCE = payload.DATA_DIR / "all_reduce_perf"
DCGMI = payload.DATA_DIR / "dcgmi"
GIB = 1 << 30


class Node:
    """One simulated node's files under a temporary root, and the stand-ins run against them."""

    def __init__(self, root: Path, model: str, count: int, name: str = "gpu01"):
        self.spec = GpuSpec(model, count)
        self.root = root
        self.fault_file = root / "etc/deepops/simulated-gpu-fault.json"
        self.env = {**os.environ, **install_node(root, self.spec, name),
                    "DEEPOPS_SIMULATED_GPU_FAULT": str(self.fault_file)}
        for key in ("SLURM_NTASKS", "SLURM_PROCID", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"):
            self.env.pop(key, None)
        self.facts = gpu_facts(gpus.render_query_xml(self.spec, name), gpus.render_topology(self.spec))

    def fault(self, **modes: str) -> None:
        self.fault_file.write_text(json.dumps(modes))

    def run(self, tool: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(tool), *args], capture_output=True, text=True,
                              env={**self.env, **(env or {})}, timeout=60)

    def all_reduce(self, *args: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess[str], dict]:
        done = self.run(ALL_REDUCE, *(args or ("-b", "8", "-e", "8G", "-f", "2", "-g", str(self.spec.count))),
                        env=env)
        return done, nccl.parse_all_reduce(done.stdout)

    def diag(self, level: int, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict]:
        done = self.run(DCGMI, "diag", "-r", str(level), "-j", *extra)
        return done, dcgm.parse_diag(done.stdout)


@pytest.fixture
def h100(tmp_path):
    return Node(tmp_path, "h100", 8)


# --------------------------------------------------------------------------
# all_reduce_perf


def test_healthy_h100_node_passes_and_is_marked_simulated(h100):
    done, run = h100.all_reduce()
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(nccl.SIMULATED_MARKER)
    assert run["simulated"] and run["ok"] and run["validated"]
    assert [(d["host"], d["device"], d["model"]) for d in run["devices"]] == [
        ("gpu01", i, "NVIDIA H100 80GB HBM3") for i in range(8)]
    assert (run["largest_size"], run["busbw_gbps"]) == (8 * GIB, 479.28)  # -e 8G: the capture's 8 GiB row
    entry = nccl.node_result("gpu01", run, h100.facts)
    assert entry["status"] == "pass" and entry["simulated"] is True
    assert entry["detail"] == "busbw 479.28 GB/s at 8 GiB >= 360 (h100, nvswitch)"


def test_sizes_follow_b_and_e(h100):
    _done, run = h100.all_reduce("-b", "1M", "-e", "64M", "-f", "2", "-g", "8")
    assert [row["size"] for row in run["rows"]] == [1 << k for k in range(20, 27)]
    assert run["ngpus"] == 8 and run["validation"] == 1


def test_slow_switch_fails_the_threshold(h100):
    h100.fault(nccl="slow")
    done, run = h100.all_reduce()
    assert done.returncode == 0 and run["ok"]
    assert run["busbw_gbps"] == pytest.approx(479.28 * 0.25, abs=0.01)
    entry = nccl.node_result("gpu01", run, h100.facts)
    assert entry["status"] == "fail" and entry["detail"].endswith("< 360 (h100, nvswitch)")


def test_fail_switch_gives_wrong_results_as_recorded(h100):
    h100.fault(nccl="fail", dcgm="fail")
    done, run = h100.all_reduce()
    assert done.returncode == 1
    row = next(row for row in run["rows"] if row["size"] == 1 << 20)
    assert (row["out_of_place"]["wrong"], row["in_place"]["wrong"]) == (96, 32)
    assert run["oob_ok"] is False and len(run["failures"]) == 1
    assert run["failures"][0].startswith(".. gpu01 pid ") and run["failures"][0].endswith("Test failure common.cu:1189")
    assert nccl.node_result("gpu01", run, h100.facts)["detail"] == "all_reduce_perf failed: #wrong 128"


def test_check_off_prints_na_and_the_result_fails(h100):
    _done, run = h100.all_reduce("-b", "8", "-e", "8G", "-f", "2", "-g", "8", "-c", "0")
    assert run["validation"] == 0 and run["unvalidated_rows"] == 2 * len(run["rows"])
    assert "correctness check" in nccl.node_result("gpu01", run, h100.facts)["detail"]


def test_old_layout_a100_capture_prints_checked_rows(tmp_path):
    node = Node(tmp_path, "a100", 8)
    _done, run = node.all_reduce()
    assert run["validated"] and run["rows"][0]["root"] is None  # the capture's layout, N/A now 0
    assert run["busbw_gbps"] == 235.26
    assert nccl.node_result("gpu01", run, node.facts)["status"] == "pass"  # a100 renders as PCIe: mark 10


def test_pcie_model_replays_the_pcie_capture(tmp_path):
    node = Node(tmp_path, "l40s", 4)
    _done, run = node.all_reduce()
    assert (run["largest_size"], run["busbw_gbps"]) == (128 << 20, 27.28)
    assert nccl.node_result("gpu01", run, node.facts)["detail"] == \
        "busbw 27.28 GB/s at 128 MiB >= 10 (l40s, pcie)"
    node.fault(nccl="slow")
    _done, run = node.all_reduce()
    assert nccl.node_result("gpu01", run, node.facts)["status"] == "fail"


@pytest.mark.parametrize(("args", "code", "message"), [
    (("--bogus",), 2, "invalid option(s): --bogus"),
    (("-b", "8X"), 2, "invalid size"),
    (("-g", "9"), 1, "invalid device ordinal"),
])
def test_bad_invocations_exit_non_zero(h100, args, code, message):
    done = h100.run(ALL_REDUCE, *args)
    assert done.returncode == code
    assert message in done.stdout + done.stderr


def test_bad_fault_file_is_refused(h100):
    h100.fault(nccl="sluggish")
    done = h100.run(ALL_REDUCE)
    assert done.returncode == 2 and '"nccl" must be "slow" or "fail"' in done.stderr


FAKE_MPI = '''
"""mpi4py stand-in for the tests: this process is rank RANK of SIZE; the other ranks' fault
bits and device lists come from FAKE_MPI_OTHERS (JSON)."""
import json, os

class _Op:
    pass

BOR = _Op()

class _Comm:
    def Get_rank(self):
        return int(os.environ["FAKE_MPI_RANK"])

    def Get_size(self):
        return int(os.environ["FAKE_MPI_SIZE"])

    def allreduce(self, value, op):
        assert op is BOR
        for other in json.loads(os.environ["FAKE_MPI_OTHERS"]):
            value |= other["state"]
        return value

    def gather(self, value, root=0):
        return [value] + [other["devices"] for other in json.loads(os.environ["FAKE_MPI_OTHERS"])]

COMM_WORLD = _Comm()
'''


def fake_mpi(tmp_path: Path, rank: int, others: list[dict]) -> dict:
    package = tmp_path / "fake-mpi" / "mpi4py"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "MPI.py").write_text(textwrap.dedent(FAKE_MPI))
    return {"PYTHONPATH": str(package.parent), "SLURM_NTASKS": str(len(others) + 1), "SLURM_PROCID": str(rank),
            "FAKE_MPI_RANK": str(rank), "FAKE_MPI_SIZE": str(len(others) + 1), "FAKE_MPI_OTHERS": json.dumps(others)}


def other_rank(host: str, state: int) -> dict:
    return {"state": state, "devices": [{"host": host, "pid": 4242, "index": i, "bus": 0x53 + i,
                                         "name": "NVIDIA H100 80GB HBM3"} for i in range(8)]}


def test_ranks_combine_their_faults_across_nodes(h100, tmp_path):
    healthy = fake_mpi(tmp_path, 0, [other_rank("gpu02", 0), other_rank("gpu03", 0)])
    _done, run = h100.all_reduce(env=healthy)
    assert run["hosts"] == ["gpu01", "gpu02", "gpu03"] and len(run["devices"]) == 24
    assert nccl.cluster_result(["gpu01", "gpu02", "gpu03"], run)["status"] == "pass"
    slow_elsewhere = fake_mpi(tmp_path, 0, [other_rank("gpu02", 1), other_rank("gpu03", 0)])
    done, run = h100.all_reduce(env=slow_elsewhere)
    assert "3 ranks combined with MPI allreduce; fault: slow" in done.stdout.splitlines()[0]
    assert nccl.cluster_result(["gpu01", "gpu02", "gpu03"], run, threshold_gbps=200)["status"] == "fail"
    failing_elsewhere = fake_mpi(tmp_path, 0, [other_rank("gpu02", 0), other_rank("gpu03", 2)])
    done, run = h100.all_reduce(env=failing_elsewhere)
    assert done.returncode == 1 and run["wrong"] > 0
    assert [line.split()[1] for line in run["failures"]] == ["gpu01", "gpu02", "gpu03"]


def test_only_rank_zero_prints(h100, tmp_path):
    done = h100.run(ALL_REDUCE, "-g", "8", env=fake_mpi(tmp_path, 1, [other_rank("gpu02", 0)]))
    assert (done.returncode, done.stdout) == (0, "")


def test_without_mpi4py_rank_zero_says_the_ranks_were_not_combined(h100, tmp_path):
    blocked = tmp_path / "no-mpi" / "mpi4py"  # whatever the machine has installed, mpi4py fails to import
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('blocked by the test')\n")
    done, run = h100.all_reduce(env={"SLURM_NTASKS": "2", "SLURM_PROCID": "0", "PYTHONPATH": str(blocked.parent)})
    assert "ranks not combined: mpi4py not importable" in done.stdout.splitlines()[0]
    assert run["hosts"] == ["gpu01"]


# --------------------------------------------------------------------------
# dcgmi


def test_level1_adapts_to_the_node_and_passes(tmp_path):
    node = Node(tmp_path, "l40s", 3)
    done, run = node.diag(1)
    assert done.returncode == 0, done.stderr
    assert run["simulated"] and run["version"] == "3.1.0" and run["gpus"] == [0, 1, 2]
    assert run["by_test"]["Denylist"] == {"0": "pass", "1": "pass", "2": "pass"}
    assert "WARNING: THIS SHOULD NOT HAPPEN" in done.stdout  # the capture's quirk is replayed
    entry = dcgm.dcgm_result("gpu01", run, level=1)
    assert entry["status"] == "pass" and entry["simulated"] and entry["measurements"]["level"] == 1


def test_dcgm_fail_switch_fails_gpu0_in_one_test(h100):
    h100.fault(dcgm="fail")
    done, run = h100.diag(1)
    assert done.returncode == 226
    assert [(f["test"], f["gpu"]) for f in run["failures"]] == [("software", 0)]
    entry = dcgm.dcgm_result("gpu01", run, level=1)
    assert entry["status"] == "fail" and entry["detail"].startswith("dcgmi diag -r 1: GPU 0 software: Persistence")


def test_level3_burnin_passes_and_fails_with_the_switch(tmp_path):
    node = Node(tmp_path, "h100", 12)
    done, run = node.diag(3)
    assert done.returncode == 0 and run["gpus"] == list(range(12))
    assert run["figures"][0]["diag_gflops"] == 859.08 and 8 in run["figures"]  # GPU 8 repeats recorded GPU 0
    names = [gpu["name"] for gpu in json.loads((node.root / "etc/deepops/simulated-gpus.json").read_text())["gpus"]]
    assert dcgm.burnin_result("gpu01", run, names)["status"] == "pass"
    node.fault(dcgm="fail")
    _done, run = node.diag(4)
    entry = dcgm.burnin_result("gpu01", run, names)
    assert entry["status"] == "fail" and entry["detail"].startswith("GPU 0 diagnostic: Persistence Mode")


def test_gpu_list_selects_gpus(h100):
    _done, run = h100.diag(1, "-i", "1,3")
    assert run["gpus"] == [1, 3]


@pytest.mark.parametrize(("args", "message"), [
    (("discovery", "-l"), "only 'dcgmi diag -r N -j' and 'dcgmi --version' are simulated"),
    (("diag", "-r", "1"), "text output is not simulated"),
    (("diag", "-j"), "diag needs -r N"),
    (("diag", "-r", "9", "-j"), "levels 1-4"),
    (("diag", "-r", "1", "-j", "-i", "9"), "GPU 9 not found"),
    ((), "(no command)"),
])
def test_unsupported_dcgmi_invocations_exit_non_zero(h100, args, message):
    done = h100.run(DCGMI, *args)
    assert done.returncode != 0 and message in done.stderr


@pytest.mark.parametrize("flag", ["--version", "-v"])
def test_dcgmi_version(h100, flag):
    done = h100.run(DCGMI, flag)
    assert done.returncode == 0 and done.stdout.startswith("Version : 3.1.0\n") and "SIMULATED" in done.stdout


# --------------------------------------------------------------------------
# payload


def test_payload_installs_the_stand_ins_and_their_captures():
    files = payload.gpu_files(GpuSpec("h100", 2), "gpu01")
    assert files["opt/deepops/nccl-tests/bin/all_reduce_perf"] == (ALL_REDUCE.read_bytes(), 0o755)
    assert files["usr/bin/dcgmi"] == (DCGMI.read_bytes(), 0o755)
    shipped = {Path(path).name for path in files if path.startswith(payload.GPU_DATA_DIR + "/")}
    recorded = {path.name for pattern in ("nccl-all-reduce-*.txt", "dcgmi-diag-*.txt")
                for path in gpus.FIXTURES_DIR.glob(pattern)}
    assert len(recorded) == 6 and recorded <= shipped
