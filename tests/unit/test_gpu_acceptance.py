"""The GPU checks' glue (plugins/module_utils/gpu_acceptance.py): jobs.sh's lines read back, the
nccl check's rounds (every node, all nodes, then pairs) and the node it blames, the dcgm verdicts
per node, the drain list, and files/jobs.sh itself against a stand-in srun.

Outputs are the recorded ones the virtual cluster replays (deepops_py/virtual/fixtures/SOURCES.md).
"""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path

import pytest
from ansible_collections.deepops.cluster.plugins.module_utils import gpu_acceptance as ga
from ansible_collections.deepops.cluster.plugins.module_utils import validation as v

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "deepops_py" / "virtual" / "fixtures"
GOOD_NCCL = (FIXTURES / "nccl-all-reduce-h100-2x8-p5-awsome.txt").read_text()  # 487 GB/s at 16 GiB, correct
WRONG_NCCL = (FIXTURES / "nccl-all-reduce-gh200-2x1-wrong-nccl-tests-issue369.txt").read_text()  # #wrong > 0
GOOD_DIAG = (FIXTURES / "dcgmi-diag-r1-dcgm3.1-x8-pass-dcgm-jsonresulttests.txt").read_text()
H100_FACTS = {"deepops_gpus": {"present": True, "gpu_count": 8, "count": 8, "types": ["h100"], "nvswitch": True,
                               "nvlink": True, "topology": {"available": True}, "driver_version": "580.65.06",
                               "cuda_version": "13.0"}}


def line(nodes, stdout="", rc=0, seconds=12, stderr=""):
    encode = lambda text: base64.b64encode(text.encode()).decode()  # noqa: E731
    return f"{','.join(nodes)}\t{rc}\t{seconds}\t{encode(stdout)}\t{encode(stderr)}\n"


def cluster(nodes=("gpu01", "gpu02", "gpu03"), gpus=8, state="idle"):
    sinfo = "".join(f"{node} {state} gpu:h100:{gpus}\n" for node in nodes)
    return v.survey(sinfo, list(nodes), {node: H100_FACTS for node in nodes})


FACTS = {node: H100_FACTS for node in ("gpu01", "gpu02", "gpu03")}


def test_job_lines_round_trip_and_malformed_lines_are_left_out():
    text = line(["gpu01", "gpu02"], "out\nput", rc=3, seconds=7, stderr="err") + "garbage\n" + "a\tb\tc\t!!\t!!\n"
    assert ga.parse_job_lines(text) == [
        {"nodes": ["gpu01", "gpu02"], "rc": 3, "seconds": 7.0, "stdout": "out\nput", "stderr": "err"}]
    assert ga.parse_job_lines(None) == []


def test_job_specs_take_the_fewest_gpus_of_a_set_and_leave_out_sets_without_gpus():
    gpus = {"gpu01": 8, "gpu02": 4, "cpu01": 0}
    assert ga.job_specs(["gpu01", ["gpu01", "gpu02"], ["gpu02", "cpu01"], []], gpus) == ["gpu01=8", "gpu01,gpu02=4"]


def test_nccl_first_round_runs_each_node_and_all_nodes_and_stops_when_all_is_well():
    c = cluster()
    first = ga.nccl_next_jobs([], c, FACTS)
    assert first == ["gpu01=8", "gpu02=8", "gpu03=8", "gpu01,gpu02,gpu03=8"]
    healthy = "".join(line(spec.split("=")[0].split(","), GOOD_NCCL) for spec in first)
    assert ga.nccl_next_jobs([healthy], c, FACTS) == []
    results = {r["node"]: r for r in ga.nccl_results([healthy], c, FACTS)}
    assert [results[n]["status"] for n in ("gpu01", "gpu02", "gpu03", "all")] == ["pass"] * 4
    assert results["gpu01"]["detail"].startswith("busbw 487.26 GB/s at 16 GiB >= ")
    assert results["all"]["measurements"]["faulty"] == []


def test_nccl_pair_tests_name_the_node_that_breaks_the_run_across_nodes():
    c = cluster(("gpu01", "gpu02", "gpu03", "gpu04"))
    facts = {node: H100_FACTS for node in c["computes"]}
    # gpu03 is fine alone but breaks every run it shares (its network, say)
    first = "".join(line([n], GOOD_NCCL) for n in c["computes"]) + line(c["computes"], WRONG_NCCL, rc=1)
    pairs = ga.nccl_next_jobs([first], c, facts)
    assert pairs == ["gpu01,gpu02=8", "gpu03,gpu04=8"]
    second = line(["gpu01", "gpu02"], GOOD_NCCL) + line(["gpu03", "gpu04"], WRONG_NCCL, rc=1)
    third_jobs = ga.nccl_next_jobs([first, second], c, facts)
    assert third_jobs == ["gpu03,gpu01=8", "gpu04,gpu02=8"]  # each suspect with a known-good node
    third = line(["gpu03", "gpu01"], WRONG_NCCL, rc=1) + line(["gpu04", "gpu02"], GOOD_NCCL)
    assert ga.nccl_next_jobs([first, second, third], c, facts) == []
    results = ga.nccl_results([first, second, third], c, facts)
    cross = next(r for r in results if r["node"] == "all")
    assert cross["status"] == "fail" and "gpu03" in cross["detail"] and cross["measurements"]["faulty"] == ["gpu03"]
    assert ga.drain_list(results) == [{"node": "gpu03", "reason": ga.drain_list(results)[0]["reason"]}]
    assert ga.drain_list(results)[0]["reason"].startswith("deepops validate nccl: 4 nodes: all_reduce_perf failed")


