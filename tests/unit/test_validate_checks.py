"""The validation checks' one list, and every parser and verdict (plugins/module_utils/validation.py).

The role (roles/validate), its argument specs, the CLI's --skip, the reports
and README's table all follow ``validation.CHECKS``; the tests here fail when
one of them drifts. The verdict tests feed the functions what the role
registers from Slurm's commands (real output shapes), no Ansible needed.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.deepops.cluster.plugins.module_utils import validation as v

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "validate"


# --------------------------------------------------------------------------
# the one list


def test_the_list_names_the_checks_in_order():
    assert v.CHECK_NAMES == ("nodes", "hostname", "mpi", "gpus", "mig", "dcgm", "nccl", "burnin", "sacct", "preemption")
    assert v.SKIPPABLE_CHECKS == ("hostname", "mpi", "gpus", "mig", "dcgm", "nccl", "burnin", "sacct", "preemption")
    assert all(check.description for check in v.CHECKS)


def test_every_check_has_a_task_file_and_every_task_file_a_check():
    files = {path.stem.removeprefix("check_") for path in (ROLE / "tasks").glob("check_*.yml")}
    assert files == set(v.CHECK_NAMES), "roles/validate/tasks/check_<name>.yml and validation.CHECKS differ"


def test_every_check_file_records_its_results_under_its_own_key():
    for name in v.CHECK_NAMES:
        text = (ROLE / "tasks" / f"check_{name}.yml").read_text()
        assert f"{v.DATA_PREFIX}{name}:" in text, f"check_{name}.yml does not set_stats {v.DATA_PREFIX}{name}"


def test_role_runs_the_checks_from_the_list():
    """main.yml names no check: it loops over the filter that reads the list."""
    main = (ROLE / "tasks" / "main.yml").read_text()
    assert "deepops.cluster.validate_selected_checks" in main
    for name in v.CHECK_NAMES:
        assert f"check_{name}" not in main


def test_skip_choices_in_the_argument_specs_are_the_skippable_checks():
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())
    skip = specs["argument_specs"]["main"]["options"]["validate_skip"]
    assert (skip["type"], skip["elements"]) == ("list", "str")
    assert tuple(skip["choices"]) == v.SKIPPABLE_CHECKS


def test_cli_skip_choices_are_the_skippable_checks():
    from deepops_py.cli import validate

    (skip,) = [param for param in validate.params if param.name == "skip"]
    assert tuple(skip.type.choices) == v.SKIPPABLE_CHECKS
    for check in v.CHECKS:
        assert check.name in validate.help


def test_reports_use_the_list():
    from deepops_py import reports

    assert reports.CHECKS == v.CHECK_NAMES and reports.SKIPPABLE_CHECKS == v.SKIPPABLE_CHECKS


def test_readme_table_lists_the_checks():
    text = (REPO / "README.md").read_text()
    section = text.split("## Validating the cluster", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z_]+)`", section, flags=re.MULTILINE)
    assert tuple(rows) == v.CHECK_NAMES, "README's 'Validating the cluster' table and validation.CHECKS differ"


def test_the_list_imports_no_ansible_and_nothing_beyond_the_standard_library():
    code = (
        "import sys\n"
        "import ansible_collections.deepops.cluster.plugins.module_utils.validation\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('ansible', 'deepops_py', 'yaml', 'jinja2')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_selected_checks_leave_out_the_skipped_ones_and_refuse_unknown_or_fixed_names():
    by_default = [name for name in v.CHECK_NAMES if name not in v.OPT_IN_CHECKS]
    assert v.OPT_IN_CHECKS == ("burnin",)
    assert v.selected_checks([]) == v.selected_checks(None) == by_default
    assert v.selected_checks([], ["burnin"]) == list(v.CHECK_NAMES)  # asked for: it runs
    assert "burnin" not in v.selected_checks(["burnin"], ["burnin"])  # skipping wins
    assert v.selected_checks(["sacct", "hostname"]) == ["nodes", "mpi", "gpus", "mig", "dcgm", "nccl", "preemption"]
    with pytest.raises(v.ValidationInputError, match="not a check: bogus"):
        v.selected_checks(["bogus"])
    with pytest.raises(v.ValidationInputError, match="cannot be skipped: nodes"):
        v.selected_checks(["nodes"])


def test_result_carries_status_and_passed():
    assert v.result("gpus", "gpu01", v.NOT_APPLICABLE, "no GPUs\n  here", 1.234) == {
        "check": "gpus", "node": "gpu01", "status": "not_applicable", "passed": False,
        "detail": "no GPUs here", "seconds": 1.23,
    }
    assert v.result("gpus", "gpu01", v.PASS, "")["passed"] is True
    with pytest.raises(v.ValidationInputError):
        v.result("gpus", "gpu01", "skipped", "")


# --------------------------------------------------------------------------
# parsers


@pytest.mark.parametrize(
    "gres, count",
    [
        ("gpu:h100:8(S:0-1)", 8),
        ("gpu:8", 8),
        ("gpu:h100:4,gpu:a100:2(S:1)", 6),
        ("gpu:a100_3g.40gb:2,gpu:a100_1g.10gb:3", 5),
        ("(null)", 0),
        ("mps:100", 0),
        ("", 0),
    ],
)
def test_gres_gpu_count(gres, count):
    assert v.gres_gpu_count(gres) == count


def test_sinfo_nodes_one_entry_per_node():
    stdout = "gpu01 idle gpu:h100:8(S:0-1)\ngpu02 down* gpu:h100:8\n\ngpu01 idle gpu:h100:8(S:0-1)\ncpu01 mixed\n"
    assert v.parse_sinfo_nodes(stdout) == {
        "gpu01": {"state": "idle", "gres": "gpu:h100:8(S:0-1)", "gpus": 8},
        "gpu02": {"state": "down*", "gres": "gpu:h100:8", "gpus": 8},
        "cpu01": {"state": "mixed", "gres": "(null)", "gpus": 0},
    }
    assert v.parse_sinfo_nodes(None) == {}


@pytest.mark.parametrize(
    "text, seconds",
    [("00:00:00", 0), ("00:01:30", 90), ("1-02:00:00", 93600), ("05:00", 300), ("-1", 0), ("N/A", 0), ("", 0), (None, 0)],
)
def test_slurm_duration_seconds(text, seconds):
    assert v.slurm_duration_seconds(text) == seconds


@pytest.mark.parametrize("delta, seconds", [("0:00:01.234567", 1.23), ("1:02:03.5", 3723.5), (None, 0.0), ("junk", 0.0)])
def test_ansible_delta_seconds(delta, seconds):
    assert v.ansible_delta_seconds(delta) == seconds


def test_key_values_scontrol_config_and_job_fields():
    assert v.parse_key_values("job=101\nrecord=COMPLETED|a=1,b=2\nnoise\n") == {"job": "101", "record": "COMPLETED|a=1,b=2"}
    config = v.parse_scontrol_config(
        "Configuration data as of 2026-11-30T10:00:00\nPreemptMode             = REQUEUE\n"
        "PreemptType             = preempt/qos\nPreemptExemptTime       = 00:00:00\n"
    )
    assert config == {"PreemptMode": "REQUEUE", "PreemptType": "preempt/qos", "PreemptExemptTime": "00:00:00"}
    fields = v.parse_job_fields("JobId=201 JobName=deepops-validate JobState=PENDING Reason=BeginTime Restarts=1 BatchFlag=1")
    assert (fields["JobState"], fields["Reason"], fields["Restarts"]) == ("PENDING", "BeginTime", "1")


@pytest.mark.parametrize(
    "output, job",
    [("101", "101"), ("101;deepops\n", "101"), ("sbatch: warning: x\n202", "202"), ("", ""),
     ("sbatch: error: Batch job submission failed: Invalid qos specification", "")],
)
def test_sbatch_job_id(output, job):
    assert v.parse_sbatch_job_id(output) == job


def test_qos():
    assert v.parse_qos("high|00:00:00|low\nnormal||\nlow|00:01:00|\n") == {
        "high": {"grace_time": "00:00:00", "preempt": "low"},
        "normal": {"grace_time": "", "preempt": ""},
        "low": {"grace_time": "00:01:00", "preempt": ""},
    }


# --------------------------------------------------------------------------
# verdicts

COMPUTES = ["gpu01", "gpu02"]
# ansible_facts of a node: with 8 GPUs, without nvidia-smi, not reached
FACTS_8 = {"deepops_gpus": {"present": True, "count": 8, "gpu_count": 8}, "other": 1}
NO_GPUS = {"deepops_gpus": {"present": False, "count": 0}}
UNREACHED = {}


def cluster(sinfo="gpu01 idle gpu:h100:8\ngpu02 mixed gpu:h100:8\n", facts=None, node=""):
    facts = {"gpu01": FACTS_8, "gpu02": FACTS_8} if facts is None else facts
    return v.survey(sinfo, COMPUTES, facts, node)


def ran(stdout="", rc=0, stderr="", delta="0:00:01.500000", **extra):
    return {"rc": rc, "stdout": stdout, "stderr": stderr, "delta": delta, "changed": False, **extra}


SKIPPED = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}


def by_node(results):
    return {r["node"]: r for r in results}


def test_survey_usable_nodes_and_target():
    c = cluster("gpu01 down* gpu:h100:8\ngpu02 idle gpu:h100:4\n")
    assert (c["usable"], c["gpu_nodes"], c["target"], c["target_gpus"]) == (["gpu02"], ["gpu02"], "gpu02", 4)
    assert cluster(node="gpu02")["target"] == "gpu02"
    none = cluster("gpu01 down gpu:h100:8\n")
    assert (none["usable"], none["target"], none["target_gpus"]) == ([], "", 0)


def test_a_planned_node_is_usable():
    # Idle, set aside by backfill for a pending job (a flag that outlives the job until its next cycle).
    c = cluster("gpu01 planned gpu:h100:8\ngpu02 idle gpu:h100:8\n")
    assert c["usable"] == ["gpu01", "gpu02"]
    assert by_node(v.nodes_results(c))["gpu01"]["status"] == "pass"


def test_nodes_verdicts():
    results = by_node(v.nodes_results(cluster("gpu01 idle gpu:h100:4\n", {"gpu01": FACTS_8, "gpu02": UNREACHED})))
    assert results["gpu01"]["status"] == "fail" and "counts 4 GPUs, nvidia-smi on the node reports 8" in results["gpu01"]["detail"]
    assert results["gpu02"]["status"] == "fail" and "not known to Slurm" in results["gpu02"]["detail"]
    results = by_node(v.nodes_results(cluster("gpu01 drained gpu:h100:8\ngpu02 idle gpu:h100:8\n", {"gpu01": FACTS_8, "gpu02": UNREACHED})))
    assert v.survey("gpu01 idle gpu:h100:8\n", ["gpu01"], {})["counted"] == {"gpu01": None}
    assert "state drained" in results["gpu01"]["detail"] and results["gpu01"]["status"] == "fail"
    assert "no GPU facts" in results["gpu02"]["detail"] and results["gpu02"]["status"] == "fail"
    results = by_node(v.nodes_results(cluster("gpu01 idle gpu:h100:8\ngpu02 idle (null)\n", {"gpu01": FACTS_8, "gpu02": NO_GPUS})))
    assert results["gpu01"]["status"] == results["gpu02"]["status"] == "pass"
    assert results["gpu02"]["detail"] == "idle, GRES (null), 0 GPUs on the node"


def munge_run(active="active", credential_rc="0", credential_err=""):
    """What roles/validate/files/munge.sh prints on a node, as the role registers it."""
    return ran(f"active={active}\ncredential_rc={credential_rc}\ncredential_err={credential_err}\n")


MUNGE_UP = munge_run()
MUNGE_STOPPED = munge_run("inactive", "1", 'munge: Error: Unable to access "/run/munge/munge.socket.2": No such file or directory')
BOTH_IDLE = "gpu01 idle gpu:h100:8\ngpu02 idle gpu:h100:8\n"


def test_a_node_whose_munge_is_stopped_is_not_usable_and_fails_the_nodes_check_naming_munge():
    c = v.survey(BOTH_IDLE, COMPUTES, {"gpu01": FACTS_8, "gpu02": FACTS_8}, "", {"gpu01": MUNGE_UP, "gpu02": MUNGE_STOPPED})
    # Slurm still shows gpu02 idle (slurmctld notices only after SlurmdTimeout): no test job goes there
    assert (c["usable"], c["gpu_nodes"], c["target"]) == (["gpu01"], ["gpu01"], "gpu01")
    results = by_node(v.nodes_results(c))
    assert results["gpu01"] == v.result("nodes", "gpu01", "pass", "idle, GRES gpu:h100:8, 8 GPUs on the node")
    assert results["gpu02"] == v.result("nodes", "gpu02", "fail", (
        "munge is not running on gpu02 (systemctl is-active: inactive): slurmd cannot authenticate to slurmctld; "
        "Slurm shows the node idle"))
    # the checks that need every node, or this node, say they did not run and point at the nodes check
    assert v.hostname_result(SKIPPED, c)["detail"] == "not run: nodes not usable: gpu02"
    assert v.mpi_result(SKIPPED, c)["detail"] == "not run: nodes not usable: gpu02"
    assert by_node(v.gpus_results([], c))["gpu02"]["detail"] == "not run: the node is not usable (see the nodes check)"
    # once slurmctld has noticed, munge is still named as the cause
    down = by_node(v.nodes_results(v.survey("gpu01 idle gpu:h100:8\ngpu02 down* gpu:h100:8\n", COMPUTES,
                                            {"gpu01": FACTS_8, "gpu02": FACTS_8}, "", {"gpu02": munge_run("failed")})))
    assert down["gpu02"]["detail"].startswith("munge is not running on gpu02 (systemctl is-active: failed): ")
    assert down["gpu02"]["detail"].endswith("; Slurm shows the node down*")


def test_munge_running_but_failing_its_credential_round_trip_fails_the_node():
    facts = {"gpu01": FACTS_8, "gpu02": FACTS_8}
    for run, said in [
        (munge_run("active", "1", "unmunge: Error: Invalid credential"), "rc=1: unmunge: Error: Invalid credential"),
        (munge_run("active", "124", ""), "rc=124 (timed out)"),
    ]:
        c = v.survey(BOTH_IDLE, COMPUTES, facts, "", {"gpu01": run, "gpu02": MUNGE_UP})
        assert c["usable"] == ["gpu02"]
        assert by_node(v.nodes_results(c))["gpu01"]["detail"] == (
            f"munge on gpu01 cannot encode and decode a credential (munge -n | unmunge: {said}): "
            "slurmd cannot authenticate to slurmctld; Slurm shows the node idle")


def test_munge_working_or_unknown_changes_nothing():
    facts = {"gpu01": FACTS_8, "gpu02": UNREACHED}
    before = v.survey(BOTH_IDLE, COMPUTES, facts)
    # munge up on gpu01; gpu02 not reached (no result), as today: it fails for its missing facts, not for munge
    after = v.survey(BOTH_IDLE, COMPUTES, facts, "", {"gpu01": MUNGE_UP, "gpu02": {}})
    assert after == before and after["munge_problems"] == {}
    assert v.nodes_results(after) == v.nodes_results(before)
    assert "no GPU facts from the node" in by_node(v.nodes_results(after))["gpu02"]["detail"]
    # no systemd to ask (or the script did not run) and the credential round-trips: no verdict either
    unknown = {"gpu01": munge_run("bash: line 1: systemctl: command not found"), "gpu02": SKIPPED}
    assert v.survey(BOTH_IDLE, COMPUTES, {"gpu01": FACTS_8, "gpu02": FACTS_8}, "", unknown)["usable"] == COMPUTES


def test_a_chosen_preemption_node_whose_munge_is_stopped_gets_no_job():
    c = v.survey(BOTH_IDLE, COMPUTES, {"gpu01": FACTS_8, "gpu02": FACTS_8}, "gpu02", {"gpu02": MUNGE_STOPPED})
    assert (c["target"], c["target_gpus"]) == ("gpu02", 0)  # check_sacct.yml and check_preemption.yml submit nothing
    sacct = v.sacct_result(SKIPPED, c, 60)
    assert sacct["status"] == "fail" and sacct["detail"].startswith("not run: munge is not running on gpu02")
    settings = v.preemption_settings("PreemptType = preempt/qos\n", "", "low", 60)
    assert v.preemption_result(SKIPPED, c, settings, "low", "high", 120)["detail"] == sacct["detail"]


# A node with one whole H100 and one cut into seven 1g.10gb MIG devices, as nvidia_gpu_facts reports it.
FACTS_MIG = {"deepops_gpus": {"present": True, "count": 2, "gres_by_type": {"h100": 1, "1g.10gb": 7}}}


def test_nodes_verdicts_count_mig_devices_by_profile():
    sinfo = "gpu01 idle gpu:h100:1(S:0),gpu:1g.10gb:7(S:0)\ngpu02 mixed gpu:h100:8(S:0-1)\n"
    facts = {"gpu01": FACTS_MIG, "gpu02": {"deepops_gpus": {"present": True, "count": 8, "gres_by_type": {"h100": 8}}}}
    c = cluster(sinfo, facts)
    assert (c["counted"], c["gpus"]) == ({"gpu01": 8, "gpu02": 8}, {"gpu01": 8, "gpu02": 8})
    results = by_node(v.nodes_results(c))
    assert results["gpu01"]["status"] == "pass"
    assert results["gpu01"]["detail"] == "idle, GRES gpu:h100:1(S:0),gpu:1g.10gb:7(S:0), 1g.10gb:7, h100:1 on the node"
    assert results["gpu02"]["status"] == "pass"
    # The same total, other types: Slurm still has the whole GPU where the node now has MIG devices.
    stale = by_node(v.nodes_results(cluster("gpu01 idle gpu:h100:2,gpu:1g.10gb:6\ngpu02 idle gpu:h100:8\n", facts)))
    assert stale["gpu01"]["status"] == "fail"
    assert stale["gpu01"]["detail"] == (
        "GRES gpu:h100:2,gpu:1g.10gb:6 counts 8 GPUs (1g.10gb:6, h100:2), nvidia-smi on the node reports 8 "
        "(1g.10gb:7, h100:1; a GPU in MIG mode counts its MIG devices)"
    )
    # Facts of a GPU in MIG mode without instances: no GRES, and Slurm must have none.
    empty = {"deepops_gpus": {"present": True, "count": 1, "gres_by_type": {}}}
    none = by_node(v.nodes_results(cluster("gpu01 idle (null)\ngpu02 idle gpu:h100:8\n", {"gpu01": empty, "gpu02": FACTS_8})))
    assert none["gpu01"]["status"] == "pass" and none["gpu01"]["detail"] == "idle, GRES (null), 0 GPUs on the node"


@pytest.mark.parametrize(
    ("gres", "expected"),
    [
        ("gpu:h100:1(S:0),gpu:1g.10gb:7(S:0)", {"h100": 1, "1g.10gb": 7}),
        ("gpu:3g.40gb:1,gpu:2g.20gb:1,gpu:1g.10gb:2", {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}),
        ("gpu:a100:2(S:0),gpu:a100:2(S:1)", {"a100": 4}),
        ("gpu:4", {"": 4}),
        ("(null)", {}),
        ("gpu:h100:0", {}),
    ],
)
def test_gres_gpu_by_type(gres, expected):
    assert v.gres_gpu_by_type(gres) == expected
    assert v.gres_gpu_count(gres) == sum(expected.values())


def test_hostname_verdicts():
    c = cluster()
    ok = v.hostname_result(ran("gpu01 gpu01.example\ngpu02 gpu02.example\n"), c)
    assert ok["status"] == "pass" and ok["node"] == "gpu01,gpu02" and ok["seconds"] == 1.5
    assert ok["detail"] == "2 nodes answered: gpu01 gpu01.example; gpu02 gpu02.example"
    missing = v.hostname_result(ran("gpu01 gpu01\n"), c)
    assert missing["status"] == "fail" and "expected gpu01,gpu02, got gpu01" in missing["detail"]
    timed_out = v.hostname_result(ran("", rc=124, stderr="srun: job 5 queued and waiting for resources"), c)
    assert timed_out["status"] == "fail" and "rc=124 (timed out)" in timed_out["detail"] and "got nothing" in timed_out["detail"]
    unusable = v.hostname_result(SKIPPED, cluster("gpu01 idle gpu:h100:8\ngpu02 down* gpu:h100:8\n"))
    assert unusable["status"] == "fail" and unusable["detail"] == "not run: nodes not usable: gpu02"


def test_mpi_verdicts():
    c = cluster()
    line = '{"size": 2, "sum": 1, "hosts": ["gpu01", "gpu02"], "library": "Open MPI v4.1.4, package: Debian"}'
    ok = v.mpi_result(ran("warning from the MPI library\n" + line + "\n"), c)
    assert ok["status"] == "pass" and ok["node"] == "gpu01,gpu02" and ok["seconds"] == 1.5
    assert ok["detail"] == "srun --mpi=pmix: 2 ranks, allreduce sum 1 (expected 1) on gpu01,gpu02; Open MPI v4.1.4"
    wrong_sum = v.mpi_result(ran(line.replace('"sum": 1', '"sum": 3')), c)
    assert wrong_sum["status"] == "fail" and "allreduce sum 3 (expected 1)" in wrong_sum["detail"]
    one_node = v.mpi_result(ran('{"size": 1, "sum": 0, "hosts": ["gpu01"]}'), c)
    assert one_node["status"] == "fail" and "expected 2 ranks on gpu01,gpu02" in one_node["detail"]
    no_pmix = v.mpi_result(ran("", rc=1, stderr="srun: error: Couldn't find the specified plugin name for mpi/pmix"), c, "pmix")
    assert no_pmix["status"] == "fail" and no_pmix["detail"].startswith("srun --mpi=pmix rc=1: srun: error: Couldn't find")
    garbage = v.mpi_result(ran("not json\n{broken"), c)
    assert garbage["status"] == "fail" and "rc=0: not json {broken" in garbage["detail"]
    unusable = v.mpi_result(SKIPPED, cluster("gpu01 idle gpu:h100:8\ngpu02 drained gpu:h100:8\n"))
    assert unusable["status"] == "fail" and unusable["detail"] == "not run: nodes not usable: gpu02"


def _mig_facts(*profiles_per_gpu):
    """GPU facts with one GPU per argument: a list of MIG profiles (MIG mode on), or None (off)."""
    gpus = [
        {"index": i, "mig_mode": {"current": "Disabled" if profiles is None else "Enabled"},
         "mig_devices": [{"profile": profile} for profile in profiles or []]}
        for i, profiles in enumerate(profiles_per_gpu)
    ]
    return {"deepops_gpus": {"present": True, "count": len(gpus), "gpus": gpus}}


def test_mig_jobs_come_from_the_gpus_in_mig_mode():
    facts = {"gpu01": _mig_facts(["3g.40gb", "1g.10gb", "1g.10gb"], None), "gpu02": _mig_facts(None)}
    c = cluster("gpu01 idle gpu:a100:1,gpu:3g.40gb:1,gpu:1g.10gb:2\ngpu02 idle gpu:a100:1\n", facts)
    assert c["mig_jobs"] == [{"node": "gpu01", "profile": "1g.10gb"}, {"node": "gpu01", "profile": "3g.40gb"}]


def test_mig_verdicts():
    facts = {"gpu01": _mig_facts(["3g.40gb", "1g.10gb"]), "gpu02": _mig_facts(["1g.10gb"])}
    c = cluster("gpu01 idle gpu:3g.40gb:1,gpu:1g.10gb:1\ngpu02 drained gpu:1g.10gb:1\n", facts)
    runs = [ran("0\n", item={"node": "gpu01", "profile": "1g.10gb"}), ran("0,1\n", item={"node": "gpu01", "profile": "3g.40gb"})]
    results = by_node(v.mig_results(runs, c))
    assert results["gpu01"]["status"] == "fail"
    assert results["gpu01"]["detail"] == (
        "--gres=gpu:1g.10gb:1: CUDA_VISIBLE_DEVICES=0; --gres=gpu:3g.40gb:1: CUDA_VISIBLE_DEVICES=0,1 (2 devices, expected 1)")
    assert results["gpu02"]["status"] == "fail" and "not usable" in results["gpu02"]["detail"]
    runs[1] = ran("1\n", item={"node": "gpu01", "profile": "3g.40gb"})
    assert by_node(v.mig_results(runs, c))["gpu01"]["status"] == "pass"
    refused = [runs[0], ran("", rc=1, stderr="srun: error: Invalid generic resource (gres) specification",
                            item={"node": "gpu01", "profile": "3g.40gb"})]
    failed = by_node(v.mig_results(refused, c))["gpu01"]
    assert failed["status"] == "fail" and "--gres=gpu:3g.40gb:1 failed, rc=1: srun: error: Invalid generic" in failed["detail"]
    assert by_node(v.mig_results(runs[:1], c))["gpu01"]["detail"].endswith("--gres=gpu:3g.40gb:1: not run")


def test_mig_is_not_applicable_without_mig_devices():
    c = cluster("gpu01 idle gpu:h100:8\ngpu02 idle gpu:h100:8\n", {"gpu01": _mig_facts(None), "gpu02": _mig_facts(None)})
    [only] = v.mig_results([], c)
    assert only["status"] == "not_applicable" and only["node"] == ""


def test_gpus_verdicts():
    c = cluster("gpu01 idle gpu:h100:4\ngpu02 down* gpu:h100:8\n")
    results = by_node(v.gpus_results([ran("0,1,2\n", item="gpu01")], c))
    assert results["gpu01"]["status"] == "fail"
    assert results["gpu01"]["detail"] == "srun --gpus=4: CUDA_VISIBLE_DEVICES=0,1,2 (3 devices, expected 4)"
    assert results["gpu02"]["status"] == "fail" and "not usable" in results["gpu02"]["detail"]
    results = by_node(v.gpus_results([ran("0,1,2,3\n", item="gpu01")], c))
    assert results["gpu01"]["status"] == "pass" and results["gpu01"]["detail"] == "srun --gpus=4: CUDA_VISIBLE_DEVICES=0,1,2,3"
    failed = by_node(v.gpus_results([ran("", rc=1, stderr="srun: error: Unable to allocate resources", item="gpu01")], c))
    assert failed["gpu01"]["detail"] == "srun --gpus=4 failed, rc=1: srun: error: Unable to allocate resources"


def test_gpus_not_applicable_on_a_node_without_gpus():
    c = cluster("gpu01 idle gpu:h100:8\ngpu02 idle (null)\n", {"gpu01": FACTS_8, "gpu02": NO_GPUS})
    assert c["gpu_nodes"] == ["gpu01"]
    results = by_node(v.gpus_results([ran("0,1,2,3,4,5,6,7", item="gpu01")], c))
    assert results["gpu01"]["status"] == "pass"
    assert results["gpu02"]["status"] == "not_applicable" and results["gpu02"]["passed"] is False
    assert results["gpu02"]["detail"] == "no GPUs in Slurm's GRES ((null))"


def sacct_run(record="COMPLETED|billing=1,cpu=1,gres/gpu:h100=8,gres/gpu=8,node=1", sbatch_out="101;deepops", rc="0", err=""):
    lines = [f"sbatch_rc={rc}", f"sbatch_out={sbatch_out}", f"sbatch_err={err}"]
    if record is not None:
        lines.append(f"record={record}")
    return ran("\n".join(lines) + "\n")


def test_sacct_verdicts():
    c = cluster()
    ok = v.sacct_result(sacct_run(), c, 60)
    assert ok["status"] == "pass" and ok["node"] == "gpu01" and ok["detail"].startswith("job 101: COMPLETED|")
    wrong = v.sacct_result(sacct_run("COMPLETED|billing=1,cpu=1,node=1"), c, 60)
    assert wrong["status"] == "fail" and "expected COMPLETED with gres/gpu=8 in AllocTRES" in wrong["detail"]
    assert v.sacct_result(sacct_run("FAILED|gres/gpu=8"), c, 60)["status"] == "fail"
    late = v.sacct_result(sacct_run(""), c, 60)
    assert late["detail"] == "job 101 (sbatch rc=0) has no accounting record after 60 s"
    refused = v.sacct_result(sacct_run(None, sbatch_out="", rc="1", err="sbatch: error: Invalid partition"), c, 60)
    assert refused["status"] == "fail" and refused["detail"] == "sbatch failed, rc=1: sbatch: error: Invalid partition"


def test_sacct_and_preemption_without_a_usable_gpu_node():
    down = cluster("gpu01 down gpu:h100:8\ngpu02 down gpu:h100:8\n")
    assert v.sacct_result(SKIPPED, down, 60) == v.result("sacct", "", "fail", "not run: no usable node with GPUs")
    settings = v.preemption_settings("PreemptType = preempt/qos\n", "", "low", 60)
    assert v.preemption_result(SKIPPED, down, settings, "low", "high", 120)["detail"] == "not run: no usable node with GPUs"
    unknown = cluster(node="gpu09")
    assert "validate_preemption_node gpu09 is not known to Slurm" in v.sacct_result(SKIPPED, unknown, 60)["detail"]


def test_sacct_and_preemption_not_applicable_without_any_gpus():
    c = cluster("gpu01 idle (null)\ngpu02 idle (null)\n", {"gpu01": NO_GPUS, "gpu02": NO_GPUS})
    sacct = v.sacct_result(SKIPPED, c, 60)
    assert sacct["status"] == "not_applicable" and "no compute node has GPUs" in sacct["detail"]
    settings = v.preemption_settings("PreemptType = preempt/qos\n", "", "low", 60)
    assert v.preemption_result(SKIPPED, c, settings, "low", "high", 120)["status"] == "not_applicable"
    # nvidia-smi sees GPUs Slurm does not: a misconfiguration, not "no GPUs"
    c = cluster("gpu01 idle (null)\ngpu02 idle (null)\n", {"gpu01": FACTS_8, "gpu02": NO_GPUS})
    assert v.sacct_result(SKIPPED, c, 60)["status"] == "fail"


def test_preemption_settings_add_exempt_and_grace_time():
    config = "PreemptType             = preempt/qos\nPreemptMode             = REQUEUE\nPreemptExemptTime       = 00:00:10\n"
    settings = v.preemption_settings(config, "high|00:00:00|low\nlow|00:00:05|\n", "low", 60)
    assert settings == {"type": "preempt/qos", "mode": "REQUEUE", "extra_s": 15, "bound_s": 75, "bound_ms": 75000}
    assert v.preemption_settings("", "", "low", "0")["bound_s"] == 0
    with pytest.raises(v.ValidationInputError):
        v.preemption_settings("", "", "low", "soon")


def preemption_run(**values):
    out = {
        "low_sbatch_rc": "0", "low_sbatch": "201", "low_start_state": "RUNNING", "high_sbatch_rc": "0",
        "high_sbatch": "202", "waited_ms": "1500", "high_state": "RUNNING",
        "low_job": "JobId=201 JobName=deepops-validate JobState=PENDING Reason=BeginTime Restarts=1 BatchFlag=1",
    }
    out.update(values)
    return ran("".join(f"{key}={value}\n" for key, value in out.items() if value is not None))


SETTINGS = {"type": "preempt/qos", "mode": "REQUEUE", "extra_s": 0, "bound_s": 60, "bound_ms": 60000}


def test_preemption_verdicts():
    c = cluster()
    ok = v.preemption_result(preemption_run(), c, SETTINGS, "low", "high", 120)
    assert ok["status"] == "pass" and ok["node"] == "gpu01"
    assert ok["detail"] == (
        "high job 202 started after 1.5 s (bound 60 s); low job 201 requeued (Restarts=1, PENDING Reason=BeginTime); "
        "preempt/qos, PreemptMode=REQUEUE"
    )
    finished = v.preemption_result(preemption_run(high_state=""), c, SETTINGS, "low", "high", 120)
    assert finished["status"] == "pass"
    late = v.preemption_result(preemption_run(high_state="PENDING", waited_ms="61000"), c, SETTINGS, "low", "high", 120)
    assert late["status"] == "fail" and "still PENDING after 61.0 s (bound 60 s)" in late["detail"]
    too_slow = v.preemption_result(preemption_run(waited_ms="60100"), c, SETTINGS, "low", "high", 120)
    assert too_slow["status"] == "fail"
    extra = {**SETTINGS, "extra_s": 5, "bound_s": 65}
    assert "(bound 65 s, with 5 s of PreemptExemptTime and GraceTime)" in v.preemption_result(
        preemption_run(), c, extra, "low", "high", 120)["detail"]
    kept = v.preemption_result(
        preemption_run(low_job="JobId=201 JobState=RUNNING Reason=None Restarts=0"), c, SETTINGS, "low", "high", 120)
    assert kept["status"] == "fail" and "NOT requeued (Restarts=0, RUNNING Reason=None)" in kept["detail"]


def test_preemption_stops_early_and_says_where():
    c = cluster()

    def detail(**values):
        checked = v.preemption_result(preemption_run(**values), c, SETTINGS, "low", "high", 120)
        assert checked["status"] == "fail"
        return checked["detail"]

    assert detail(low_sbatch_rc="1", low_sbatch="sbatch: error: Invalid qos specification", low_start_state=None) == (
        "sbatch of the low job failed: sbatch: error: Invalid qos specification")
    assert detail(low_start_state="PENDING", high_sbatch_rc=None) == "the low job 201 did not start within 120 s (state PENDING)"
    assert detail(low_start_state="") == "the low job 201 did not start within 120 s (state gone)"
    assert detail(high_sbatch_rc="1", high_sbatch="sbatch: error: QOSMaxGRESPerUser").startswith("sbatch of the high job failed")
    none = v.preemption_result(SKIPPED, c, {**SETTINGS, "type": "preempt/none"}, "low", "high", 120)
    assert none["status"] == "fail" and none["detail"] == "not run: PreemptType is preempt/none (expected preempt/qos)"


def test_error_result():
    record = v.error_result("Validate | Read every node's state", {"msg": "non-zero return code", "stderr": "sinfo: error"}, "ctl01")
    assert record == v.result("validate", "ctl01", "fail", "Validate | Read every node's state: non-zero return code sinfo: error")


def test_details_are_truncated():
    long = "x " * 400
    result = v.hostname_result(ran("", rc=1, stderr=long), cluster())
    assert len(result["detail"]) < 400 and result["detail"].endswith("...")


# --------------------------------------------------------------------------
# the filter plugin: thin, and every filter the role calls exists

# In a fresh interpreter: once a test has loaded an inventory, Ansible's
# collection finder is installed in this one, and it imports plugins only for
# collections it loaded itself.
_FILTER_PROBE = """
import json
from ansible.errors import AnsibleFilterError
from ansible_collections.deepops.cluster.plugins.filter.validate import FilterModule

filters = FilterModule().filters()
try:
    filters["validate_selected_checks"](["bogus"])
    error = None
except AnsibleFilterError as exc:
    error = str(exc)
print(json.dumps({"names": sorted(filters), "error": error, "checks": filters["validate_selected_checks"](["gpus"])}))
"""


@pytest.fixture(scope="module")
def filter_probe():
    import json

    out = subprocess.run([sys.executable, "-c", _FILTER_PROBE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_role_calls_only_filters_the_plugin_has(filter_probe):
    used = set()
    for path in (ROLE / "tasks").glob("*.yml"):
        used |= set(re.findall(r"deepops\.cluster\.(validate_[a-z_]+)", path.read_text()))
    assert used and used <= set(filter_probe["names"]), used - set(filter_probe["names"])
    assert all(name.startswith("validate_") for name in filter_probe["names"])


def test_filters_call_the_module_utils_and_raise_ansible_filter_errors(filter_probe):
    assert filter_probe["checks"] == ["nodes", "hostname", "mpi", "mig", "dcgm", "nccl", "sacct", "preemption"]
    assert filter_probe["error"].startswith("validate_selected_checks: not a check: bogus")
