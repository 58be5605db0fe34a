"""playbooks/validate.yml (the validate role) for real, against stand-in Slurm commands on localhost (no cluster, no Docker).

The stand-ins (sinfo, srun, sbatch, squeue, sacct, scontrol, sacctmgr, scancel,
nvidia-smi, and systemctl, munge, unmunge for munge's health on each node)
print what a healthy, or a broken, cluster prints; the test runs
the entry playbook through deepops' runner and checks the results the role
recorded with set_stats, so the role's commands, the filters' parsing and
verdicts, and the cleanup are exercised end to end. The parsers and verdicts
themselves are tested case by case in test_validate_checks.py.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from deepops_py import reports, runner
from deepops_py.progress import PlainProgress

REPO = Path(__file__).resolve().parents[2]
H100_XML = REPO / "deepops_py" / "virtual" / "fixtures" / "h100-sxm5-80gb-x8-driver580.xml"

HEALTHY = {
    "sinfo": "gpu01 idle gpu:h100:8(S:0-1)\ngpu02 mixed gpu:h100:8\ngpu01 idle gpu:h100:8(S:0-1)\n",
    "sinfo_error": "",
    "cvd": "0,1,2,3,4,5,6,7",
    "sacct": "COMPLETED|billing=1,cpu=1,gres/gpu:h100=8,gres/gpu=8,mem=1G,node=1",
    "high_state": "RUNNING",
    "restarts": "1",
    "exempt": "00:00:00",
    "association": "root\n",  # root's association in the test jobs' account (validate_account)
}

STUBS = {
    "sinfo": textwrap.dedent("""\
        if [ -s "$DEEPOPS_FAKE/sinfo_error" ]; then cat "$DEEPOPS_FAKE/sinfo_error" >&2; exit 1; fi
        cat "$DEEPOPS_FAKE/sinfo"
        """),
    "srun": textwrap.dedent("""\
        echo "srun $*" >> "$DEEPOPS_FAKE/submitted"
        nodes=""
        for arg in "$@"; do case "$arg" in --nodelist=*) nodes=${arg#--nodelist=} ;; esac; done
        case "$*" in
          *printenv*) cat "$DEEPOPS_FAKE/cvd"; echo ;;
          *dcgmi\\ diag*) cat "$DEEPOPS_FIXTURES/dcgmi-diag-r1-dcgm3.1-x8-pass-dcgm-jsonresulttests.txt" ;;
          *all_reduce_perf*) cat "$DEEPOPS_FIXTURES/nccl-all-reduce-h100-2x8-p5-awsome.txt" ;;
          *--mpi=*)  # the JSON line rank 0 of roles/validate/files/mpi_allreduce.py prints
            hosts=$(printf '"%s",' ${nodes//,/ }); set -- ${nodes//,/ }; size=$#
            echo "{\\"size\\": $size, \\"sum\\": $((size * (size - 1) / 2)), \\"hosts\\": [${hosts%,}], \\"library\\": \\"stand-in\\"}" ;;
          *) for n in ${nodes//,/ }; do echo "$n $n.example"; done ;;
        esac
        """),
    "sbatch": textwrap.dedent("""\
        echo "sbatch $*" >> "$DEEPOPS_FAKE/submitted"
        case "$*" in
          *--wait*) echo "101;deepops" ;;
          *--qos=low*) echo 201 ;;
          *) echo 202 ;;
        esac
        """),
    # The checks' jobs leave the queue once scancel has been called (the
    # cleanup waits for that); until then they are listed.
    "squeue": textwrap.dedent("""\
        case "$*" in
          *--name=*) [ -s "$DEEPOPS_FAKE/scancel" ] || echo 101 ;;
          *202*) cat "$DEEPOPS_FAKE/high_state" ;;
          *) echo RUNNING ;;
        esac
        """),
    "sacct": 'cat "$DEEPOPS_FAKE/sacct"',
    "scontrol": textwrap.dedent("""\
        case "$*" in
          *config*) printf 'PreemptType             = preempt/qos\\nPreemptMode             = REQUEUE\\nPreemptExemptTime       = %s\\n' "$(cat "$DEEPOPS_FAKE/exempt")" ;;
          *job*) echo "JobId=201 JobName=deepops-validate JobState=PENDING Reason=BeginTime Restarts=$(cat "$DEEPOPS_FAKE/restarts") BatchFlag=1" ;;
        esac
        """),
    "sacctmgr": textwrap.dedent("""\
        echo "sacctmgr $*" >> "$DEEPOPS_FAKE/sacctmgr"
        case "$*" in
          *association*) cat "$DEEPOPS_FAKE/association" ;;
          *) printf 'high|00:00:00|low\\nnormal|00:00:00|\\nlow|00:00:00|\\n' ;;
        esac
        """),
    "scancel": 'echo "$*" >> "$DEEPOPS_FAKE/scancel"',
    # munge's health (roles/validate/files/munge.sh): DEEPOPS_FAKE_MUNGE is the node's munge.service state
    "systemctl": textwrap.dedent("""\
        [ "$*" = "is-active munge" ] || exit 1
        echo "${DEEPOPS_FAKE_MUNGE:-active}"; [ "${DEEPOPS_FAKE_MUNGE:-active}" = active ]
        """),
    "munge": textwrap.dedent("""\
        if [ "${DEEPOPS_FAKE_MUNGE:-active}" != active ]; then
          echo 'munge: Error: Unable to access "/run/munge/munge.socket.2": No such file or directory' >&2; exit 1
        fi
        echo "MUNGE:stand-in-credential:"
        """),
    "unmunge": "grep -q '^MUNGE:' || { echo 'unmunge: Error: No credential specified' >&2; exit 1; }; echo 'STATUS: Success (0)'",
}
# in a directory of its own: a node "without GPUs" runs its modules with that directory off PATH
NVIDIA_SMI = f'case "$*" in *-x*) cat {H100_XML} ;; *) exit 1 ;; esac'

INVENTORY = """\
all:
  vars:
    ansible_connection: local
    ansible_python_interpreter: {python}
    ansible_become: false
  children:
    slurm_controller:
      hosts:
        ctl01:
    slurm_compute:
      hosts:
        gpu01: {gpu01}
        gpu02: {gpu02}