def test_a_node_failing_alone_is_blamed_for_the_run_across_nodes_without_more_pairs():
    c = cluster(("gpu01", "gpu02"))
    first = line(["gpu01"], GOOD_NCCL) + line(["gpu02"], WRONG_NCCL, rc=1) + line(["gpu01", "gpu02"], WRONG_NCCL, rc=1)
    assert ga.nccl_next_jobs([first], c, FACTS) == []
    results = {r["node"]: r for r in ga.nccl_results([first], c, FACTS)}
    assert results["gpu02"]["status"] == "fail" and "#wrong" in results["gpu02"]["detail"]
    assert results["all"]["measurements"]["faulty"] == ["gpu02"]
    drained = ga.drain_list(list(results.values()))
    assert [entry["node"] for entry in drained] == ["gpu02"]  # once, with both reasons
    assert "nccl: all_reduce_perf failed" in drained[0]["reason"] and "at fault: gpu02" in drained[0]["reason"]


def test_a_missing_all_reduce_perf_fails_the_node_and_says_why():
    c = cluster(("gpu01",))
    runs = line(["gpu01"], "", rc=2, stderr="slurmstepd: error: execve(): /opt/deepops/nccl-tests/bin/all_reduce_perf: "
                "No such file or directory")
    [only] = ga.nccl_results([runs], c, FACTS)  # one node: no run across nodes
    assert only["status"] == "fail" and "No such file or directory" in only["detail"]


def test_unusable_and_gpu_less_nodes():
    c = v.survey("gpu01 drained gpu:h100:8\ngpu02 idle (null)\n", ["gpu01", "gpu02"], {})
    results = {r["node"]: r for r in ga.dcgm_results("", c)}
    assert results["gpu01"]["status"] == "fail" and "not usable" in results["gpu01"]["detail"]
    assert results["gpu02"]["status"] == "not_applicable"


def test_dcgm_verdicts_per_node():
    c = cluster(("gpu01", "gpu02"))
    runs = line(["gpu01"], GOOD_DIAG) + line(["gpu02"], "", rc=127, stderr="execve(): dcgmi: No such file or directory")
    results = {r["node"]: r for r in ga.dcgm_results(runs, c, 1)}
    assert results["gpu01"]["status"] == "pass" and results["gpu01"]["measurements"]["level"] == 1
    assert results["gpu02"]["status"] == "fail" and "dcgmi: No such file or directory" in results["gpu02"]["detail"]


def test_drain_reasons_are_one_bounded_line_without_quotes():
    entry = v.result("dcgm", "gpu01", "fail", 'GPU 0 "memory": ' + "x" * 400)
    [drain] = ga.drain_list([entry, v.result("sacct", "gpu02", "fail", "not a GPU check")])
    assert drain["node"] == "gpu01" and '"' not in drain["reason"] and len(drain["reason"]) <= ga.DRAIN_REASON_LIMIT


def test_versions_from_sinfo_and_the_facts():
    found = ga.versions("slurm-wlm 22.05.8\n", {"gpu01": H100_FACTS, "cpu01": {}})
    assert found == {"slurm": "22.05.8", "nodes": {"gpu01": {"driver": "580.65.06", "cuda": "13.0", "nccl": None}}}
    assert ga.versions("", None) == {"slurm": None, "nodes": {}}


def test_jobs_sh_runs_every_job_side_by_side_and_reports_each(tmp_path):
    srun = tmp_path / "srun"
    srun.write_text('#!/bin/bash\necho "args: $*"\necho "to stderr" >&2\ncase "$*" in *gpu02*) exit 3 ;; esac\n')
    srun.chmod(0o755)
    script = REPO / "roles" / "validate" / "files" / "jobs.sh"
    done = subprocess.run(
        ["bash", str(script), "30", "gpu01=8", "gpu02,gpu03=4", "--", "--job-name=t", "--", "tool", "-g", "@GPUS@"],
        capture_output=True, text=True, env={**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    jobs = ga.parse_job_lines(done.stdout)
    assert [(job["nodes"], job["rc"]) for job in jobs] == [(["gpu01"], 0), (["gpu02", "gpu03"], 3)]
    assert jobs[0]["stdout"] == (
        "args: --job-name=t --nodes=1 --ntasks-per-node=1 --nodelist=gpu01 --gpus-per-node=8 tool -g 8\n")
    assert "--nodes=2" in jobs[1]["stdout"] and jobs[1]["stdout"].endswith("tool -g 4\n")
    assert jobs[1]["stderr"] == "to stderr\n"


@pytest.mark.parametrize("check", ga.GPU_CHECKS)
def test_the_gpu_checks_are_checks(check):
    assert check in v.CHECK_NAMES