"""


@pytest.fixture
def fake_cluster(tmp_path, monkeypatch):
    if shutil.which("ansible-playbook", path=str(Path(sys.executable).parent)) is None:
        pytest.fail("ansible-playbook is not installed beside this Python: ansible-core, a dependency of deepops, is missing")
    bin_dir, gpu_bin, fake = tmp_path / "bin", tmp_path / "gpu-bin", tmp_path / "fake"
    for path in (bin_dir, gpu_bin, fake):
        path.mkdir()
    for path, body in [*((bin_dir / name, body) for name, body in STUBS.items()), (gpu_bin / "nvidia-smi", NVIDIA_SMI)]:
        path.write_text("#!/bin/bash\n" + body)
        path.chmod(0o755)
    inventory = tmp_path / "inventory.yml"
    playbook = REPO / "playbooks" / "validate.yml"  # the real entry playbook: inventory check, GPU facts, the role
    monkeypatch.setenv("DEEPOPS_STATE_DIR", str(tmp_path / "state"))
    # the runner passes DEEPOPS_* through, and PATH: the stand-ins come first
    monkeypatch.setenv("DEEPOPS_FAKE", str(fake))
    monkeypatch.setenv("DEEPOPS_FIXTURES", str(H100_XML.parent))  # recorded dcgmi and all_reduce_perf outputs
    monkeypatch.setenv("PATH", f"{gpu_bin}{os.pathsep}{bin_dir}{os.pathsep}{os.environ['PATH']}")

    def node_python(node, no_gpus, munge_stopped):
        """The node's interpreter: this Python, in the node's environment (no nvidia-smi, munge stopped)."""
        path = os.pathsep.join(entry for entry in os.environ["PATH"].split(os.pathsep) if entry != str(gpu_bin))
        lines = ([f"export PATH={shlex.quote(path)}"] if node in no_gpus else []) + (
            ["export DEEPOPS_FAKE_MUNGE=inactive"] if node in munge_stopped else [])
        if not lines:
            return ""
        python = tmp_path / f"python-{node}"
        python.write_text("#!/bin/bash\n" + "\n".join(lines) + f'\nexec {sys.executable} "$@"\n')
        python.chmod(0o755)
        return f"{{ansible_python_interpreter: {python}}}"

    def run(scenario=None, no_gpus=(), unreachable=(), munge_stopped=(), **extra_vars):
        for key, value in {**HEALTHY, **(scenario or {})}.items():
            (fake / key).write_text(value)
        (fake / "submitted").write_text("")  # every srun and sbatch, with its arguments
        hosts = {node: node_python(node, no_gpus, munge_stopped) for node in ("gpu01", "gpu02")}
        # nothing listens on port 1: ssh is refused at once
        hosts.update({node: "{ansible_connection: ssh, ansible_host: 127.0.0.1, ansible_port: 1}" for node in unreachable})
        inventory.write_text(INVENTORY.format(python=sys.executable, **hosts))
        request = runner.RunRequest(
            command="validate", playbook=str(playbook), inventory=inventory,
            extra_vars={"validate_skip": [], "validate_job_timeout": 5, "validate_sacct_wait": 2, **extra_vars},
            content_dir=REPO,
        )
        result = runner.run_playbook(request, progress=PlainProgress(open(os.devnull, "w")))
        report = reports.report_from_run(result)
        return report, {(c.check, c.node): c for c in report.checks}, (fake / "scancel")

    return run


def test_healthy_cluster_passes_every_check(fake_cluster):
    report, checks, scancel = fake_cluster()
    assert report.ok, [c for c in report.checks if not c.passed]
    assert sorted(checks) == sorted([
        ("nodes", "gpu01"), ("nodes", "gpu02"), ("hostname", "gpu01,gpu02"), ("mpi", "gpu01,gpu02"),
        ("gpus", "gpu01"), ("gpus", "gpu02"), ("mig", ""), ("dcgm", "gpu01"), ("dcgm", "gpu02"),
        ("nccl", "gpu01"), ("nccl", "gpu02"), ("nccl", "all"), ("sacct", "gpu01"), ("preemption", "gpu01"),
    ])
    assert {check.status for check in report.checks if check.check != "mig"} == {"pass"}
    assert checks["mig", ""].status == "not_applicable" and "no GPU is in MIG mode" in checks["mig", ""].detail
    assert [check.check for check in report.checks] == [
        "nodes", "nodes", "hostname", "mpi", "gpus", "gpus", "mig", "dcgm", "dcgm", "nccl", "nccl", "nccl",
        "sacct", "preemption"]
    assert checks["nccl", "gpu01"].detail.startswith("busbw 487.26 GB/s at 16 GiB >= ")
    assert checks["dcgm", "gpu02"].detail == "dcgmi diag -r 1: 10 tests, 8 GPUs, no failure"
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7" in checks["gpus", "gpu01"].detail
    assert "requeued (Restarts=1" in checks["preemption", "gpu01"].detail
    assert "2 ranks, allreduce sum 1 (expected 1) on gpu01,gpu02" in checks["mpi", "gpu01,gpu02"].detail
    assert "--name=deepops-validate" in scancel.read_text()  # cleanup ran
    # every job is charged to root's own account, never to whatever root's default happens to be
    submitted = [line for line in scancel.with_name("submitted").read_text().splitlines() if line.startswith(("srun ", "sbatch "))]
    assert len(submitted) >= 8 and all(" --account=root " in f"{line} " for line in submitted), submitted
    assert "show association where user=root account=root format=account" in scancel.with_name("sacctmgr").read_text()


def test_broken_cluster_fails_the_right_checks(fake_cluster):
    report, checks, scancel = fake_cluster({
        "sinfo": "gpu01 idle gpu:h100:4\ngpu02 down* gpu:h100:8\n",
        "cvd": "0,1,2",
        "sacct": "COMPLETED|billing=1,cpu=1,node=1",
        "restarts": "0",
    })
    assert not report.ok
    # gpu01's GPUs themselves are fine (dcgm, nccl), and no GPU is in MIG mode
    assert {check.status for check in report.checks if check.check not in ("mig", "dcgm", "nccl")} == {"fail"}
    assert checks["dcgm", "gpu02"].status == checks["nccl", "gpu02"].status == "fail"
    assert "not usable" in checks["nccl", "gpu02"].detail
    assert "nvidia-smi on the node reports 8" in checks["nodes", "gpu01"].detail
    assert "down*" in checks["nodes", "gpu02"].detail
    assert "not usable: gpu02" in checks["hostname", "gpu01,gpu02"].detail
    assert "not usable: gpu02" in checks["mpi", "gpu01,gpu02"].detail
    assert "3 devices, expected 4" in checks["gpus", "gpu01"].detail
    assert "not usable" in checks["gpus", "gpu02"].detail
    assert "gres/gpu=4" in checks["sacct", "gpu01"].detail
    assert "NOT requeued" in checks["preemption", "gpu01"].detail
    assert "--name=deepops-validate" in scancel.read_text()


def test_preemption_bound_of_zero_fails_and_exempt_time_extends_the_bound(fake_cluster):
    _, checks, _ = fake_cluster({"high_state": "PENDING"}, validate_preemption_bound=0)
    assert ("preemption", "gpu01") in checks, list(checks.values())
    check = checks["preemption", "gpu01"]
    assert check.status == "fail" and "still PENDING" in check.detail and "bound 0 s" in check.detail
    _, checks, _ = fake_cluster({"exempt": "00:00:01"}, validate_preemption_bound=2)
    assert checks["preemption", "gpu01"].passed and "bound 3 s" in checks["preemption", "gpu01"].detail


def test_skipped_checks_record_nothing(fake_cluster):
    report, checks, _ = fake_cluster(validate_skip=["hostname", "mpi", "gpus", "mig", "dcgm", "nccl", "sacct", "preemption"])
    assert report.ok and {check for check, _ in checks} == {"nodes"}


def test_a_node_without_gpus_is_not_applicable_for_the_gpus_check(fake_cluster):
    report, checks, _ = fake_cluster({"sinfo": "gpu01 idle gpu:h100:8\ngpu02 idle (null)\n"}, no_gpus=("gpu02",))
    assert report.ok, [c for c in report.checks if not c.passed]
    assert checks["nodes", "gpu02"].status == "pass" and "0 GPUs on the node" in checks["nodes", "gpu02"].detail
    assert checks["gpus", "gpu02"].status == "not_applicable" and "no GPUs" in checks["gpus", "gpu02"].detail
    assert checks["gpus", "gpu01"].status == "pass"
    assert report.summary()["not_applicable"] == 4 and report.summary()["failed"] == 0  # gpus, dcgm, nccl on gpu02; mig


def test_a_cluster_without_gpus_passes_with_the_gpu_checks_not_applicable(fake_cluster):
    report, checks, _ = fake_cluster({"sinfo": "gpu01 idle (null)\ngpu02 idle (null)\n"}, no_gpus=("gpu01", "gpu02"))
    assert report.ok, [c for c in report.checks if not c.passed]
    statuses = {key: check.status for key, check in checks.items()}
    assert statuses == {
        ("nodes", "gpu01"): "pass", ("nodes", "gpu02"): "pass", ("hostname", "gpu01,gpu02"): "pass",
        ("mpi", "gpu01,gpu02"): "pass", ("gpus", "gpu01"): "not_applicable", ("gpus", "gpu02"): "not_applicable", ("mig", ""): "not_applicable",
        ("dcgm", "gpu01"): "not_applicable", ("dcgm", "gpu02"): "not_applicable",
        ("nccl", "gpu01"): "not_applicable", ("nccl", "gpu02"): "not_applicable",
        ("sacct", ""): "not_applicable", ("preemption", ""): "not_applicable",
    }


def test_an_unreachable_node_fails_the_nodes_check_and_the_run_and_the_others_are_checked(fake_cluster):
    report, checks, _ = fake_cluster(unreachable=("gpu02",))
    assert not report.ok
    assert checks["nodes", "gpu02"].status == "fail" and "no GPU facts from the node" in checks["nodes", "gpu02"].detail
    assert checks["nodes", "gpu01"].status == "pass" and checks["gpus", "gpu01"].status == "pass"
    assert checks["playbook", ""].status == "fail" and "gpu02 unreachable" in checks["playbook", ""].detail


def test_a_node_whose_munge_is_stopped_fails_the_nodes_check_naming_munge_and_gets_no_job(fake_cluster):
    report, checks, scancel = fake_cluster(munge_stopped=("gpu02",))
    assert not report.ok and ("playbook", "") not in checks  # failed checks, not a failed run
    # sinfo still shows gpu02 mixed: slurmctld notices only after SlurmdTimeout
    assert checks["nodes", "gpu02"].status == "fail" and checks["nodes", "gpu02"].detail == (
        "munge is not running on gpu02 (systemctl is-active: inactive): slurmd cannot authenticate to slurmctld; "
        "Slurm shows the node mixed")
    assert checks["nodes", "gpu01"].status == "pass" and checks["gpus", "gpu01"].status == "pass"
    assert "not usable" in checks["gpus", "gpu02"].detail and "not usable" in checks["dcgm", "gpu02"].detail
    assert "not usable: gpu02" in checks["hostname", "gpu01,gpu02"].detail
    submitted = scancel.with_name("submitted").read_text()
    assert "gpu01" in submitted and "gpu02" not in submitted, submitted  # a job there would hang
    assert "--name=deepops-validate" in scancel.read_text()  # and the cleanup ran all the same


def test_a_step_that_cannot_run_is_recorded_and_the_jobs_are_still_cancelled(fake_cluster):
    report, checks, scancel = fake_cluster({"sinfo_error": "slurm_load_node: Unable to contact slurm controller (connect failure)"})
    assert not report.ok
    error = checks["validate", "ctl01"]
    assert error.status == "fail" and "sinfo" in error.detail and "Unable to contact slurm controller" in error.detail
    assert "--name=deepops-validate" in scancel.read_text()


def test_an_account_the_jobs_user_has_no_association_in_stops_the_run_before_any_job(fake_cluster):
    report, checks, scancel = fake_cluster({"association": ""}, validate_account="acceptance")
    assert not report.ok
    error = checks["validate", "ctl01"]
    assert error.status == "fail", error
    assert "root has no Slurm association in the account acceptance (validate_account)" in error.detail
    assert scancel.with_name("submitted").read_text() == ""  # no job was submitted
    assert "--name=deepops-validate" in scancel.read_text()


def test_entry_playbook_passes_the_syntax_check(tmp_path):
    import subprocess

    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  children:\n    slurm_controller:\n      hosts:\n        ctl01:\n"
                         "    slurm_compute:\n      hosts:\n        gpu01:\n")
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    result = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "--syntax-check", "-i", str(inventory),
         str(REPO / "playbooks" / "validate.yml")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
